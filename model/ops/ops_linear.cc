// Contractions: linear, matmul, bmm, addmm, baddbmm, embedding, scaled_dot_product_attention.
#include <algorithm>

#include "common/status_macros.h"
#include "model/ops/registry.h"
#include "model/ops/shape_util.h"

namespace mapd {
namespace {

using Types = std::vector<TensorType>;

absl::StatusOr<Types> InferLinear(const OpContext& ctx) {
  const TensorType& x = ctx.input(0);
  const TensorType& w = ctx.input(1);
  MAPD_RETURN_IF_ERROR(ExpectRank(ctx, 0, 1, 64, "input x"));
  MAPD_RETURN_IF_ERROR(ExpectRank(ctx, 1, 1, 2, "weight"));
  MAPD_RETURN_IF_ERROR(ExpectFloating(ctx, 0, "input x"));
  const int64_t k = x.shape.back();
  const int64_t wk = w.shape.back();
  if (k != wk) {
    return ctx.Error("input x ", x.ToString(), " has ", k, " features but weight ", w.ToString(),
                     " expects ", wk);
  }
  Shape out(x.shape.begin(), x.shape.end() - 1);
  if (w.rank() == 2) out.push_back(w.shape[0]);
  if (ctx.has_input(2)) {
    const TensorType& b = ctx.input(2);
    const int64_t n = w.rank() == 2 ? w.shape[0] : 1;
    if (!(b.rank() == 1 && b.shape[0] == n) && !(b.rank() == 0)) {
      return ctx.Error("bias ", b.ToString(), " does not match ", n, " output features");
    }
  }
  return Types{{x.dtype, out}};
}

// torch.matmul semantics: 1-D operands are promoted and the added dim removed afterwards;
// leading (batch) dims broadcast.
absl::StatusOr<Types> InferMatmul(const OpContext& ctx) {
  Shape a = ctx.input(0).shape, b = ctx.input(1).shape;
  if (a.empty() || b.empty()) return ctx.Error("both operands need at least one dimension");
  const bool a1 = a.size() == 1, b1 = b.size() == 1;
  if (a1) a.insert(a.begin(), 1);
  if (b1) b.push_back(1);
  const int64_t k = a.back(), kb = b[b.size() - 2];
  if (k != kb) {
    return ctx.Error("inner dimensions differ: ", ctx.input(0).ToString(), " @ ", ctx.input(1).ToString());
  }
  Shape ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  MAPD_ASSIGN_OR_RETURN(Shape out, BroadcastShapes(ctx, ba, bb));
  if (!a1) out.push_back(a[a.size() - 2]);
  if (!b1) out.push_back(b.back());
  return Types{{PromoteDTypes(ctx.input(0).dtype, ctx.input(1).dtype), out}};
}

absl::StatusOr<Types> InferBmm(const OpContext& ctx) {
  MAPD_RETURN_IF_ERROR(ExpectRank(ctx, 0, 3, 3, "batch1"));
  MAPD_RETURN_IF_ERROR(ExpectRank(ctx, 1, 3, 3, "batch2"));
  const Shape& a = ctx.input(0).shape;
  const Shape& b = ctx.input(1).shape;
  if (a[0] != b[0] || a[2] != b[1]) {
    return ctx.Error("shapes do not multiply: ", ctx.input(0).ToString(), " @ ", ctx.input(1).ToString());
  }
  return Types{{ctx.input(0).dtype, {a[0], a[1], b[2]}}};
}

// addmm(c, a, b) = beta*c + alpha*(a@b); baddbmm is the batched form.
absl::StatusOr<Types> InferAddMm(const OpContext& ctx, int rank) {
  MAPD_RETURN_IF_ERROR(ExpectRank(ctx, 1, rank, rank, "mat1"));
  MAPD_RETURN_IF_ERROR(ExpectRank(ctx, 2, rank, rank, "mat2"));
  const Shape& a = ctx.input(1).shape;
  const Shape& b = ctx.input(2).shape;
  Shape out;
  if (rank == 2) {
    if (a[1] != b[0]) return ctx.Error("shapes do not multiply: ", ctx.input(1).ToString(), " @ ", ctx.input(2).ToString());
    out = {a[0], b[1]};
  } else {
    if (a[0] != b[0] || a[2] != b[1]) {
      return ctx.Error("shapes do not multiply: ", ctx.input(1).ToString(), " @ ", ctx.input(2).ToString());
    }
    out = {a[0], a[1], b[2]};
  }
  MAPD_ASSIGN_OR_RETURN(Shape bc, BroadcastShapes(ctx, ctx.input(0).shape, out));
  if (bc != out) {
    return ctx.Error("input ", ctx.input(0).ToString(), " does not broadcast to the product's shape ",
                     ShapeToString(out));
  }
  return Types{{ctx.input(1).dtype, out}};
}

absl::StatusOr<Types> InferEmbedding(const OpContext& ctx) {
  const TensorType& idx = ctx.input(0);
  const TensorType& w = ctx.input(1);
  if (!IsIntegral(idx.dtype)) return ctx.Error("indices must be an integer tensor, got ", idx.ToString());
  MAPD_RETURN_IF_ERROR(ExpectRank(ctx, 1, 2, 2, "weight"));
  // At the aten level only -1 means "no padding row"; torch.nn.functional.embedding turns
  // other negative indices into rows before it calls aten::embedding.
  MAPD_ASSIGN_OR_RETURN(int64_t pad, ctx.Int("padding_idx", -1));
  if (pad != -1 && (pad < 0 || pad >= w.shape[0])) {
    return ctx.Error("padding_idx ", pad, " must be -1 (none) or a row in [0, ", w.shape[0], ")");
  }
  Shape out = idx.shape;
  out.push_back(w.shape[1]);
  return Types{{w.dtype, out}};
}

// q [..., Hq, L, E], k [..., Hk, S, E], v [..., Hk, S, Ev]; Hq a multiple of Hk (grouped-query
// attention shares each k/v head among Hq/Hk query heads); mask broadcasts to [..., Hq, L, S].
absl::StatusOr<Types> InferSdpa(const OpContext& ctx) {
  const TensorType& q = ctx.input(0);
  const TensorType& k = ctx.input(1);
  const TensorType& v = ctx.input(2);
  MAPD_RETURN_IF_ERROR(ExpectRank(ctx, 0, 2, 64, "query"));
  MAPD_RETURN_IF_ERROR(ExpectFloating(ctx, 0, "query"));
  if (k.rank() != q.rank() || v.rank() != q.rank()) {
    return ctx.Error("query, key and value must have the same rank: ", q.ToString(), ", ",
                     k.ToString(), ", ", v.ToString());
  }
  const int r = q.rank();
  const int64_t L = q.shape[r - 2], E = q.shape[r - 1];
  const int64_t S = k.shape[r - 2];
  if (k.shape[r - 1] != E) return ctx.Error("key ", k.ToString(), " has a head size other than the query's ", E);
  if (v.shape[r - 2] != S) return ctx.Error("value ", v.ToString(), " has a sequence length other than the key's ", S);
  for (int d = 0; d < r - 2; ++d) {
    const bool heads = d == r - 3;
    if (k.shape[d] != v.shape[d]) return ctx.Error("key ", k.ToString(), " and value ", v.ToString(), " differ in dimension ", d);
    if (heads) {
      if (k.shape[d] == 0 || q.shape[d] % k.shape[d] != 0) {
        return ctx.Error("query heads (", q.shape[d], ") must be a multiple of key/value heads (",
                         k.shape[d], ")");
      }
    } else if (q.shape[d] != k.shape[d]) {
      return ctx.Error("query ", q.ToString(), " and key ", k.ToString(), " differ in batch dimension ", d);
    }
  }
  Shape out = q.shape;
  out[r - 1] = v.shape[r - 1];
  MAPD_ASSIGN_OR_RETURN(bool causal, ctx.Bool("is_causal", false));
  if (ctx.has_input(3)) {
    if (causal) return ctx.Error("give either an attention mask or is_causal=true, not both");
    Shape scores = q.shape;
    scores[r - 1] = S;
    MAPD_ASSIGN_OR_RETURN(Shape bc, BroadcastShapes(ctx, ctx.input(3).shape, scores));
    if (bc != scores) {
      return ctx.Error("attention mask ", ctx.input(3).ToString(), " does not broadcast to the scores ",
                       ShapeToString(scores));
    }
  }
  MAPD_ASSIGN_OR_RETURN(double p, ctx.Float("dropout_p", 0.0));
  if (p < 0 || p >= 1) return ctx.Error("dropout_p must be in [0, 1), got ", p);
  (void)L;
  return Types{{q.dtype, out}};
}


// ---- costs and saved tensors ----

// A contraction of M×K by K×N, B times: 2BMKN FLOPs forward and for each operand's gradient.
struct Contraction {
  double batch = 1, m = 1, k = 1, n = 1;
  double Flops() const { return 2 * batch * m * k * n; }
};

Contraction MatmulDims(const TensorType& a, const TensorType& b, const TensorType& out) {
  Contraction c;
  c.k = a.rank() == 0 ? 1 : static_cast<double>(a.shape.back());
  c.m = a.rank() >= 2 ? static_cast<double>(a.shape[a.rank() - 2]) : 1;
  c.n = b.rank() >= 2 ? static_cast<double>(b.shape.back()) : 1;
  const double out_elems = static_cast<double>(out.NumElements());
  c.batch = out_elems / std::max(1.0, c.m * c.n);
  return c;
}

OpCost LinearCost(const CostContext& c) {
  const TensorType& x = c.op.input(0);
  const TensorType& w = c.op.input(1);
  const double k = static_cast<double>(x.shape.back());
  const double m = static_cast<double>(x.NumElements()) / std::max(1.0, k);
  const double n = w.rank() == 2 ? static_cast<double>(w.shape[0]) : 1;
  OpCost cost;
  cost.flops = 2 * m * k * n + (c.op.has_input(2) ? m * n : 0);
  cost.flops_per_product = 2 * m * k * n;
  cost.grad_flops = {c.input_requires_grad(0) ? 2 * m * k * n : 0, c.input_requires_grad(1) ? 2 * m * k * n : 0,
                     c.input_requires_grad(2) ? m * n : 0};
  cost.bytes = IoBytes(c);
  return cost;
}

// at::linear (addmm/matmul): the weight is kept for the input's gradient, the input for the
// weight's; a non-contiguous input is copied by the reshape to 2-D, and the copy is kept.
SavedSpec LinearSaved(const CostContext& c) {
  SavedSpec s;
  if (c.input_requires_grad(0)) s.inputs.push_back(1);
  if (c.input_requires_grad(1)) {
    if (c.input_contiguous(0)) s.inputs.push_back(0);
    else s.extra_bytes += c.op.input(0).NumBytes();
  }
  return s;
}

OpCost MatmulCost(const CostContext& c) {
  const Contraction d = MatmulDims(c.op.input(c.op.num_inputs() - 2), c.op.input(c.op.num_inputs() - 1), c.outputs[0]);
  OpCost cost;
  cost.flops = d.Flops();
  cost.flops_per_product = 2 * d.m * d.k * d.n;
  const int a = c.op.num_inputs() - 2;
  cost.grad_flops.assign(c.op.num_inputs(), 0.0);
  if (c.input_requires_grad(a)) cost.grad_flops[a] = d.Flops();
  if (c.input_requires_grad(a + 1)) cost.grad_flops[a + 1] = d.Flops();
  if (c.op.num_inputs() == 3) {
    cost.flops += 2 * static_cast<double>(c.outputs[0].NumElements());
    if (c.input_requires_grad(0)) cost.grad_flops[0] = static_cast<double>(c.outputs[0].NumElements());
  }
  cost.bytes = IoBytes(c);
  return cost;
}

// Each operand is kept for the other's gradient. Batched operands that are not contiguous are
// copied when at::matmul folds their batch dimensions, and autograd keeps the copies.
SavedSpec MatmulSaved(const CostContext& c) {
  SavedSpec s;
  const int a = c.op.num_inputs() - 2;
  auto keep = [&](int i) {
    if (c.op.input(i).rank() >= 3 && !c.input_contiguous(i)) s.extra_bytes += c.op.input(i).NumBytes();
    else s.inputs.push_back(i);
  };
  if (c.input_requires_grad(a + 1)) keep(a);
  if (c.input_requires_grad(a)) keep(a + 1);
  return s;
}

OpCost EmbeddingCost(const CostContext& c) {
  OpCost cost;
  cost.bytes = 2 * c.outputs[0].NumBytes() + c.op.input(0).NumBytes();
  // The weight's gradient is a dense table: zeroed, then rows accumulated.
  cost.grad_flops = {0, c.input_requires_grad(1) ? static_cast<double>(c.outputs[0].NumElements()) : 0};
  return cost;
}

struct AttentionDims {
  double batch_heads, l, s, e, ev;
  int64_t score_bytes;
};
AttentionDims AttnDims(const CostContext& c) {
  const TensorType& q = c.op.input(0);
  const TensorType& v = c.op.input(2);
  const int r = q.rank();
  AttentionDims d;
  d.l = static_cast<double>(q.shape[r - 2]);
  d.e = static_cast<double>(q.shape[r - 1]);
  d.s = static_cast<double>(c.op.input(1).shape[r - 2]);
  d.ev = static_cast<double>(v.shape[r - 1]);
  d.batch_heads = static_cast<double>(q.NumElements()) / std::max(1.0, d.l * d.e);
  d.score_bytes = static_cast<int64_t>(d.batch_heads * d.l * d.s) * DTypeSize(q.dtype);
  return d;
}

bool AttnDropout(const CostContext& c) {
  auto p = c.op.Float("dropout_p", 0.0);
  return p.ok() && *p > 0;
}

// Composite in the runtime: repeat k/v heads (GQA), q@k^T, scale, mask, softmax, dropout, @v.
OpCost SdpaCost(const CostContext& c) {
  const AttentionDims d = AttnDims(c);
  const double scores = d.batch_heads * d.l * d.s;
  OpCost cost;
  cost.flops = 2 * scores * d.e + 2 * scores * d.ev + 7 * scores;
  // dP = dO v^T is charged to q's gradient, with the softmax backward.
  cost.grad_flops = {c.input_requires_grad(0) ? 2 * scores * d.e + 2 * scores * d.ev + 6 * scores : 0,
                     c.input_requires_grad(1) ? 2 * scores * d.e : 0, c.input_requires_grad(2) ? 2 * scores * d.ev : 0, 0};
  cost.bytes = IoBytes(c) + 6 * d.score_bytes;
  // The scores (scaled and masked in place) live until softmax has made its output.
  cost.workspace_bytes = d.score_bytes;
  // Backward: the probabilities' gradient and the scores' gradient (softmax backward) at once.
  cost.grad_workspace_bytes = 2 * d.score_bytes;
  cost.kernels = 6;
  return cost;
}

SavedSpec SdpaSaved(const CostContext& c) {
  SavedSpec s;
  if (!c.any_requires_grad()) return s;
  const AttentionDims d = AttnDims(c);
  const TensorType& q = c.op.input(0);
  const bool gqa = c.op.input(1).shape[q.rank() - 3] != q.shape[q.rank() - 3];
  // q@k^T keeps q and k (repeated k/v heads are new tensors under GQA).
  s.inputs.push_back(0);
  if (gqa) {
    const int64_t rep = q.shape[q.rank() - 3] / c.op.input(1).shape[q.rank() - 3];
    s.extra_bytes += rep * (c.op.input(1).NumBytes() + c.op.input(2).NumBytes());
  } else {
    s.inputs.push_back(1);
    s.inputs.push_back(2);
  }
  // The bool mask masked_fill keeps: [L, S] for is_causal, the negated attn_mask otherwise.
  auto causal = c.op.Bool("is_causal", false);
  if (c.op.has_input(3)) s.extra_bytes += c.op.input(3).NumElements();
  else if (causal.ok() && *causal) s.extra_bytes += static_cast<int64_t>(d.l * d.s);
  s.extra_bytes += d.score_bytes;  // softmax output
  // Dropout keeps its noise and the matmul with v keeps the dropped-out probabilities.
  if (AttnDropout(c)) s.extra_bytes += 2 * d.score_bytes;
  return s;
}

// ---- sharding rules (docs/sharding.md) ----

// linear: x[..., k], w[n, k], b[n] -> y[..., n]. Splitting n is column parallelism (w S(0),
// y S(last)), splitting k row parallelism (x S(last), w S(1), y Partial, the bias Partial so it
// is added once), splitting a batch dimension data parallelism. A 1-D weight [k] drops n.
absl::StatusOr<ShardingRule> LinearSharding(const CostContext& c) {
  ShardingRule r = EmptyRule(c);
  LabelPool pool("kn");
  const bool has_n = c.op.input(1).rank() == 2;
  const std::string batch = pool.Fresh(c.op.input(0).rank() - 1);
  r.inputs[0] = batch + "k";
  r.inputs[1] = has_n ? "nk" : "k";
  r.outputs[0] = batch + (has_n ? "n" : "");
  if (c.op.has_input(2)) {
    r.inputs[2] = AlignLabels(c.op.input(2).shape, c.outputs[0].shape, r.outputs[0], pool, &r.unsplittable);
    r.addends = {2};
  }
  r.linear_reduced = "k";
  MAPD_RETURN_IF_ERROR(pool.status());
  return r;
}

// matmul: a[..., m, k] @ b[..., k, n] -> [..., m, n] with broadcast batch dimensions (a
// broadcast size-1 batch dimension has its own unsplittable label); a 1-D operand has no m
// (or n). `addend` (addmm/baddbmm: input 0, scaled by beta) broadcasts to the output and is
// Partial when k is split.
absl::StatusOr<ShardingRule> ContractionSharding(const CostContext& c, bool has_addend) {
  ShardingRule r = EmptyRule(c);
  LabelPool pool("mkn");
  const int ia = has_addend ? 1 : 0;
  const Shape& a = c.op.input(ia).shape;
  const Shape& b = c.op.input(ia + 1).shape;
  const Shape& out = c.outputs[0].shape;
  const bool a1 = a.size() == 1, b1 = b.size() == 1;
  const int batch_rank = static_cast<int>(out.size()) - (a1 ? 0 : 1) - (b1 ? 0 : 1);
  const Shape out_batch(out.begin(), out.begin() + batch_rank);
  const std::string batch = pool.Fresh(batch_rank);
  auto operand = [&](const Shape& s, bool one_d, const char* matrix) {
    if (one_d) return std::string("k");
    const Shape sb(s.begin(), s.end() - 2);
    return AlignLabels(sb, out_batch, batch, pool, &r.unsplittable) + matrix;
  };
  r.inputs[ia] = operand(a, a1, "mk");
  r.inputs[ia + 1] = operand(b, b1, "kn");
  r.outputs[0] = batch + (a1 ? "" : "m") + (b1 ? "" : "n");
  if (has_addend) {
    r.inputs[0] = AlignLabels(c.op.input(0).shape, out, r.outputs[0], pool, &r.unsplittable);
    r.addends = {0};
  }
  r.linear_reduced = "k";
  MAPD_RETURN_IF_ERROR(pool.status());
  return r;
}

// embedding: indices[...], weight[v, d] -> out[..., d]. The vocabulary v is unsplittable for
// now: a vocabulary-parallel embedding needs a masked gather (rows outside the device's range
// read as zeros, the result Partial), which the runtime does not have yet. Splitting d is a
// column-parallel embedding; splitting the indices' dimensions is data parallelism.
absl::StatusOr<ShardingRule> EmbeddingSharding(const CostContext& c) {
  ShardingRule r = EmptyRule(c);
  LabelPool pool("vd");
  const std::string idx = pool.Fresh(c.op.input(0).rank());
  r.inputs = {idx, "vd"};
  r.outputs = {idx + "d"};
  r.unsplittable = "v";
  MAPD_RETURN_IF_ERROR(pool.status());
  return r;
}

// scaled_dot_product_attention: q[..., h, l, e], k[..., h, s, e], v[..., h, s, f] ->
// out[..., h, l, f]; the mask broadcasts to the scores [..., h, l, s].
// - batch dimensions and heads split (each device attends with its heads). With grouped-query
//   attention (Hk < Hq k/v heads) query head i reads k/v head i / (Hq/Hk) (the runtime
//   repeat_interleaves k and v), so the query heads are a merged dimension [Hk, Hq/Hk] whose
//   outermost factor is the k/v heads: q's heads and k/v's heads share the label h, as
//   repeat_interleave's input and output do — splitting h in n parts gives each device Hk/n
//   k/v heads and exactly the Hq/n query heads that read them (n must divide both);
// - l splits (query rows are independent), except under is_causal, whose mask depends on the
//   global row index (a split would need an offset mask; an explicit attn_mask is split along
//   with the rows and is fine);
// - s and e are unsplittable: both feed the softmax over s (e is contracted inside q k^T, but
//   the sum is then normalised, so it is not a linear reduction of the output);
// - f splits: each device needs the whole softmax but only its columns of v.
absl::StatusOr<ShardingRule> SdpaSharding(const CostContext& c) {
  ShardingRule r = EmptyRule(c);
  LabelPool pool("hlsef");
  const TensorType& q = c.op.input(0);
  const int rank = q.rank();
  const int nbatch = std::max(rank - 3, 0);
  const std::string batch = pool.Fresh(nbatch);
  const std::string h = rank >= 3 ? "h" : "";
  r.inputs[0] = batch + h + "le";
  r.inputs[1] = batch + h + "se";
  r.inputs[2] = batch + h + "sf";
  r.outputs[0] = batch + h + "lf";
  r.unsplittable += "se";
  auto causal = c.op.Bool("is_causal", false);
  if (causal.ok() && *causal) r.unsplittable += "l";
  if (c.op.has_input(3)) {
    Shape scores = q.shape;
    scores[rank - 1] = c.op.input(1).shape[rank - 2];
    r.inputs[3] = AlignLabels(c.op.input(3).shape, scores, batch + h + "ls", pool, &r.unsplittable);
  }
  MAPD_RETURN_IF_ERROR(pool.status());
  return r;
}

}  // namespace

void RegisterLinearOps(OpRegistry& r) {
  r.Add(Op("linear", "y = x @ w^T + b")
          .Inputs({{"x"}, {"weight"}, {"bias", true}})
          .Infer(InferLinear)
          .Cost(LinearCost)
          .Saved(LinearSaved)
          .Sharding(LinearSharding));
  r.Add(Op("matmul", "torch.matmul (batched, broadcasting)")
          .Inputs({{"a"}, {"b"}})
          .Infer(InferMatmul)
          .Cost(MatmulCost)
          .Saved(MatmulSaved)
          .Sharding([](const CostContext& c) { return ContractionSharding(c, false); }));
  r.Add(Op("bmm", "batched matrix product [b,n,m]@[b,m,p]")
          .Inputs({{"a"}, {"b"}})
          .Infer(InferBmm)
          .Cost(MatmulCost)
          .Saved(MatmulSaved)
          .Sharding([](const CostContext& c) { return ContractionSharding(c, false); }));
  r.Add(Op("addmm", "beta*c + alpha*(a@b)")
          .Inputs({{"c"}, {"a"}, {"b"}})
          .Attrs({{"beta", AttrKind::kNumber}, {"alpha", AttrKind::kNumber}})
          .Infer([](const OpContext& c) { return InferAddMm(c, 2); })
          .Cost(MatmulCost)
          .Saved(MatmulSaved)
          .Sharding([](const CostContext& c) { return ContractionSharding(c, true); }));
  r.Add(Op("baddbmm", "beta*c + alpha*bmm(a,b)")
          .Inputs({{"c"}, {"a"}, {"b"}})
          .Attrs({{"beta", AttrKind::kNumber}, {"alpha", AttrKind::kNumber}})
          .Infer([](const OpContext& c) { return InferAddMm(c, 3); })
          .Cost(MatmulCost)
          .Saved(MatmulSaved)
          .Sharding([](const CostContext& c) { return ContractionSharding(c, true); }));
  r.Add(Op("embedding", "rows of weight picked by integer indices")
          .Inputs({{"indices"}, {"weight"}})
          .Attrs({{"padding_idx", AttrKind::kInt}})
          .Infer(InferEmbedding)
          .Cost(EmbeddingCost)
          .Saved(Saves({0}, {}))
          .Sharding(EmbeddingSharding));
  r.Add(Op("scaled_dot_product_attention", "softmax(q k^T * scale + mask) v, with grouped-query k/v heads")
          .Inputs({{"query"}, {"key"}, {"value"}, {"attn_mask", true}})
          .Attrs({{"is_causal", AttrKind::kBool}, {"dropout_p", AttrKind::kFloat},
                     {"scale", AttrKind::kFloat, false, "default 1/sqrt(E)"}})
          .Infer(InferSdpa)
          .Cost(SdpaCost)
          .Saved(SdpaSaved)
          .Sharding(SdpaSharding));
}

}  // namespace mapd

// Contractions: linear, matmul, bmm, addmm, baddbmm, embedding, scaled_dot_product_attention.
#include "planner/ops/registry.h"
#include "planner/ops/shape_util.h"
#include "planner/util/status_macros.h"

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
  MAPD_ASSIGN_OR_RETURN(int64_t pad, ctx.Int("padding_idx", -1));
  if (pad >= w.shape[0] || pad < -w.shape[0]) {
    return ctx.Error("padding_idx ", pad, " is outside the ", w.shape[0], " rows of the table");
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

}  // namespace

void RegisterLinearOps(OpRegistry& r) {
  (void)r.Register({"linear", "y = x @ w^T + b", {{"x"}, {"weight"}, {"bias", true}}, false, {}, {}, InferLinear});
  (void)r.Register({"matmul", "torch.matmul (batched, broadcasting)", {{"a"}, {"b"}}, false, {}, {}, InferMatmul});
  (void)r.Register({"bmm", "batched matrix product [b,n,m]@[b,m,p]", {{"a"}, {"b"}}, false, {}, {}, InferBmm});
  (void)r.Register({"addmm", "beta*c + alpha*(a@b)", {{"c"}, {"a"}, {"b"}}, false,
                    {{"beta", AttrKind::kNumber}, {"alpha", AttrKind::kNumber}}, {},
                    [](const OpContext& c) { return InferAddMm(c, 2); }});
  (void)r.Register({"baddbmm", "beta*c + alpha*bmm(a,b)", {{"c"}, {"a"}, {"b"}}, false,
                    {{"beta", AttrKind::kNumber}, {"alpha", AttrKind::kNumber}}, {},
                    [](const OpContext& c) { return InferAddMm(c, 3); }});
  (void)r.Register({"embedding", "rows of weight picked by integer indices", {{"indices"}, {"weight"}}, false,
                    {{"padding_idx", AttrKind::kInt}}, {}, InferEmbedding});
  (void)r.Register({"scaled_dot_product_attention",
                    "softmax(q k^T * scale + mask) v, with grouped-query k/v heads",
                    {{"query"}, {"key"}, {"value"}, {"attn_mask", true}}, false,
                    {{"is_causal", AttrKind::kBool}, {"dropout_p", AttrKind::kFloat},
                     {"scale", AttrKind::kFloat, false, "default 1/sqrt(E)"}},
                    {}, InferSdpa});
}

}  // namespace mapd

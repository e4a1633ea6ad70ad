// Normalisations: layer_norm, rms_norm, batch_norm, group_norm, softmax, log_softmax.
#include <algorithm>

#include "common/status_macros.h"
#include "planner/ops/registry.h"
#include "planner/ops/shape_util.h"

namespace mapd {
namespace {

using Types = std::vector<TensorType>;

// The trailing dims of x must equal normalized_shape; weight/bias (when present) have it.
absl::StatusOr<Types> InferTrailingNorm(const OpContext& ctx, int num_affine) {
  const TensorType& x = ctx.input(0);
  MAPD_RETURN_IF_ERROR(ExpectFloating(ctx, 0, "input"));
  MAPD_ASSIGN_OR_RETURN(std::vector<int64_t> ns, ctx.Ints("normalized_shape"));
  if (ns.empty() || ns.size() > x.shape.size()) {
    return ctx.Error("normalized_shape ", ShapeToString(ns), " does not fit input ", x.ToString());
  }
  Shape tail(x.shape.end() - ns.size(), x.shape.end());
  if (tail != ns) {
    return ctx.Error("input ", x.ToString(), " does not end in normalized_shape ", ShapeToString(ns));
  }
  for (int i = 1; i <= num_affine; ++i) {
    if (ctx.has_input(i) && ctx.input(i).shape != ns) {
      return ctx.Error(i == 1 ? "weight " : "bias ", ctx.input(i).ToString(),
                       " must have shape normalized_shape ", ShapeToString(ns));
    }
  }
  MAPD_ASSIGN_OR_RETURN(double eps, ctx.Float("eps", 1e-5));
  if (eps < 0) return ctx.Error("eps must be non-negative, got ", eps);
  return Types{x};
}

// batch_norm(x[N,C,...], weight?, bias?, running_mean?, running_var?). In training mode with
// running statistics it defines three values: y, the new running mean and the new running
// variance (the buffers' values after the step); otherwise y only.
absl::StatusOr<Types> InferBatchNorm(const OpContext& ctx) {
  const TensorType& x = ctx.input(0);
  MAPD_RETURN_IF_ERROR(ExpectRank(ctx, 0, 2, 64, "input"));
  MAPD_RETURN_IF_ERROR(ExpectFloating(ctx, 0, "input"));
  const int64_t c = x.shape[1];
  static const char* kNames[] = {"", "weight", "bias", "running_mean", "running_var"};
  for (int i = 1; i <= 4; ++i) {
    if (ctx.has_input(i) && ctx.input(i).shape != Shape{c}) {
      return ctx.Error(kNames[i], " ", ctx.input(i).ToString(), " must have shape [", c, "] (channels of ",
                       x.ToString(), ")");
    }
  }
  MAPD_ASSIGN_OR_RETURN(bool training, ctx.Bool("training"));
  const bool stats = ctx.has_input(3) && ctx.has_input(4);
  if (ctx.has_input(3) != ctx.has_input(4)) {
    return ctx.Error("give both running_mean and running_var, or neither");
  }
  if (!training && !stats) return ctx.Error("eval mode (training=false) needs running statistics");
  if (training) {
    int64_t per_channel = NumElements(x.shape) / std::max<int64_t>(c, 1);
    if (per_channel <= 1) {
      return ctx.Error("training mode needs more than one value per channel, got input ", x.ToString());
    }
  }
  MAPD_ASSIGN_OR_RETURN(double momentum, ctx.Float("momentum", 0.1));
  if (momentum < 0 || momentum > 1) return ctx.Error("momentum must be in [0, 1], got ", momentum);
  if (training && stats) return Types{x, ctx.input(3), ctx.input(4)};
  return Types{x};
}

// group_norm(x[N,C,...], weight?[C], bias?[C]): statistics per sample and group of
// C / num_groups channels (instance norm is num_groups = C; the importer maps it so).
absl::StatusOr<Types> InferGroupNorm(const OpContext& ctx) {
  const TensorType& x = ctx.input(0);
  MAPD_RETURN_IF_ERROR(ExpectRank(ctx, 0, 2, 64, "input"));
  MAPD_RETURN_IF_ERROR(ExpectFloating(ctx, 0, "input"));
  MAPD_ASSIGN_OR_RETURN(int64_t groups, ctx.Int("num_groups"));
  const int64_t c = x.shape[1];
  if (groups <= 0 || c % groups != 0) {
    return ctx.Error("num_groups=", groups, " must divide the ", c, " channels of ", x.ToString());
  }
  for (int i = 1; i <= 2; ++i) {
    if (ctx.has_input(i) && ctx.input(i).shape != Shape{c}) {
      return ctx.Error(i == 1 ? "weight " : "bias ", ctx.input(i).ToString(), " must have shape [", c, "]");
    }
  }
  MAPD_ASSIGN_OR_RETURN(double eps, ctx.Float("eps", 1e-5));
  if (eps < 0) return ctx.Error("eps must be non-negative, got ", eps);
  return Types{x};
}

absl::StatusOr<Types> InferSoftmax(const OpContext& ctx) {
  const TensorType& x = ctx.input(0);
  MAPD_ASSIGN_OR_RETURN(int64_t dim, ctx.Int("dim"));
  if (x.rank() > 0) {
    MAPD_RETURN_IF_ERROR(NormalizeDim(ctx, dim, x.rank()).status());
  }
  DType out = IsFloating(x.dtype) ? x.dtype : v1::FLOAT32;
  MAPD_ASSIGN_OR_RETURN(out, ctx.DTypeAttr("dtype", out));
  return Types{{out, x.shape}};
}


// ---- costs and saved tensors ----

// Rows normalised by a layer/RMS norm: elements / prod(normalized_shape).
int64_t NormRows(const CostContext& c) {
  auto ns = c.op.Ints("normalized_shape");
  int64_t inner = 1;
  if (ns.ok()) {
    for (int64_t d : *ns) inner *= d;
  }
  return c.op.input(0).NumElements() / std::max<int64_t>(inner, 1);
}

// at::layer_norm keeps the input, weight, bias and per-row f32 mean and rstd.
SavedSpec LayerNormSaved(const CostContext& c) {
  SavedSpec s;
  if (!c.any_requires_grad()) return s;
  s.inputs = {0};
  if (c.op.has_input(1)) s.inputs.push_back(1);
  if (c.op.has_input(2)) s.inputs.push_back(2);
  s.extra_bytes = 2 * NormRows(c) * 4;
  return s;
}

// The runtime's RMSNorm is x * rsqrt(mean(x^2) + eps) * w: pow keeps x; the mean over the
// normalised dims keeps x^2 (a mean over listed dims keeps its input); rsqrt keeps its per-row
// output; x*r keeps x and r; (x*r)*w keeps the new tensor x*r and w.
SavedSpec RmsNormSaved(const CostContext& c) {
  SavedSpec s;
  if (!c.any_requires_grad()) return s;
  const TensorType& x = c.op.input(0);
  s.inputs = {0};
  s.extra_bytes += x.NumBytes();  // x^2
  if (c.op.has_input(1)) {
    s.inputs.push_back(1);
    s.extra_bytes += x.NumBytes();  // x * r, kept by the multiplication with the weight
  }
  s.extra_bytes += NormRows(c) * DTypeSize(x.dtype);  // rsqrt output
  return s;
}

OpCost RmsNormCost(const CostContext& c) {
  OpCost cost = ElementwiseCost(4, 8)(c);
  cost.kernels = 5;
  // Backward of the composite: the gradients of x*r and of x^2 beside x's.
  cost.grad_workspace_bytes = 2 * c.op.input(0).NumBytes();
  return cost;
}

// CPU batch-norm backward makes one input-sized temporary beside the input's gradient
// (measured with MAPD_ALLOC_TRACE).
OpCost BatchNormCost(const CostContext& c) {
  OpCost cost = ElementwiseCost(8, 10)(c);
  if (c.any_requires_grad()) cost.grad_workspace_bytes = c.op.input(0).NumBytes();
  return cost;
}

// Batch norm keeps the input, weight and per-channel f32 mean and inverse std.
SavedSpec BatchNormSaved(const CostContext& c) {
  SavedSpec s;
  if (!c.any_requires_grad()) return s;
  s.inputs = {0};
  if (c.op.has_input(1)) s.inputs.push_back(1);
  s.extra_bytes = 2 * c.op.input(0).shape[1] * 4;
  return s;
}

// native_group_norm keeps the input, weight and per-(sample, group) mean and rstd in x's dtype.
SavedSpec GroupNormSaved(const CostContext& c) {
  SavedSpec s;
  if (!c.any_requires_grad()) return s;
  s.inputs = {0};
  if (c.op.has_input(1)) s.inputs.push_back(1);
  auto groups = c.op.Int("num_groups");
  const TensorType& x = c.op.input(0);
  s.extra_bytes = 2 * x.shape[0] * (groups.ok() ? *groups : 1) * DTypeSize(x.dtype);
  return s;
}

// ---- sharding rules (docs/sharding.md) ----

// layer_norm / rms_norm: x[..., normalised] -> y[..., normalised]; the normalised dimensions
// (and the affine weight/bias over them) are unsplittable, the leading ones split freely.
absl::StatusOr<ShardingRule> TrailingNormSharding(const CostContext& c) {
  ShardingRule r = EmptyRule(c);
  LabelPool pool;
  const TensorType& x = c.op.input(0);
  auto ns = c.op.Ints("normalized_shape");
  const int m = ns.ok() ? static_cast<int>(ns->size()) : x.rank();
  const std::string lead = pool.Fresh(x.rank() - m);
  const std::string norm = pool.Fresh(m);
  r.inputs[0] = lead + norm;
  for (int i = 1; i < c.op.num_inputs(); ++i) {
    if (c.op.has_input(i)) r.inputs[i] = norm;
  }
  r.outputs[0] = lead + norm;
  r.unsplittable = norm;
  MAPD_RETURN_IF_ERROR(pool.status());
  return r;
}

// batch_norm and group_norm: x[n, c, spatial...]; weight, bias and running statistics [c].
// batch_norm: channels split. In training the statistics are reduced over n and the spatial
// dimensions, so those are unsplittable (a split batch needs SyncBatchNorm, whose all-reduce of
// the statistics the runtime does not have yet); in eval mode the op is elementwise per channel
// and every dimension splits. group_norm: the batch splits; the channels (grouped for the
// statistics) and the spatial dimensions are unsplittable.
absl::StatusOr<ShardingRule> ChannelNormSharding(const CostContext& c) {
  ShardingRule r = EmptyRule(c);
  LabelPool pool("nc");
  const std::string spatial = pool.Fresh(c.op.input(0).rank() - 2);
  r.inputs[0] = "nc" + spatial;
  for (int i = 1; i < c.op.num_inputs(); ++i) {
    if (c.op.has_input(i)) r.inputs[i] = "c";
  }
  r.outputs[0] = r.inputs[0];
  for (size_t o = 1; o < r.outputs.size(); ++o) r.outputs[o] = "c";  // new running mean and variance
  if (c.op.op() == "group_norm") {
    r.unsplittable = "c" + spatial;
  } else {
    auto training = c.op.Bool("training");
    if (!training.ok() || *training) r.unsplittable = "n" + spatial;
  }
  MAPD_RETURN_IF_ERROR(pool.status());
  return r;
}

// softmax / log_softmax: the normalised dimension is unsplittable.
absl::StatusOr<ShardingRule> SoftmaxSharding(const CostContext& c) {
  ShardingRule r = EmptyRule(c);
  LabelPool pool;
  const int rank = c.op.input(0).rank();
  r.inputs[0] = pool.Fresh(rank);
  r.outputs[0] = r.inputs[0];
  auto dim = c.op.Int("dim");
  if (rank > 0 && dim.ok()) r.unsplittable.push_back(r.inputs[0][(*dim % rank + rank) % rank]);
  MAPD_RETURN_IF_ERROR(pool.status());
  return r;
}

}  // namespace

void RegisterNormOps(OpRegistry& r) {
  r.Add(Op("layer_norm", "normalise over the trailing normalized_shape dims")
          .Inputs({{"x"}, {"weight", true}, {"bias", true}})
          .Attrs({{"normalized_shape", AttrKind::kInts, true}, {"eps", AttrKind::kFloat}})
          .Infer([](const OpContext& c) { return InferTrailingNorm(c, 2); })
          .Cost(ElementwiseCost(8, 10))
          .Saved(LayerNormSaved)
          .Sharding(TrailingNormSharding));
  r.Add(Op("rms_norm", "x / sqrt(mean(x^2) + eps) * weight over the trailing dims")
          .Inputs({{"x"}, {"weight", true}})
          .Attrs({{"normalized_shape", AttrKind::kInts, true}, {"eps", AttrKind::kFloat}})
          .Infer([](const OpContext& c) { return InferTrailingNorm(c, 1); })
          .Cost(RmsNormCost)
          .Saved(RmsNormSaved)
          .Sharding(TrailingNormSharding));
  r.Add(Op("batch_norm", "batch normalisation; training mode also yields new running stats")
          .Inputs({{"x"}, {"weight", true}, {"bias", true}, {"running_mean", true}, {"running_var", true}})
          .Attrs({{"training", AttrKind::kBool, true}, {"momentum", AttrKind::kFloat}, {"eps", AttrKind::kFloat}})
          .Infer(InferBatchNorm)
          .Cost(BatchNormCost)
          .Saved(BatchNormSaved)
          .Sharding(ChannelNormSharding));
  r.Add(Op("group_norm", "normalise each sample over groups of num_groups channels (and the spatial dims)")
          .Inputs({{"x"}, {"weight", true}, {"bias", true}})
          .Attrs({{"num_groups", AttrKind::kInt, true}, {"eps", AttrKind::kFloat}})
          .Infer(InferGroupNorm)
          .Cost(ElementwiseCost(8, 10))
          .Saved(GroupNormSaved)
          .Sharding(ChannelNormSharding));
  r.Add(Op("softmax", "softmax along dim")
          .Inputs({{"x"}})
          .Attrs({{"dim", AttrKind::kInt, true}, {"dtype", AttrKind::kString}})
          .Infer(InferSoftmax)
          .Cost(ElementwiseCost(5, 4))
          .Saved(Saves({}, {0}))
          .Sharding(SoftmaxSharding));
  r.Add(Op("log_softmax", "log of softmax along dim")
          .Inputs({{"x"}})
          .Attrs({{"dim", AttrKind::kInt, true}, {"dtype", AttrKind::kString}})
          .Infer(InferSoftmax)
          .Cost(ElementwiseCost(5, 4))
          .Saved(Saves({}, {0}))
          .Sharding(SoftmaxSharding));
}

}  // namespace mapd

// Normalisations: layer_norm, rms_norm, batch_norm (and its synchronised form, batch_norm_stats,
// batch_norm_apply and batch_norm_running_stats), group_norm, softmax, log_softmax.
#include <algorithm>

#include "common/status_macros.h"
#include "model/ops/registry.h"
#include "model/ops/shape_util.h"

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

// Synchronised batch norm (training mode) in three ops, so that a batch split across devices
// needs only the per-channel statistics summed, not the activations gathered (as PyTorch's
// SyncBatchNorm; docs/ops.md):
//   stats = batch_norm_stats(x)                     [2, C] f64: per channel, the sum of x and of x²
//   y = batch_norm_apply(x, stats, weight?, bias?)
//   mean', var' = batch_norm_running_stats(stats, running_mean, running_var)
// `count` is the number of values per channel the stats sum (N * spatial of the whole batch):
// the mean is stats[0] / count and the biased variance stats[1] / count - mean². The sums are
// f64 so that the variance loses nothing to the subtraction.
//
// Batch norm over groups of the batch ("ghost" batch norm; PyTorch DDP's BatchNorm, where each
// rank normalises its own samples): batch_norm_stats with `group_size` G sums each run of G
// consecutive samples apart, [N / G, 2, C]; batch_norm_apply normalises each sample by its
// group's sums (`count`: the values per channel of one group) and batch_norm_running_stats
// moves the running statistics by the whole batch's (the groups' sums added). With the batch
// split in whole groups no device needs another's statistics (model/graph/batch_norm_groups.h).
absl::StatusOr<Types> InferBatchNormStats(const OpContext& ctx) {
  MAPD_RETURN_IF_ERROR(ExpectRank(ctx, 0, 2, 64, "input"));
  MAPD_RETURN_IF_ERROR(ExpectFloating(ctx, 0, "input"));
  const TensorType& x = ctx.input(0);
  MAPD_ASSIGN_OR_RETURN(int64_t group_size, ctx.Int("group_size", 0));
  if (group_size == 0) return Types{TensorType{v1::FLOAT64, {2, x.shape[1]}}};
  if (group_size < 0 || x.shape[0] % group_size != 0) {
    return ctx.Error("group_size ", group_size, " must divide the batch of input ", x.ToString());
  }
  return Types{TensorType{v1::FLOAT64, {x.shape[0] / group_size, 2, x.shape[1]}}};
}

// The stats input (input `i`) of C channels — [2, C], or [groups, 2, C] — and the op's `count` (> 1).
absl::Status ExpectStats(const OpContext& ctx, int i, int64_t c) {
  const Shape& shape = ctx.input(i).shape;
  const bool grouped = shape.size() == 3 && shape[0] >= 1 && shape[1] == 2 && shape[2] == c;
  if ((shape != Shape{2, c} && !grouped) || ctx.input(i).dtype != v1::FLOAT64) {
    return ctx.Error("stats ", ctx.input(i).ToString(), " must be f64[2, ", c, "] or f64[groups, 2, ", c,
                     "] (batch_norm_stats of the input)");
  }
  MAPD_ASSIGN_OR_RETURN(int64_t count, ctx.Int("count"));
  if (count <= 1) return ctx.Error("training mode needs more than one value per channel, got count ", count);
  return absl::OkStatus();
}

// Inputs from `first` on are per-channel [C] tensors, named by `names` (absent ones skipped).
absl::Status ExpectPerChannel(const OpContext& ctx, int first, const std::vector<const char*>& names, int64_t c) {
  for (size_t k = 0; k < names.size(); ++k) {
    const int i = first + static_cast<int>(k);
    if (ctx.has_input(i) && ctx.input(i).shape != Shape{c}) {
      return ctx.Error(names[k], " ", ctx.input(i).ToString(), " must have shape [", c, "] (one per channel)");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Types> InferBatchNormApply(const OpContext& ctx) {
  const TensorType& x = ctx.input(0);
  MAPD_RETURN_IF_ERROR(ExpectRank(ctx, 0, 2, 64, "input"));
  MAPD_RETURN_IF_ERROR(ExpectFloating(ctx, 0, "input"));
  const int64_t c = x.shape[1];
  MAPD_RETURN_IF_ERROR(ExpectStats(ctx, 1, c));
  MAPD_RETURN_IF_ERROR(ExpectPerChannel(ctx, 2, {"weight", "bias"}, c));
  MAPD_ASSIGN_OR_RETURN(int64_t count, ctx.Int("count"));
  const int64_t groups = ctx.input(1).rank() == 3 ? ctx.input(1).shape[0] : 1;
  if (x.shape[0] % groups != 0) {
    return ctx.Error("stats ", ctx.input(1).ToString(), " has ", groups, " groups, which must divide the batch of input ",
                     x.ToString());
  }
  const int64_t per_channel = NumElements(x.shape) / std::max<int64_t>(c, 1) / groups;
  if (count != per_channel) {
    return ctx.Error("count ", count, " must be the values per channel of ", groups == 1 ? "input " : "a group of input ",
                     x.ToString(), " (", per_channel, ")");
  }
  MAPD_ASSIGN_OR_RETURN(double eps, ctx.Float("eps", 1e-5));
  if (eps < 0) return ctx.Error("eps must be non-negative, got ", eps);
  return Types{x};
}

absl::StatusOr<Types> InferBatchNormRunningStats(const OpContext& ctx) {
  if (ctx.input(1).rank() != 1) return ctx.Error("running_mean ", ctx.input(1).ToString(), " must be [C]");
  const int64_t c = ctx.input(1).shape[0];
  MAPD_RETURN_IF_ERROR(ExpectStats(ctx, 0, c));
  MAPD_RETURN_IF_ERROR(ExpectPerChannel(ctx, 1, {"running_mean", "running_var"}, c));
  MAPD_RETURN_IF_ERROR(ExpectFloating(ctx, 1, "running_mean"));
  MAPD_RETURN_IF_ERROR(ExpectFloating(ctx, 2, "running_var"));
  MAPD_ASSIGN_OR_RETURN(double momentum, ctx.Float("momentum", 0.1));
  if (momentum < 0 || momentum > 1) return ctx.Error("momentum must be in [0, 1], got ", momentum);
  return Types{ctx.input(1), ctx.input(2)};
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

// batch_norm_stats reads x once (ATen's batch-norm statistics pass); backward adds g0 + 2·x·g1
// to x's gradient, one input-sized temporary beside it. (Where the apply reads these statistics
// straight from this x — one device, or --batch-norm local — the worker's apply differentiates
// through them itself, ATen's training backward, and this backward adds nothing: the temporary
// counted here is then an over-count of one activation, within the profiler's bars.)
OpCost BatchNormStatsCost(const CostContext& c) {
  OpCost cost = ElementwiseCost(3, 3)(c);
  if (c.any_requires_grad()) cost.grad_workspace_bytes = c.op.input(0).NumBytes();
  return cost;
}

// batch_norm_apply: one pass forward (x·a + b per channel); backward is ATen's batch-norm
// backward (a reduction and the input's gradient) and per-channel arithmetic.
OpCost BatchNormApplyCost(const CostContext& c) {
  OpCost cost = ElementwiseCost(2, 6)(c);
  if (c.any_requires_grad()) cost.grad_workspace_bytes = c.op.input(0).NumBytes();
  return cost;
}

// batch_norm_apply keeps the input, the weight and the per-channel f64 mean and variance.
// (batch_norm_running_stats has no gradient: the runtime computes it from the stats detached.)
SavedSpec BatchNormApplySaved(const CostContext& c) {
  SavedSpec s;
  if (!c.any_requires_grad()) return s;
  s.inputs = {0};
  if (c.op.has_input(2)) s.inputs.push_back(2);
  s.extra_bytes = c.op.input(1).NumBytes();  // a mean and a variance per channel (and group), as the stats
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

// batch_norm_stats: x[n, c, spatial...] -> [s, c]: a sum over n and the spatial dimensions, so
// splitting them leaves each device a summand (Partial) that an all-reduce completes.
// batch_norm_apply: per channel given the (replicated) stats; every dimension of x splits.
// batch_norm_running_stats: per channel.
// With groups the batch is not summed over: the stats' first dimension is the batch's groups
// (the label n on both, as a view merges dimensions: a split in whole groups keeps each
// device's groups with their samples).
absl::StatusOr<ShardingRule> BatchNormStatsSharding(const CostContext& c) {
  ShardingRule r = EmptyRule(c);
  LabelPool pool("ncs");
  const std::string spatial = pool.Fresh(c.op.input(0).rank() - 2);
  r.inputs[0] = "nc" + spatial;
  const bool grouped = c.outputs[0].rank() == 3;
  r.outputs[0] = grouped ? "nsc" : "sc";
  r.linear_reduced = grouped ? spatial : "n" + spatial;
  r.unsplittable = "s";
  MAPD_RETURN_IF_ERROR(pool.status());
  return r;
}

absl::StatusOr<ShardingRule> BatchNormApplySharding(const CostContext& c) {
  ShardingRule r = EmptyRule(c);
  LabelPool pool("ncs");
  const std::string spatial = pool.Fresh(c.op.input(0).rank() - 2);
  r.inputs[0] = "nc" + spatial;
  r.inputs[1] = c.op.input(1).rank() == 3 ? "nsc" : "sc";
  for (int i = 2; i < c.op.num_inputs(); ++i) {
    if (c.op.has_input(i)) r.inputs[i] = "c";
  }
  r.outputs[0] = r.inputs[0];
  r.unsplittable = "s";
  MAPD_RETURN_IF_ERROR(pool.status());
  return r;
}

absl::StatusOr<ShardingRule> BatchNormRunningStatsSharding(const CostContext& c) {
  ShardingRule r = EmptyRule(c);
  const bool grouped = c.op.input(0).rank() == 3;  // the groups' sums added: every group is needed
  r.inputs = {grouped ? "gsc" : "sc", "c", "c"};
  r.outputs = {"c", "c"};
  r.unsplittable = grouped ? "gs" : "s";
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
  r.Add(Op("batch_norm_stats", "per-channel sums of x and x^2 over batch and spatial dims (f64 [2, C]; with group_size, per group of samples [N / group_size, 2, C])")
          .Inputs({{"x"}})
          .Attrs({{"group_size", AttrKind::kInt}})
          .Infer(InferBatchNormStats)
          .Cost(BatchNormStatsCost)
          .Saved(Saves({0}, {}))
          .Sharding(BatchNormStatsSharding));
  r.Add(Op("batch_norm_apply", "training batch norm: normalise x by the mean and variance batch_norm_stats summed")
          .Inputs({{"x"}, {"stats"}, {"weight", true}, {"bias", true}})
          .Attrs({{"count", AttrKind::kInt, true}, {"eps", AttrKind::kFloat}})
          .Infer(InferBatchNormApply)
          .Cost(BatchNormApplyCost)
          .Saved(BatchNormApplySaved)
          .Sharding(BatchNormApplySharding));
  r.Add(Op("batch_norm_running_stats", "the new running mean and (unbiased) variance from batch_norm_stats")
          .Inputs({{"stats"}, {"running_mean"}, {"running_var"}})
          .Attrs({{"count", AttrKind::kInt, true}, {"momentum", AttrKind::kFloat}})
          .Infer(InferBatchNormRunningStats)
          .Cost(ElementwiseCost(6, 0))
          .Saved(SavesNothing())
          .Sharding(BatchNormRunningStatsSharding));
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

// Losses: cross_entropy, nll_loss, mse_loss.
#include <algorithm>

#include "common/status_macros.h"
#include "model/ops/registry.h"
#include "model/ops/shape_util.h"

namespace mapd {
namespace {

using Types = std::vector<TensorType>;

absl::StatusOr<std::string> Reduction(const OpContext& ctx) {
  MAPD_ASSIGN_OR_RETURN(std::string red, ctx.Str("reduction", "mean"));
  if (red != "mean" && red != "sum" && red != "none") {
    return ctx.Error("reduction must be 'mean', 'sum' or 'none', got '", red, "'");
  }
  return red;
}

// input [N, C, d...] or [C]; target [N, d...] (class indices) or the input's shape
// (probabilities, cross_entropy only); weight [C].
absl::StatusOr<Types> InferClassLoss(const OpContext& ctx, bool allow_probs) {
  const TensorType& x = ctx.input(0);
  const TensorType& t = ctx.input(1);
  MAPD_RETURN_IF_ERROR(ExpectRank(ctx, 0, 1, 64, "input"));
  MAPD_RETURN_IF_ERROR(ExpectFloating(ctx, 0, "input"));
  MAPD_ASSIGN_OR_RETURN(std::string red, Reduction(ctx));
  const int class_dim = x.rank() == 1 ? 0 : 1;
  const int64_t c = x.shape[class_dim];
  Shape per_elem = x.shape;
  per_elem.erase(per_elem.begin() + class_dim);
  if (IsIntegral(t.dtype)) {
    if (t.shape != per_elem) {
      return ctx.Error("class-index target ", t.ToString(), " must have shape ", ShapeToString(per_elem),
                       " for input ", x.ToString());
    }
  } else if (allow_probs && IsFloating(t.dtype)) {
    if (t.shape != x.shape) {
      return ctx.Error("probability target ", t.ToString(), " must have the input's shape ", x.ToString());
    }
  } else {
    return ctx.Error("target must hold integer class indices", allow_probs ? " or float probabilities" : "",
                     ", got ", t.ToString());
  }
  if (ctx.has_input(2) && ctx.input(2).shape != Shape{c}) {
    return ctx.Error("class weight ", ctx.input(2).ToString(), " must have shape [", c, "]");
  }
  MAPD_ASSIGN_OR_RETURN(double ls, ctx.Float("label_smoothing", 0));
  if (ls < 0 || ls > 1) return ctx.Error("label_smoothing must be in [0, 1], got ", ls);
  MAPD_RETURN_IF_ERROR(ctx.Int("ignore_index", -100).status());
  if (red == "none") return Types{{x.dtype, per_elem}};
  return Types{{x.dtype, {}}};
}

absl::StatusOr<Types> InferMse(const OpContext& ctx) {
  MAPD_ASSIGN_OR_RETURN(std::string red, Reduction(ctx));
  MAPD_RETURN_IF_ERROR(ExpectFloating(ctx, 0, "input"));
  MAPD_ASSIGN_OR_RETURN(Shape shape, BroadcastShapes(ctx, ctx.input(0).shape, ctx.input(1).shape));
  if (red == "none") return Types{{ctx.input(0).dtype, shape}};
  return Types{{ctx.input(0).dtype, {}}};
}


// ---- costs and saved tensors ----

// at::cross_entropy_loss is log_softmax (whose output is kept) followed by nll_loss (which
// keeps the target and class weights).
SavedSpec CrossEntropySaved(const CostContext& c) {
  SavedSpec s;
  if (!c.any_requires_grad()) return s;
  s.inputs = {1};
  if (c.op.has_input(2)) s.inputs.push_back(2);
  s.extra_bytes = c.op.input(0).NumBytes();
  return s;
}

OpCost ClassLossCost(const CostContext& c) {
  OpCost cost;
  const double n = static_cast<double>(c.op.input(0).NumElements());
  cost.flops = 6 * n;
  cost.grad_flops.assign(c.op.num_inputs(), 0.0);
  if (c.input_requires_grad(0)) cost.grad_flops[0] = 4 * n;
  cost.bytes = IoBytes(c) + 2 * c.op.input(0).NumBytes();
  cost.kernels = 2;
  cost.vector_arithmetic = true;  // exponentials and logarithms, element by element
  // nll_loss's backward makes the log-probabilities' gradient, from which log_softmax's
  // backward makes the input's: both exist at once.
  if (c.op.op() == "cross_entropy" && c.input_requires_grad(0)) cost.grad_workspace_bytes = c.op.input(0).NumBytes();
  return cost;
}

// ---- sharding rules (docs/sharding.md) ----

// cross_entropy / nll_loss: input[n, c, d...] (or [c]), target[n, d...] (class indices) or the
// input's shape (probabilities), weight[c]. The class dimension is unsplittable (log_softmax
// normalises over it; nll_loss gathers the target's class — a vocabulary-parallel loss needs a
// masked gather and an all-reduce of the normaliser, not done yet). With reduction mean or sum
// the other dimensions are summed — linear, so a split batch leaves the scalar loss Partial.
// Under mean the normaliser must be global: the number of targets (or, with class weights or
// ignored targets, the sum of the non-ignored targets' weights) over all devices — the
// lowering divides each device's sum by it, as DESIGN §7 asks of every mean over a split
// dimension. With reduction none the output keeps those labels.
absl::StatusOr<ShardingRule> ClassLossSharding(const CostContext& c) {
  ShardingRule r = EmptyRule(c);
  LabelPool pool("nc");
  const TensorType& x = c.op.input(0);
  const std::string rest = x.rank() > 2 ? pool.Fresh(x.rank() - 2) : "";
  const std::string in = x.rank() == 1 ? "c" : "nc" + rest;
  const std::string per_elem = x.rank() == 1 ? "" : "n" + rest;
  r.inputs[0] = in;
  r.inputs[1] = c.op.input(1).rank() == x.rank() ? in : per_elem;  // probabilities, or class indices
  if (c.op.has_input(2)) r.inputs[2] = "c";
  r.unsplittable = "c";
  auto red = c.op.Str("reduction", "mean");
  if (red.ok() && *red == "none") {
    r.outputs[0] = per_elem;
  } else {
    r.linear_reduced = per_elem;
    if (red.ok() && *red == "mean") r.averaged = per_elem;
  }
  MAPD_RETURN_IF_ERROR(pool.status());
  return r;
}

// mse_loss: input and target broadcast against each other (a broadcast size-1 dimension has its
// own unsplittable label); with reduction mean or sum every dimension is summed (linear).
absl::StatusOr<ShardingRule> MseSharding(const CostContext& c) {
  ShardingRule r = EmptyRule(c);
  LabelPool pool;
  const Shape& a = c.op.input(0).shape;
  const Shape& b = c.op.input(1).shape;
  Shape full(std::max(a.size(), b.size()));
  for (size_t i = 0; i < full.size(); ++i) {
    const int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    const int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    full[full.size() - 1 - i] = da == 1 ? db : da;
  }
  const std::string labels = pool.Fresh(static_cast<int>(full.size()));
  r.inputs[0] = AlignLabels(a, full, labels, pool, &r.unsplittable);
  r.inputs[1] = AlignLabels(b, full, labels, pool, &r.unsplittable);
  auto red = c.op.Str("reduction", "mean");
  if (red.ok() && *red == "none") {
    r.outputs[0] = labels;
  } else {
    // Dimensions of size 1 everywhere are summed too (trivially); a broadcast one already is
    // unsplittable.
    for (char l : labels) {
      if (!r.IsUnsplittable(l)) r.linear_reduced.push_back(l);
    }
    if (red.ok() && *red == "mean") r.averaged = r.linear_reduced;
  }
  MAPD_RETURN_IF_ERROR(pool.status());
  return r;
}

}  // namespace

void RegisterLossOps(OpRegistry& r) {
  const std::vector<AttrSpec> cls = {{"reduction", AttrKind::kString}, {"ignore_index", AttrKind::kInt},
                                     {"label_smoothing", AttrKind::kFloat}};
  r.Add(Op("cross_entropy", "log_softmax over classes + negative log likelihood")
          .Inputs({{"input"}, {"target"}, {"weight", true}})
          .Attrs(cls)
          .Infer([](const OpContext& c) { return InferClassLoss(c, true); })
          .Cost(ClassLossCost)
          .Saved(CrossEntropySaved)
          .Sharding(ClassLossSharding));
  r.Add(Op("nll_loss", "negative log likelihood of log-probabilities")
          .Inputs({{"input"}, {"target"}, {"weight", true}})
          .Attrs({{"reduction", AttrKind::kString}, {"ignore_index", AttrKind::kInt}})
          .Infer([](const OpContext& c) { return InferClassLoss(c, false); })
          .Cost(ClassLossCost)
          .Saved(Saves({0, 1, 2}, {}))
          .Sharding(ClassLossSharding));
  r.Add(Op("mse_loss", "mean squared error")
          .Inputs({{"input"}, {"target"}})
          .Attrs({{"reduction", AttrKind::kString}})
          .Infer(InferMse)
          .Cost(ElementwiseCost(3, 3))
          .Saved(Saves({0, 1}, {}))
          .Sharding(MseSharding));
}

}  // namespace mapd

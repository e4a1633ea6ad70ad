// Losses: cross_entropy, nll_loss, mse_loss.
#include "planner/ops/registry.h"
#include "planner/ops/shape_util.h"
#include "planner/util/status_macros.h"

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
  // nll_loss's backward makes the log-probabilities' gradient, from which log_softmax's
  // backward makes the input's: both exist at once.
  if (c.op.op() == "cross_entropy" && c.input_requires_grad(0)) cost.grad_workspace_bytes = c.op.input(0).NumBytes();
  return cost;
}

}  // namespace

void RegisterLossOps(OpRegistry& r) {
  const std::vector<AttrSpec> cls = {{"reduction", AttrKind::kString}, {"ignore_index", AttrKind::kInt},
                                     {"label_smoothing", AttrKind::kFloat}};
  (void)r.Register({"cross_entropy", "log_softmax over classes + negative log likelihood",
                    {{"input"}, {"target"}, {"weight", true}}, false, cls, {},
                    [](const OpContext& c) { return InferClassLoss(c, true); }, ClassLossCost, CrossEntropySaved});
  (void)r.Register({"nll_loss", "negative log likelihood of log-probabilities",
                    {{"input"}, {"target"}, {"weight", true}}, false,
                    {{"reduction", AttrKind::kString}, {"ignore_index", AttrKind::kInt}}, {},
                    [](const OpContext& c) { return InferClassLoss(c, false); }, ClassLossCost, Saves({0, 1, 2}, {})});
  (void)r.Register({"mse_loss", "mean squared error", {{"input"}, {"target"}}, false,
                    {{"reduction", AttrKind::kString}}, {}, InferMse,
                    ElementwiseCost(3, 3), Saves({0, 1}, {})});
}

}  // namespace mapd

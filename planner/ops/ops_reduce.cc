// Reductions: mean, sum, amax, amin, vector_norm (dims empty = all dims).
#include "planner/ops/registry.h"
#include "planner/ops/shape_util.h"
#include "planner/util/status_macros.h"

namespace mapd {
namespace {

using Types = std::vector<TensorType>;

InferFn ReduceInfer(bool is_mean, bool keeps_dtype) {
  return [is_mean, keeps_dtype](const OpContext& ctx) -> absl::StatusOr<Types> {
    const TensorType& x = ctx.input(0);
    MAPD_ASSIGN_OR_RETURN(std::vector<int64_t> dims, ctx.Ints("dims", {}));
    MAPD_ASSIGN_OR_RETURN(bool keepdim, ctx.Bool("keepdim", false));
    MAPD_ASSIGN_OR_RETURN(std::vector<int> nd, NormalizeDims(ctx, dims, x.rank()));
    std::vector<bool> reduced(x.rank(), dims.empty());
    for (int d : nd) reduced[d] = true;
    Shape out;
    for (int d = 0; d < x.rank(); ++d) {
      if (!reduced[d]) out.push_back(x.shape[d]);
      else if (keepdim) out.push_back(1);
    }
    DType dtype = x.dtype;
    if (!keeps_dtype) {
      if (is_mean && !IsFloating(dtype)) {
        if (!ctx.has_attr("dtype")) return ctx.Error("mean of an integer tensor ", x.ToString(), " needs a float dtype attribute");
      }
      if (!is_mean && (IsIntegral(dtype) || dtype == v1::BOOL)) dtype = v1::INT64;
      MAPD_ASSIGN_OR_RETURN(dtype, ctx.DTypeAttr("dtype", dtype));
    }
    return Types{{dtype, out}};
  };
}

// A mean over listed dims keeps its input (LibTorch 1.13's mean.dim); over all dims it keeps
// only sizes.
SavedSpec MeanSaved(const CostContext& c) {
  SavedSpec s;
  auto dims = c.op.Ints("dims", {});
  if (c.any_requires_grad() && dims.ok() && !dims->empty()) s.inputs = {0};
  return s;
}

// ---- sharding rules (docs/sharding.md) ----

// Reductions over `dims` (all when empty). sum and mean are linear: a reduced dimension may be
// split and leaves the output Partial (a mean divides the local sum by the global size, so the
// summands add up to the global mean). amax/amin are not: reduced dimensions are unsplittable.
// A kept (keepdim) size-1 dimension has a fresh unsplittable label.
ShardingFn ReduceSharding(bool linear) {
  return [linear](const CostContext& c) -> absl::StatusOr<ShardingRule> {
    ShardingRule r = EmptyRule(c);
    LabelPool pool;
    const int rank = c.op.input(0).rank();
    auto dims = c.op.Ints("dims", {});
    auto keepdim = c.op.Bool("keepdim", false);
    if (!dims.ok()) return dims.status();
    if (!keepdim.ok()) return keepdim.status();
    std::vector<bool> reduced(rank, dims->empty());
    for (int64_t d : *dims) {
      if (rank > 0) reduced[(d % rank + rank) % rank] = true;
    }
    r.inputs[0] = pool.Fresh(rank);
    std::string& reduced_labels = linear ? r.linear_reduced : r.unsplittable;
    for (int d = 0; d < rank; ++d) {
      if (!reduced[d]) {
        r.outputs[0].push_back(r.inputs[0][d]);
        continue;
      }
      reduced_labels.push_back(r.inputs[0][d]);
      if (*keepdim) {
        r.outputs[0].push_back(pool.Fresh());
        r.unsplittable.push_back(r.outputs[0].back());
      }
    }
    if (c.op.op() == "mean") r.averaged = r.linear_reduced;
    MAPD_RETURN_IF_ERROR(pool.status());
    return r;
  };
}

}  // namespace

void RegisterReduceOps(OpRegistry& r) {
  const std::vector<AttrSpec> attrs = {{"dims", AttrKind::kInts}, {"keepdim", AttrKind::kBool},
                                       {"dtype", AttrKind::kString}};
  const std::vector<AttrSpec> minmax = {{"dims", AttrKind::kInts}, {"keepdim", AttrKind::kBool}};
  (void)r.Register({"mean", "mean over dims (all when empty)", {{"x"}}, false, attrs, {}, ReduceInfer(true, false),
                    ReduceCost(), MeanSaved, {}, ReduceSharding(true)});
  (void)r.Register({"sum", "sum over dims (all when empty)", {{"x"}}, false, attrs, {}, ReduceInfer(false, false),
                    ReduceCost(), SavesNothing(), {}, ReduceSharding(true)});
  (void)r.Register({"amax", "maximum over dims", {{"x"}}, false, minmax, {}, ReduceInfer(false, true),
                    ReduceCost(), Saves({0}, {0}), {}, ReduceSharding(false)});
  (void)r.Register({"amin", "minimum over dims", {{"x"}}, false, minmax, {}, ReduceInfer(false, true),
                    ReduceCost(), Saves({0}, {0}), {}, ReduceSharding(false)});
  // F.normalize's norm (aten::norm, linalg_vector_norm): not linear in its reduced dimensions.
  (void)r.Register({"vector_norm", "(sum over dims of |x|^ord)^(1/ord); ord 2 unless given", {{"x"}}, false,
                    {{"ord", AttrKind::kNumber}, {"dims", AttrKind::kInts}, {"keepdim", AttrKind::kBool}}, {},
                    ReduceInfer(false, true), ReduceCost(), Saves({0}, {0}), {}, ReduceSharding(false)});
}

}  // namespace mapd

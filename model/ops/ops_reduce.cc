// Reductions and selections along dims: mean, sum, amax, amin, vector_norm (dims empty = all
// dims); max/min over one dim with the indices, argmax/argmin; topk and sort along a dim; the
// cumulative sum.
#include "common/status_macros.h"
#include "model/ops/registry.h"
#include "model/ops/shape_util.h"

namespace mapd {
namespace {

// sum's input gradient is its output's gradient expanded: a view, no new memory.
OpTraits GradExpandsOutputGrad() {
  OpTraits t;
  t.grad_aliases_output_grad = true;
  return t;
}

using Types = std::vector<TensorType>;

// Which dims of input 0 a reduction reduces: attribute `dim` (one, for max/min/argmax/argmin),
// else the list `dims`; all of them when neither is given or the list is empty.
absl::StatusOr<std::vector<bool>> ReducedDims(const OpContext& ctx) {
  const int rank = ctx.input(0).rank();
  std::vector<int64_t> dims;
  if (ctx.has_attr("dim")) {
    MAPD_ASSIGN_OR_RETURN(int64_t d, ctx.Int("dim"));
    dims.push_back(d);
  } else {
    MAPD_ASSIGN_OR_RETURN(dims, ctx.Ints("dims", {}));
  }
  MAPD_ASSIGN_OR_RETURN(std::vector<int> nd, NormalizeDims(ctx, dims, std::max(rank, 1)));
  std::vector<bool> reduced(rank, dims.empty());
  for (int d : nd) {
    if (d < rank) reduced[d] = true;
  }
  return reduced;
}

// The shape left by reducing `reduced` (kept as size 1 with keepdim).
absl::StatusOr<Shape> ReducedShape(const OpContext& ctx) {
  const TensorType& x = ctx.input(0);
  MAPD_ASSIGN_OR_RETURN(bool keepdim, ctx.Bool("keepdim", false));
  MAPD_ASSIGN_OR_RETURN(std::vector<bool> reduced, ReducedDims(ctx));
  Shape out;
  for (int d = 0; d < x.rank(); ++d) {
    if (!reduced[d]) out.push_back(x.shape[d]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

InferFn ReduceInfer(bool is_mean, bool keeps_dtype) {
  return [is_mean, keeps_dtype](const OpContext& ctx) -> absl::StatusOr<Types> {
    const TensorType& x = ctx.input(0);
    MAPD_ASSIGN_OR_RETURN(Shape out, ReducedShape(ctx));
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

// max/min over `dim`: the values and their int64 indices.
absl::StatusOr<Types> InferMaxMinDim(const OpContext& ctx) {
  if (ctx.input(0).rank() == 0) return ctx.Error("max/min over a dim of a 0-d tensor");
  MAPD_ASSIGN_OR_RETURN(Shape out, ReducedShape(ctx));
  return Types{{ctx.input(0).dtype, out}, {v1::INT64, out}};
}

// argmax/argmin over `dim`, or over the flattened tensor when it is absent: int64 indices.
absl::StatusOr<Types> InferArg(const OpContext& ctx) {
  MAPD_ASSIGN_OR_RETURN(Shape out, ReducedShape(ctx));
  if (!ctx.has_attr("dim")) {
    MAPD_ASSIGN_OR_RETURN(bool keepdim, ctx.Bool("keepdim", false));
    out = keepdim ? Shape(ctx.input(0).rank(), 1) : Shape{};
  }
  return Types{{v1::INT64, out}};
}

// topk(x, k, dim) and sort(x, dim): values and int64 indices along dim.
absl::StatusOr<Types> InferSelection(const OpContext& ctx) {
  const TensorType& x = ctx.input(0);
  MAPD_ASSIGN_OR_RETURN(int64_t dim, ctx.Int("dim", -1));
  MAPD_ASSIGN_OR_RETURN(int d, NormalizeDim(ctx, dim, std::max(x.rank(), 1)));
  Shape out = x.shape;
  if (ctx.op() == "topk") {
    MAPD_ASSIGN_OR_RETURN(int64_t k, ctx.Int("k"));
    const int64_t n = x.rank() == 0 ? 1 : x.shape[d];
    if (k < 0 || k > n) return ctx.Error("k=", k, " must be in [0, ", n, "] (dimension ", d, " of ", x.ToString(), ")");
    if (x.rank() > 0) out[d] = k;
  }
  return Types{{x.dtype, out}, {v1::INT64, out}};
}

// cumsum(x, dim[, dtype]): integers and bools sum in int64, as in PyTorch.
absl::StatusOr<Types> InferCumsum(const OpContext& ctx) {
  const TensorType& x = ctx.input(0);
  MAPD_ASSIGN_OR_RETURN(int64_t dim, ctx.Int("dim"));
  MAPD_RETURN_IF_ERROR(NormalizeDim(ctx, dim, std::max(x.rank(), 1)).status());
  DType dtype = IsFloating(x.dtype) ? x.dtype : v1::INT64;
  MAPD_ASSIGN_OR_RETURN(dtype, ctx.DTypeAttr("dtype", dtype));
  return Types{{dtype, x.shape}};
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
    auto keepdim = c.op.Bool("keepdim", false);
    if (!keepdim.ok()) return keepdim.status();
    MAPD_ASSIGN_OR_RETURN(std::vector<bool> reduced, ReducedDims(c.op));
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
    for (size_t o = 1; o < r.outputs.size(); ++o) r.outputs[o] = r.outputs[0];  // max/min's indices
    if (c.op.op() == "mean") r.averaged = r.linear_reduced;
    MAPD_RETURN_IF_ERROR(pool.status());
    return r;
  };
}

// cumsum's backward is flip(cumsum(flip(grad))): the flipped gradient and its cumsum beside the
// result (measured with MAPD_ALLOC_TRACE).
OpCost CumsumCost(const CostContext& c) {
  OpCost cost = ElementwiseCost(1, 1)(c);
  if (c.any_requires_grad()) cost.grad_workspace_bytes = 2 * c.outputs[0].NumBytes();
  return cost;
}

// topk, sort and cumsum: dim is unsplittable (its elements are compared or summed across it);
// every other dimension splits, values and indices alike.
absl::StatusOr<ShardingRule> AlongDimSharding(const CostContext& c) {
  LabelPool pool;
  std::vector<int> dims;
  if (c.op.input(0).rank() > 0) dims.push_back(AttrDim(c, "dim", -1));
  ShardingRule r = SameLabelsExcept(c, dims, pool);
  MAPD_RETURN_IF_ERROR(pool.status());
  return r;
}

}  // namespace

void RegisterReduceOps(OpRegistry& r) {
  const std::vector<AttrSpec> attrs = {{"dims", AttrKind::kInts}, {"keepdim", AttrKind::kBool},
                                       {"dtype", AttrKind::kString}};
  const std::vector<AttrSpec> minmax = {{"dims", AttrKind::kInts}, {"keepdim", AttrKind::kBool}};
  r.Add(Op("mean", "mean over dims (all when empty)")
          .Inputs({{"x"}})
          .Attrs(attrs)
          .Infer(ReduceInfer(true, false))
          .Cost(ReduceCost())
          .Saved(MeanSaved)
          .Sharding(ReduceSharding(true)));
  r.Add(Op("sum", "sum over dims (all when empty)")
          .Inputs({{"x"}})
          .Attrs(attrs)
          .Traits(GradExpandsOutputGrad())
          .Infer(ReduceInfer(false, false))
          .Cost(ReduceCost())
          .Saved(SavesNothing())
          .Sharding(ReduceSharding(true)));
  r.Add(Op("amax", "maximum over dims")
          .Inputs({{"x"}})
          .Attrs(minmax)
          .Infer(ReduceInfer(false, true))
          .Cost(ReduceCost())
          .Saved(Saves({0}, {0}))
          .Sharding(ReduceSharding(false)));
  r.Add(Op("amin", "minimum over dims")
          .Inputs({{"x"}})
          .Attrs(minmax)
          .Infer(ReduceInfer(false, true))
          .Cost(ReduceCost())
          .Saved(Saves({0}, {0}))
          .Sharding(ReduceSharding(false)));
  // F.normalize's norm (aten::norm, linalg_vector_norm): not linear in its reduced dimensions.
  r.Add(Op("vector_norm", "(sum over dims of |x|^ord)^(1/ord); ord 2 unless given")
          .Inputs({{"x"}})
          .Attrs({{"ord", AttrKind::kNumber}, {"dims", AttrKind::kInts}, {"keepdim", AttrKind::kBool}})
          .Infer(ReduceInfer(false, true))
          .Cost(ReduceCost())
          .Saved(Saves({0}, {0}))
          .Sharding(ReduceSharding(false)));
  // Values and indices: autograd keeps the indices only (the gradient goes back to them).
  const std::vector<AttrSpec> one_dim = {{"dim", AttrKind::kInt, true}, {"keepdim", AttrKind::kBool}};
  r.Add(Op("max", "maximum over dim with its int64 index (values, indices)")
          .Inputs({{"x"}})
          .Attrs(one_dim)
          .Infer(InferMaxMinDim)
          .Cost(ReduceCost())
          .Saved(Saves({}, {1}))
          .Sharding(ReduceSharding(false)));
  r.Add(Op("min", "minimum over dim with its int64 index (values, indices)")
          .Inputs({{"x"}})
          .Attrs(one_dim)
          .Infer(InferMaxMinDim)
          .Cost(ReduceCost())
          .Saved(Saves({}, {1}))
          .Sharding(ReduceSharding(false)));
  const std::vector<AttrSpec> arg = {{"dim", AttrKind::kInt}, {"keepdim", AttrKind::kBool}};
  r.Add(Op("argmax", "int64 index of the maximum over dim (of the flattened x when dim is absent)")
          .Inputs({{"x"}})
          .Attrs(arg)
          .Infer(InferArg)
          .Cost(ReduceCost())
          .Saved(SavesNothing())
          .Sharding(ReduceSharding(false)));
  r.Add(Op("argmin", "int64 index of the minimum over dim (of the flattened x when dim is absent)")
          .Inputs({{"x"}})
          .Attrs(arg)
          .Infer(InferArg)
          .Cost(ReduceCost())
          .Saved(SavesNothing())
          .Sharding(ReduceSharding(false)));
  r.Add(Op("topk", "the k largest (smallest) values along dim and their int64 indices")
          .Inputs({{"x"}})
          .Attrs({{"k", AttrKind::kInt, true}, {"dim", AttrKind::kInt}, {"largest", AttrKind::kBool},
                     {"sorted", AttrKind::kBool}})
          .Infer(InferSelection)
          .Cost(ReduceCost())
          .Saved(Saves({}, {1}))
          .Sharding(AlongDimSharding));
  r.Add(Op("sort", "values sorted along dim and their int64 indices")
          .Inputs({{"x"}})
          .Attrs({{"dim", AttrKind::kInt}, {"descending", AttrKind::kBool}, {"stable", AttrKind::kBool}})
          .Infer(InferSelection)
          .Cost(ReduceCost())
          .Saved(Saves({}, {1}))
          .Sharding(AlongDimSharding));
  r.Add(Op("cumsum", "running sum along dim")
          .Inputs({{"x"}})
          .Attrs({{"dim", AttrKind::kInt, true}, {"dtype", AttrKind::kString}})
          .Infer(InferCumsum)
          .Cost(CumsumCost)
          .Saved(SavesNothing())
          .Sharding(AlongDimSharding));
}

}  // namespace mapd

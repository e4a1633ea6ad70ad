// Rearranging and indexing ops: pad, roll, index_select, slice_scatter — what windowed
// attention (Swin's shifted windows and relative position bias) and in-place writes into a
// slice are made of.
#include <map>

#include "planner/ops/registry.h"
#include "planner/ops/shape_util.h"
#include "planner/util/status_macros.h"

namespace mapd {
namespace {

using Types = std::vector<TensorType>;

int NormalizedDim(const TensorType& t, int64_t d) { return t.rank() == 0 ? 0 : static_cast<int>((d % t.rank() + t.rank()) % t.rank()); }

// pads as PyTorch orders them: (last dim's before, after, the one before it's before, after, ...).
absl::StatusOr<Types> InferPad(const OpContext& ctx) {
  const TensorType& x = ctx.input(0);
  MAPD_ASSIGN_OR_RETURN(std::vector<int64_t> pads, ctx.Ints("pads"));
  MAPD_ASSIGN_OR_RETURN(std::string mode, ctx.Str("mode", "constant"));
  if (mode != "constant" && mode != "reflect" && mode != "replicate") {
    return ctx.Error("mode '", mode, "' is not constant, reflect or replicate");
  }
  if (pads.size() % 2 != 0 || static_cast<int>(pads.size()) > 2 * x.rank()) {
    return ctx.Error("pads ", ShapeToString(pads), " must be pairs for at most the ", x.rank(), " dimensions of ", x.ToString());
  }
  if (mode != "constant" && (pads.size() / 2 > 3 || static_cast<int>(pads.size() / 2) >= x.rank())) {
    return ctx.Error(mode, " padding of ", pads.size() / 2, " dimensions of ", x.ToString(),
                     " is not supported (1 to 3 trailing dimensions, after a batch dimension)");
  }
  Shape out = x.shape;
  for (size_t i = 0; i < pads.size() / 2; ++i) {
    const int d = x.rank() - 1 - static_cast<int>(i);
    if (mode == "reflect" && (pads[2 * i] >= x.shape[d] || pads[2 * i + 1] >= x.shape[d])) {
      return ctx.Error("reflect padding ", pads[2 * i], ",", pads[2 * i + 1], " must be smaller than dimension ", d,
                       " (", x.shape[d], ")");
    }
    if (mode != "constant" && (pads[2 * i] < 0 || pads[2 * i + 1] < 0)) return ctx.Error(mode, " padding must not be negative");
    out[d] += pads[2 * i] + pads[2 * i + 1];
    if (out[d] < 0) return ctx.Error("padding ", ShapeToString(pads), " crops dimension ", d, " of ", x.ToString(), " below 0");
  }
  return Types{{x.dtype, out}};
}

absl::StatusOr<Types> InferRoll(const OpContext& ctx) {
  const TensorType& x = ctx.input(0);
  MAPD_ASSIGN_OR_RETURN(std::vector<int64_t> shifts, ctx.Ints("shifts"));
  MAPD_ASSIGN_OR_RETURN(std::vector<int64_t> dims, ctx.Ints("dims", {}));
  if (dims.empty() ? shifts.size() != 1 : shifts.size() != dims.size()) {
    return ctx.Error("shifts ", ShapeToString(shifts), " and dims ", ShapeToString(dims), " must pair up");
  }
  MAPD_RETURN_IF_ERROR(NormalizeDims(ctx, dims, x.rank()).status());
  return Types{x};
}

absl::StatusOr<Types> InferIndexSelect(const OpContext& ctx) {
  const TensorType& x = ctx.input(0);
  const TensorType& index = ctx.input(1);
  if (index.rank() > 1 || !(index.dtype == v1::INT64 || index.dtype == v1::INT32)) {
    return ctx.Error("index must be a 1-D integer tensor, got ", index.ToString());
  }
  if (x.rank() == 0) return ctx.Error("index_select of a 0-d tensor");
  MAPD_ASSIGN_OR_RETURN(int64_t dim, ctx.Int("dim"));
  MAPD_ASSIGN_OR_RETURN(int d, NormalizeDim(ctx, dim, x.rank()));
  Shape out = x.shape;
  out[d] = index.NumElements();
  return Types{{x.dtype, out}};
}

absl::StatusOr<Types> InferSliceScatter(const OpContext& ctx) {
  const TensorType& x = ctx.input(0);
  const TensorType& src = ctx.input(1);
  MAPD_ASSIGN_OR_RETURN(int64_t dim, ctx.Int("dim", 0));
  MAPD_ASSIGN_OR_RETURN(int d, NormalizeDim(ctx, dim, x.rank()));
  MAPD_ASSIGN_OR_RETURN(int64_t start, ctx.Int("start", 0));
  MAPD_ASSIGN_OR_RETURN(int64_t end, ctx.Int("end", x.shape[d]));
  MAPD_ASSIGN_OR_RETURN(int64_t step, ctx.Int("step", 1));
  if (step < 1) return ctx.Error("step must be positive, got ", step);
  const int64_t n = x.shape[d];
  start = std::min(std::max(start < 0 ? start + n : start, int64_t{0}), n);
  end = std::min(std::max(end < 0 ? end + n : end, start), n);
  Shape slice = x.shape;
  slice[d] = (end - start + step - 1) / step;
  if (src.shape != slice || src.dtype != x.dtype) {
    return ctx.Error("src ", src.ToString(), " must be the slice's type ", TensorType{x.dtype, slice}.ToString());
  }
  return Types{x};
}

// ---- sharding rules (docs/sharding.md) ----

// Input 0 and output 0 share labels except on `dims`, which are unsplittable (their elements
// move across the dimension, or it changes size).
ShardingRule AllButDims(const CostContext& c, const std::vector<int>& dims, LabelPool& pool) {
  ShardingRule r = EmptyRule(c);
  const TensorType& x = c.op.input(0);
  r.inputs[0] = pool.Fresh(x.rank());
  r.outputs[0] = r.inputs[0];
  for (int d : dims) {
    if (c.outputs[0].shape[d] != x.shape[d]) r.outputs[0][d] = pool.Fresh();
    for (char l : {r.inputs[0][d], r.outputs[0][d]}) {
      if (r.unsplittable.find(l) == std::string::npos) r.unsplittable.push_back(l);
    }
  }
  return r;
}

absl::StatusOr<ShardingRule> PadSharding(const CostContext& c) {
  LabelPool pool;
  auto pads = c.op.Ints("pads", {});
  if (!pads.ok()) return pads.status();
  std::vector<int> dims;
  for (size_t i = 0; i < pads->size() / 2; ++i) dims.push_back(c.op.input(0).rank() - 1 - static_cast<int>(i));
  ShardingRule r = AllButDims(c, dims, pool);
  MAPD_RETURN_IF_ERROR(pool.status());
  return r;
}

absl::StatusOr<ShardingRule> RollSharding(const CostContext& c) {
  LabelPool pool;
  const TensorType& x = c.op.input(0);
  auto dims = c.op.Ints("dims", {});
  if (!dims.ok()) return dims.status();
  std::vector<int> rolled;
  for (int64_t d : *dims) rolled.push_back(NormalizedDim(x, d));
  if (dims->empty()) {
    for (int d = 0; d < x.rank(); ++d) rolled.push_back(d);  // a roll of the flattened tensor
  }
  ShardingRule r = AllButDims(c, rolled, pool);
  MAPD_RETURN_IF_ERROR(pool.status());
  return r;
}

// index_select: the selected dimension of x is read whole (unsplittable); the output's takes
// the index's label, so a device with a slice of the index computes that slice of the output.
absl::StatusOr<ShardingRule> IndexSelectSharding(const CostContext& c) {
  LabelPool pool;
  const TensorType& x = c.op.input(0);
  auto dim = c.op.Int("dim", 0);
  if (!dim.ok()) return dim.status();
  const int d = NormalizedDim(x, *dim);
  ShardingRule r = EmptyRule(c);
  r.inputs[0] = pool.Fresh(x.rank());
  r.outputs[0] = r.inputs[0];
  r.unsplittable.push_back(r.inputs[0][d]);
  const char index_label = pool.Fresh();
  r.outputs[0][d] = index_label;
  r.inputs[1] = c.op.input(1).rank() == 1 ? std::string(1, index_label) : std::string();
  if (c.op.input(1).rank() == 0) r.unsplittable.push_back(index_label);
  MAPD_RETURN_IF_ERROR(pool.status());
  return r;
}

// slice_scatter: x, src and the output share labels except along dim (unsplittable).
absl::StatusOr<ShardingRule> SliceScatterSharding(const CostContext& c) {
  LabelPool pool;
  const TensorType& x = c.op.input(0);
  auto dim = c.op.Int("dim", 0);
  if (!dim.ok()) return dim.status();
  const int d = NormalizedDim(x, *dim);
  ShardingRule r = AllButDims(c, {d}, pool);
  r.inputs[1] = r.inputs[0];
  if (c.op.input(1).shape[d] != x.shape[d]) {
    r.inputs[1][d] = pool.Fresh();
    r.unsplittable.push_back(r.inputs[1][d]);
  }
  MAPD_RETURN_IF_ERROR(pool.status());
  return r;
}

// index_select's backward adds the output gradient's rows into a zero gradient of x
// (index_add): x's gradient is made whole, one add per selected element.
OpCost IndexSelectCost(const CostContext& c) {
  OpCost cost = CopyCost(c);
  cost.grad_flops[0] = static_cast<double>(c.outputs[0].NumElements());
  return cost;
}

}  // namespace

void RegisterIndexOps(OpRegistry& r) {
  (void)r.Register({"pad", "x padded by pads (last dimension first), mode constant (value) | reflect | replicate",
                    {{"x"}}, false,
                    {{"pads", AttrKind::kInts, true}, {"mode", AttrKind::kString}, {"value", AttrKind::kNumber}}, {},
                    InferPad, CopyCost, SavesNothing(), {}, PadSharding});
  (void)r.Register({"roll", "x rolled by shifts along dims (the flattened x when dims is empty)", {{"x"}}, false,
                    {{"shifts", AttrKind::kInts, true}, {"dims", AttrKind::kInts}}, {}, InferRoll, CopyCost,
                    SavesNothing(), {}, RollSharding});
  (void)r.Register({"index_select", "x's entries at index (1-D integers) along dim", {{"x"}, {"index"}}, false,
                    {{"dim", AttrKind::kInt, true}}, {}, InferIndexSelect, IndexSelectCost, Saves({1}, {}), {},
                    IndexSelectSharding});
  (void)r.Register({"slice_scatter", "x with x[start:end:step] along dim replaced by src", {{"x"}, {"src"}}, false,
                    {{"dim", AttrKind::kInt}, {"start", AttrKind::kInt}, {"end", AttrKind::kInt}, {"step", AttrKind::kInt}},
                    {}, InferSliceScatter, CopyCost, SavesNothing(), {}, SliceScatterSharding});
}

}  // namespace mapd

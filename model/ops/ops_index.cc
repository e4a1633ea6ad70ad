// Rearranging and indexing ops: pad, roll, flip, index_select, slice_scatter — what windowed
// attention (Swin's shifted windows and relative position bias) and in-place writes into a
// slice are made of — and gather, scatter, scatter_add, index_add and one_hot: what
// message passing (edges gathered from and summed into nodes) and mixture-of-experts routing
// are made of.
#include <algorithm>
#include <map>

#include "common/status_macros.h"
#include "model/ops/registry.h"
#include "model/ops/shape_util.h"

namespace mapd {
namespace {

using Types = std::vector<TensorType>;

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

absl::StatusOr<Types> InferFlip(const OpContext& ctx) {
  MAPD_ASSIGN_OR_RETURN(std::vector<int64_t> dims, ctx.Ints("dims"));
  MAPD_RETURN_IF_ERROR(NormalizeDims(ctx, dims, ctx.input(0).rank()).status());
  return Types{ctx.input(0)};
}

absl::Status ExpectIndex(const OpContext& ctx, int input) {
  const TensorType& t = ctx.input(input);
  if (t.dtype != v1::INT64 && t.dtype != v1::INT32) return ctx.Error("index must be an integer tensor, got ", t.ToString());
  return absl::OkStatus();
}

// gather's and scatter's index (input 1): integers, of x's rank, no larger than x outside
// attribute dim (which must name a dim of x).
absl::Status ExpectIndexFits(const OpContext& ctx) {
  const TensorType& x = ctx.input(0);
  const TensorType& index = ctx.input(1);
  MAPD_RETURN_IF_ERROR(ExpectIndex(ctx, 1));
  MAPD_ASSIGN_OR_RETURN(int64_t dim, ctx.Int("dim"));
  MAPD_ASSIGN_OR_RETURN(int d, NormalizeDim(ctx, dim, std::max(x.rank(), 1)));
  if (index.rank() != x.rank()) return ctx.Error("index ", index.ToString(), " must have the rank of ", x.ToString());
  for (int i = 0; i < x.rank(); ++i) {
    if (i != d && index.shape[i] > x.shape[i]) {
      return ctx.Error("index ", index.ToString(), " is larger than ", x.ToString(), " in dimension ", i);
    }
  }
  return absl::OkStatus();
}

// gather(x, index, dim): out[i][j] = x[index[i][j]][j] (dim 0). index has x's rank and no
// dimension larger than x's except along dim; the output has index's shape.
absl::StatusOr<Types> InferGather(const OpContext& ctx) {
  const TensorType& x = ctx.input(0);
  const TensorType& index = ctx.input(1);
  MAPD_RETURN_IF_ERROR(ExpectIndexFits(ctx));
  return Types{{x.dtype, index.shape}};
}

// scatter(x, index, src | value, dim), scatter_add(x, index, src, dim): x with src's entries
// written (added) at index along dim; index no larger than src, neither larger than x outside dim.
absl::StatusOr<Types> InferScatter(const OpContext& ctx) {
  const TensorType& x = ctx.input(0);
  const TensorType& index = ctx.input(1);
  MAPD_RETURN_IF_ERROR(ExpectIndexFits(ctx));
  if (ctx.has_input(2) == ctx.has_attr("value")) return ctx.Error("give a src input or attribute 'value', not both or neither");
  if (ctx.op() == "scatter_add" && !ctx.has_input(2)) return ctx.Error("scatter_add needs a src input");
  if (ctx.has_input(2)) {
    const TensorType& src = ctx.input(2);
    if (src.rank() != x.rank() || src.dtype != x.dtype) {
      return ctx.Error("src ", src.ToString(), " must have the rank and dtype of ", x.ToString());
    }
    for (int i = 0; i < x.rank(); ++i) {
      if (index.shape[i] > src.shape[i]) return ctx.Error("index ", index.ToString(), " is larger than src ", src.ToString());
    }
  }
  return Types{x};
}

// index_add(x, index, source, dim, alpha): x with alpha * source's slices added at the 1-D
// index's positions along dim; source is x's shape with index's length along dim.
absl::StatusOr<Types> InferIndexAdd(const OpContext& ctx) {
  const TensorType& x = ctx.input(0);
  const TensorType& index = ctx.input(1);
  const TensorType& source = ctx.input(2);
  MAPD_RETURN_IF_ERROR(ExpectIndex(ctx, 1));
  if (index.rank() > 1) return ctx.Error("index must be 1-D, got ", index.ToString());
  MAPD_ASSIGN_OR_RETURN(int64_t dim, ctx.Int("dim"));
  MAPD_ASSIGN_OR_RETURN(int d, NormalizeDim(ctx, dim, std::max(x.rank(), 1)));
  Shape want = x.shape;
  if (x.rank() > 0) want[d] = index.NumElements();
  if (source.shape != want || source.dtype != x.dtype) {
    return ctx.Error("source ", source.ToString(), " must be ", TensorType{x.dtype, want}.ToString());
  }
  return Types{x};
}

// one_hot(x, num_classes): an int64 [..., num_classes] tensor with a 1 at each of x's values.
absl::StatusOr<Types> InferOneHot(const OpContext& ctx) {
  const TensorType& x = ctx.input(0);
  if (x.dtype != v1::INT64) return ctx.Error("one_hot needs an int64 tensor, got ", x.ToString());
  MAPD_ASSIGN_OR_RETURN(int64_t classes, ctx.Int("num_classes"));
  if (classes <= 0) {
    return ctx.Error("num_classes must be given and positive, got ", classes,
                     " (one_hot's default -1 takes the class count from the data, which a plan cannot)");
  }
  Shape out = x.shape;
  out.push_back(classes);
  return Types{{v1::INT64, out}};
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

absl::StatusOr<ShardingRule> PadSharding(const CostContext& c) {
  LabelPool pool;
  auto pads = c.op.Ints("pads", {});
  if (!pads.ok()) return pads.status();
  std::vector<int> dims;
  for (size_t i = 0; i < pads->size() / 2; ++i) dims.push_back(c.op.input(0).rank() - 1 - static_cast<int>(i));
  ShardingRule r = SameLabelsExcept(c, dims, pool);
  MAPD_RETURN_IF_ERROR(pool.status());
  return r;
}

absl::StatusOr<ShardingRule> RollSharding(const CostContext& c) {
  LabelPool pool;
  const TensorType& x = c.op.input(0);
  auto dims = c.op.Ints("dims", {});
  if (!dims.ok()) return dims.status();
  std::vector<int> rolled;
  for (int64_t d : *dims) rolled.push_back(WrapDim(d, x.rank()));
  if (dims->empty()) {
    for (int d = 0; d < x.rank(); ++d) rolled.push_back(d);  // a roll of the flattened tensor
  }
  ShardingRule r = SameLabelsExcept(c, rolled, pool);
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
  const int d = WrapDim(*dim, x.rank());
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
  const int d = WrapDim(*dim, x.rank());
  ShardingRule r = SameLabelsExcept(c, {d}, pool);
  r.inputs[1] = r.inputs[0];
  if (c.op.input(1).shape[d] != x.shape[d]) {
    r.inputs[1][d] = pool.Fresh();
    r.unsplittable.push_back(r.inputs[1][d]);
  }
  MAPD_RETURN_IF_ERROR(pool.status());
  return r;
}

absl::StatusOr<ShardingRule> FlipSharding(const CostContext& c) {
  LabelPool pool;
  std::vector<int> flipped;
  auto dims = c.op.Ints("dims", {});
  if (!dims.ok()) return dims.status();
  for (int64_t d : *dims) flipped.push_back(WrapDim(d, c.op.input(0).rank()));
  ShardingRule r = SameLabelsExcept(c, flipped, pool);
  MAPD_RETURN_IF_ERROR(pool.status());
  return r;
}

// gather: index and output share labels; x shares them outside dim where the sizes are equal
// (elsewhere, and along dim, x is read whole: unsplittable). A device with a slice of index
// along dim gathers that slice of the output from the whole of x's dim.
absl::StatusOr<ShardingRule> GatherSharding(const CostContext& c) {
  LabelPool pool;
  ShardingRule r = EmptyRule(c);
  const TensorType& x = c.op.input(0);
  const int d = AttrDim(c, "dim", 0);
  r.inputs[1] = pool.Fresh(x.rank());
  r.outputs[0] = r.inputs[1];
  for (int i = 0; i < x.rank(); ++i) {
    const bool shared = i != d && x.shape[i] == c.op.input(1).shape[i];
    r.inputs[0].push_back(shared ? r.inputs[1][i] : pool.Fresh());
    if (!shared) r.unsplittable.push_back(r.inputs[0][i]);
  }
  MAPD_RETURN_IF_ERROR(pool.status());
  return r;
}

// scatter / scatter_add / index_add: x and the output share labels; index and src share x's
// outside dim where all sizes are equal (elsewhere both sides are unsplittable). Along dim, x's
// label is unsplittable (any position may be written). For the adds, the written entries'
// label along dim (index and src/source) is a linear reduction: a device with a slice of the
// edges adds its part, the output is Partial and x counts once (an addend). scatter overwrites,
// so its label there is unsplittable.
absl::StatusOr<ShardingRule> ScatterSharding(const CostContext& c) {
  LabelPool pool;
  ShardingRule r = EmptyRule(c);
  const TensorType& x = c.op.input(0);
  const bool index_add = c.op.op() == "index_add";
  const int src = 2;  // src (scatter, scatter_add) or source (index_add)
  const int d = AttrDim(c, "dim", 0);
  const bool adds = c.op.op() != "scatter";
  r.inputs[0] = pool.Fresh(x.rank());
  r.outputs[0] = r.inputs[0];
  if (x.rank() > 0) r.unsplittable.push_back(r.inputs[0][d]);
  const TensorType& index = c.op.input(1);
  std::string written;  // index's / src's labels
  for (int i = 0; i < x.rank(); ++i) {
    if (i == d) {
      written.push_back(pool.Fresh());
      (adds ? r.linear_reduced : r.unsplittable).push_back(written.back());
      continue;
    }
    const bool shared = index_add || (index.shape[i] == x.shape[i] &&
                                      (!c.op.has_input(src) || c.op.input(src).shape[i] == x.shape[i]));
    written.push_back(shared ? r.inputs[0][i] : pool.Fresh());
    if (!shared) {
      r.unsplittable.push_back(written.back());
      if (r.unsplittable.find(r.inputs[0][i]) == std::string::npos) r.unsplittable.push_back(r.inputs[0][i]);
    }
  }
  if (x.rank() == 0) written.clear();
  r.inputs[1] = index_add ? (index.rank() == 1 ? std::string(1, written[d]) : std::string()) : written;
  if (c.op.has_input(src)) r.inputs[src] = written;
  if (adds) r.addends = {0};
  MAPD_RETURN_IF_ERROR(pool.status());
  return r;
}

// one_hot: x's dimensions split; the class dimension is unsplittable (a device would compare
// against its classes' offset).
absl::StatusOr<ShardingRule> OneHotSharding(const CostContext& c) {
  LabelPool pool;
  ShardingRule r = EmptyRule(c);
  r.inputs[0] = pool.Fresh(c.op.input(0).rank());
  r.outputs[0] = r.inputs[0] + pool.Fresh();
  r.unsplittable = r.outputs[0].substr(r.outputs[0].size() - 1);
  MAPD_RETURN_IF_ERROR(pool.status());
  return r;
}

// Gradients that gather or scatter one value per written element.
OpCost GatherScatterCost(const CostContext& c) {
  OpCost cost = CopyCost(c);
  // gather moves its output's elements; the scatters their src's (or index's, for a value).
  const TensorType& moved = c.op.op() == "gather" ? c.outputs[0] : c.op.input(c.op.has_input(2) ? 2 : 1);
  const double n = static_cast<double>(moved.NumElements());
  cost.flops = n;
  cost.grad_flops.assign(c.op.num_inputs(), 0);
  for (int i = 0; i < c.op.num_inputs(); ++i) {
    if (c.input_requires_grad(i)) cost.grad_flops[i] = n;
  }
  return cost;
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
  r.Add(Op("pad", "x padded by pads (last dimension first), mode constant (value) | reflect | replicate")
          .Inputs({{"x"}})
          .Attrs({{"pads", AttrKind::kInts, true}, {"mode", AttrKind::kString}, {"value", AttrKind::kNumber}})
          .Infer(InferPad)
          .Cost(CopyCost)
          .Saved(SavesNothing())
          .Sharding(PadSharding));
  r.Add(Op("roll", "x rolled by shifts along dims (the flattened x when dims is empty)")
          .Inputs({{"x"}})
          .Attrs({{"shifts", AttrKind::kInts, true}, {"dims", AttrKind::kInts}})
          .Infer(InferRoll)
          .Cost(CopyCost)
          .Saved(SavesNothing())
          .Sharding(RollSharding));
  r.Add(Op("index_select", "x's entries at index (1-D integers) along dim")
          .Inputs({{"x"}, {"index"}})
          .Attrs({{"dim", AttrKind::kInt, true}})
          .Infer(InferIndexSelect)
          .Cost(IndexSelectCost)
          .Saved(Saves({1}, {}))
          .Sharding(IndexSelectSharding));
  r.Add(Op("flip", "x reversed along dims")
          .Inputs({{"x"}})
          .Attrs({{"dims", AttrKind::kInts, true}})
          .Infer(InferFlip)
          .Cost(CopyCost)
          .Saved(SavesNothing())
          .Sharding(FlipSharding));
  // What LibTorch 1.13's autograd keeps: gather its input (for the gradient's shape: the node
  // holds x) and index; the scatters their index; index_add its index and source.
  r.Add(Op("gather", "x's entries at index along dim (the output has index's shape)")
          .Inputs({{"x"}, {"index"}})
          .Attrs({{"dim", AttrKind::kInt, true}})
          .Infer(InferGather)
          .Cost(GatherScatterCost)
          .Saved(Saves({0, 1}, {}))
          .Sharding(GatherSharding));
  r.Add(Op("scatter", "x with src's entries (or value) written at index along dim")
          .Inputs({{"x"}, {"index"}, {"src", true}})
          .Attrs({{"dim", AttrKind::kInt, true}, {"value", AttrKind::kNumber}})
          .Infer(InferScatter)
          .Cost(GatherScatterCost)
          .Saved(Saves({1}, {}))
          .Sharding(ScatterSharding));
  r.Add(Op("scatter_add", "x with src's entries added at index along dim")
          .Inputs({{"x"}, {"index"}, {"src"}})
          .Attrs({{"dim", AttrKind::kInt, true}})
          .Infer(InferScatter)
          .Cost(GatherScatterCost)
          .Saved(Saves({1}, {}))
          .Sharding(ScatterSharding));
  r.Add(Op("index_add", "x with alpha * source's slices added at the 1-D index along dim")
          .Inputs({{"x"}, {"index"}, {"source"}})
          .Attrs({{"dim", AttrKind::kInt, true}, {"alpha", AttrKind::kNumber}})
          .Infer(InferIndexAdd)
          .Cost(GatherScatterCost)
          .Saved(Saves({1, 2}, {}))
          .Sharding(ScatterSharding));
  r.Add(Op("one_hot", "int64 [..., num_classes] with a 1 at each of x's values")
          .Inputs({{"x"}})
          .Attrs({{"num_classes", AttrKind::kInt, true}})
          .Infer(InferOneHot)
          .Cost(CopyCost)
          .Saved(SavesNothing())
          .Sharding(OneHotSharding));
  r.Add(Op("slice_scatter", "x with x[start:end:step] along dim replaced by src")
          .Inputs({{"x"}, {"src"}})
          .Attrs({{"dim", AttrKind::kInt}, {"start", AttrKind::kInt}, {"end", AttrKind::kInt}, {"step", AttrKind::kInt}})
          .Infer(InferSliceScatter)
          .Cost(CopyCost)
          .Saved(SavesNothing())
          .Sharding(SliceScatterSharding));
}

}  // namespace mapd

// Layout ops: view, reshape, flatten, transpose, permute, contiguous, unsqueeze, squeeze,
// expand, repeat_interleave, slice, select, split, chunk, cat, stack.
#include <algorithm>
#include <limits>
#include <map>

#include "common/status_macros.h"
#include "model/ops/registry.h"
#include "model/ops/shape_util.h"

namespace mapd {
namespace {

using Types = std::vector<TensorType>;

OpTraits View() {
  OpTraits t;
  t.view = true;
  t.grad_aliases_output_grad = true;
  return t;
}

absl::StatusOr<Types> InferReshape(const OpContext& ctx) {
  MAPD_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ctx.Ints("shape"));
  MAPD_ASSIGN_OR_RETURN(Shape out, ResolveReshape(ctx, ctx.input(0).shape, shape));
  return Types{{ctx.input(0).dtype, out}};
}

absl::StatusOr<Types> InferFlatten(const OpContext& ctx) {
  const TensorType& x = ctx.input(0);
  if (x.rank() == 0) return Types{{x.dtype, {1}}};
  MAPD_ASSIGN_OR_RETURN(int64_t s, ctx.Int("start_dim", 0));
  MAPD_ASSIGN_OR_RETURN(int64_t e, ctx.Int("end_dim", -1));
  MAPD_ASSIGN_OR_RETURN(int start, NormalizeDim(ctx, s, x.rank()));
  MAPD_ASSIGN_OR_RETURN(int end, NormalizeDim(ctx, e, x.rank()));
  if (start > end) return ctx.Error("start_dim ", s, " comes after end_dim ", e);
  Shape out(x.shape.begin(), x.shape.begin() + start);
  int64_t merged = 1;
  for (int d = start; d <= end; ++d) merged *= x.shape[d];
  out.push_back(merged);
  out.insert(out.end(), x.shape.begin() + end + 1, x.shape.end());
  return Types{{x.dtype, out}};
}

absl::StatusOr<Types> InferTranspose(const OpContext& ctx) {
  TensorType x = ctx.input(0);
  if (x.rank() < 2 && !ctx.has_attr("dim0")) return Types{x};
  MAPD_ASSIGN_OR_RETURN(int64_t a, ctx.Int("dim0"));
  MAPD_ASSIGN_OR_RETURN(int64_t b, ctx.Int("dim1"));
  if (x.rank() == 0) return Types{x};
  MAPD_ASSIGN_OR_RETURN(int da, NormalizeDim(ctx, a, x.rank()));
  MAPD_ASSIGN_OR_RETURN(int db, NormalizeDim(ctx, b, x.rank()));
  std::swap(x.shape[da], x.shape[db]);
  return Types{x};
}

absl::StatusOr<Types> InferPermute(const OpContext& ctx) {
  const TensorType& x = ctx.input(0);
  MAPD_ASSIGN_OR_RETURN(std::vector<int64_t> dims, ctx.Ints("dims"));
  if (static_cast<int>(dims.size()) != x.rank()) {
    return ctx.Error("dims ", ShapeToString(dims), " must list all ", x.rank(), " dimensions of ", x.ToString());
  }
  MAPD_ASSIGN_OR_RETURN(std::vector<int> nd, NormalizeDims(ctx, dims, x.rank()));
  Shape out;
  for (int d : nd) out.push_back(x.shape[d]);
  return Types{{x.dtype, out}};
}

absl::StatusOr<Types> InferIdentity(const OpContext& ctx) { return Types{ctx.input(0)}; }

absl::StatusOr<Types> InferUnsqueeze(const OpContext& ctx) {
  TensorType x = ctx.input(0);
  MAPD_ASSIGN_OR_RETURN(int64_t dim, ctx.Int("dim"));
  MAPD_ASSIGN_OR_RETURN(int d, NormalizeDim(ctx, dim, x.rank(), /*allow_end=*/true));
  x.shape.insert(x.shape.begin() + d, 1);
  return Types{x};
}

absl::StatusOr<Types> InferSqueeze(const OpContext& ctx) {
  const TensorType& x = ctx.input(0);
  MAPD_ASSIGN_OR_RETURN(std::vector<int64_t> dims, ctx.Ints("dims", {}));
  MAPD_ASSIGN_OR_RETURN(std::vector<int> nd, NormalizeDims(ctx, dims, x.rank()));
  Shape out;
  for (int d = 0; d < x.rank(); ++d) {
    const bool listed = dims.empty() || std::find(nd.begin(), nd.end(), d) != nd.end();
    if (listed && x.shape[d] == 1) continue;  // a listed dim that is not 1 stays, as in PyTorch
    out.push_back(x.shape[d]);
  }
  return Types{{x.dtype, out}};
}

// expand(x; shape): -1 keeps a dim; new leading dims may be added; only size-1 dims grow.
absl::StatusOr<Types> InferExpand(const OpContext& ctx) {
  const TensorType& x = ctx.input(0);
  MAPD_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ctx.Ints("shape"));
  if (shape.size() < x.shape.size()) {
    return ctx.Error("cannot expand ", x.ToString(), " to fewer dimensions ", ShapeToString(shape));
  }
  const size_t lead = shape.size() - x.shape.size();
  Shape out(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i < lead) {
      if (shape[i] < 0) return ctx.Error("a new leading dimension cannot be -1 in ", ShapeToString(shape));
      out[i] = shape[i];
      continue;
    }
    const int64_t have = x.shape[i - lead];
    if (shape[i] == -1 || shape[i] == have) {
      out[i] = have;
    } else if (have == 1 && shape[i] >= 0) {
      out[i] = shape[i];
    } else {
      return ctx.Error("cannot expand ", x.ToString(), " to ", ShapeToString(shape), " (dimension ", i,
                       " has size ", have, ", not 1)");
    }
  }
  return Types{{x.dtype, out}};
}

absl::StatusOr<Types> InferRepeatInterleave(const OpContext& ctx) {
  const TensorType& x = ctx.input(0);
  MAPD_ASSIGN_OR_RETURN(int64_t repeats, ctx.Int("repeats"));
  if (repeats < 0) return ctx.Error("repeats must be non-negative, got ", repeats);
  const auto too_many = [&] { return ctx.Error("repeats ", repeats, " of ", ShapeToString(x.shape), " makes more elements than an int64 counts"); };
  int64_t n = 0;
  if (!ctx.has_attr("dim")) {
    if (__builtin_mul_overflow(x.NumElements(), repeats, &n)) return too_many();
    return Types{{x.dtype, {n}}};
  }
  MAPD_ASSIGN_OR_RETURN(int64_t dim, ctx.Int("dim"));
  MAPD_ASSIGN_OR_RETURN(int d, NormalizeDim(ctx, dim, x.rank()));
  Shape out = x.shape;
  if (__builtin_mul_overflow(out[d], repeats, &out[d]) || __builtin_mul_overflow(x.NumElements() / std::max<int64_t>(x.shape[d], 1), out[d], &n)) {
    return too_many();
  }
  return Types{{x.dtype, out}};
}

// slice(x; dim, start, end, step): Python slice semantics, clamped to the dimension.
absl::StatusOr<Types> InferSlice(const OpContext& ctx) {
  const TensorType& x = ctx.input(0);
  MAPD_ASSIGN_OR_RETURN(int64_t dim, ctx.Int("dim", 0));
  MAPD_ASSIGN_OR_RETURN(int d, NormalizeDim(ctx, dim, x.rank()));
  MAPD_ASSIGN_OR_RETURN(int64_t start, ctx.Int("start", 0));
  MAPD_ASSIGN_OR_RETURN(int64_t end, ctx.Int("end", std::numeric_limits<int64_t>::max()));
  MAPD_ASSIGN_OR_RETURN(int64_t step, ctx.Int("step", 1));
  if (step <= 0) return ctx.Error("step must be positive, got ", step);
  const int64_t n = x.shape[d];
  auto clamp = [n](int64_t v) {
    if (v < 0) v += n;
    return std::min(std::max<int64_t>(v, 0), n);
  };
  const int64_t s = clamp(start), e = clamp(end);
  Shape out = x.shape;
  out[d] = e > s ? (e - s + step - 1) / step : 0;
  return Types{{x.dtype, out}};
}

absl::StatusOr<Types> InferSelect(const OpContext& ctx) {
  const TensorType& x = ctx.input(0);
  MAPD_ASSIGN_OR_RETURN(int64_t dim, ctx.Int("dim"));
  MAPD_ASSIGN_OR_RETURN(int64_t index, ctx.Int("index"));
  MAPD_ASSIGN_OR_RETURN(int d, NormalizeDim(ctx, dim, x.rank()));
  if (index < -x.shape[d] || index >= x.shape[d]) {
    return ctx.Error("index ", index, " is out of range for dimension ", dim, " of size ", x.shape[d]);
  }
  Shape out = x.shape;
  out.erase(out.begin() + d);
  return Types{{x.dtype, out}};
}

// split(x; split_size | sizes, dim): several outputs, as torch.split.
absl::StatusOr<Types> InferSplit(const OpContext& ctx) {
  const TensorType& x = ctx.input(0);
  MAPD_ASSIGN_OR_RETURN(int64_t dim, ctx.Int("dim", 0));
  MAPD_ASSIGN_OR_RETURN(int d, NormalizeDim(ctx, dim, x.rank()));
  const int64_t n = x.shape[d];
  std::vector<int64_t> sizes;
  if (ctx.has_attr("sizes")) {
    if (ctx.has_attr("split_size")) return ctx.Error("give 'split_size' or 'sizes', not both");
    MAPD_ASSIGN_OR_RETURN(sizes, ctx.Ints("sizes"));
    int64_t total = 0;
    for (int64_t s : sizes) {
      if (s < 0) return ctx.Error("sizes ", ShapeToString(sizes), " has a negative entry");
      total += s;
    }
    if (total != n) return ctx.Error("sizes ", ShapeToString(sizes), " add up to ", total, ", not ", n);
  } else {
    MAPD_ASSIGN_OR_RETURN(int64_t size, ctx.Int("split_size"));
    if (size <= 0) return ctx.Error("split_size must be positive, got ", size);
    for (int64_t at = 0; at < n; at += size) sizes.push_back(std::min(size, n - at));
    if (sizes.empty()) sizes.push_back(0);
  }
  Types out;
  for (int64_t s : sizes) {
    TensorType t = x;
    t.shape[d] = s;
    out.push_back(t);
  }
  return out;
}

// chunk(x; chunks, dim): ceil(n / chunks)-sized pieces, as torch.chunk (maybe fewer pieces).
// A zero-size dim gives `chunks` empty pieces, as at::chunk (LibTorch 1.13) does.
absl::StatusOr<Types> InferChunk(const OpContext& ctx) {
  const TensorType& x = ctx.input(0);
  MAPD_ASSIGN_OR_RETURN(int64_t chunks, ctx.Int("chunks"));
  if (chunks <= 0) return ctx.Error("chunks must be positive, got ", chunks);
  MAPD_ASSIGN_OR_RETURN(int64_t dim, ctx.Int("dim", 0));
  MAPD_ASSIGN_OR_RETURN(int d, NormalizeDim(ctx, dim, x.rank()));
  const int64_t n = x.shape[d];
  const int64_t size = (n + chunks - 1) / chunks;
  Types out;
  for (int64_t at = 0; at < n; at += size) {
    TensorType t = x;
    t.shape[d] = std::min(size, n - at);
    out.push_back(t);
  }
  if (n == 0) out.assign(static_cast<size_t>(chunks), x);
  return out;
}

absl::StatusOr<Types> InferCat(const OpContext& ctx) {
  MAPD_ASSIGN_OR_RETURN(int64_t dim, ctx.Int("dim", 0));
  const TensorType& first = ctx.input(0);
  MAPD_ASSIGN_OR_RETURN(int d, NormalizeDim(ctx, dim, first.rank()));
  TensorType out = first;
  for (int i = 1; i < ctx.num_inputs(); ++i) {
    const TensorType& t = ctx.input(i);
    if (t.rank() != first.rank()) {
      return ctx.Error("input ", i, " ", t.ToString(), " has another rank than input 0 ", first.ToString());
    }
    for (int k = 0; k < t.rank(); ++k) {
      if (k != d && t.shape[k] != first.shape[k]) {
        return ctx.Error("input ", i, " ", t.ToString(), " differs from input 0 ", first.ToString(),
                         " outside dimension ", d);
      }
    }
    out.shape[d] += t.shape[d];
    out.dtype = PromoteDTypes(out.dtype, t.dtype);
  }
  return Types{out};
}

absl::StatusOr<Types> InferStack(const OpContext& ctx) {
  MAPD_ASSIGN_OR_RETURN(int64_t dim, ctx.Int("dim", 0));
  const TensorType& first = ctx.input(0);
  MAPD_ASSIGN_OR_RETURN(int d, NormalizeDim(ctx, dim, first.rank(), /*allow_end=*/true));
  DType dtype = first.dtype;
  for (int i = 1; i < ctx.num_inputs(); ++i) {
    if (ctx.input(i).shape != first.shape) {
      return ctx.Error("input ", i, " ", ctx.input(i).ToString(), " differs in shape from input 0 ",
                       first.ToString());
    }
    dtype = PromoteDTypes(dtype, ctx.input(i).dtype);
  }
  Shape out = first.shape;
  out.insert(out.begin() + d, ctx.num_inputs());
  return Types{{dtype, out}};
}

// ---- layout and costs ----

int64_t LeadingElements(const Shape& s, int d) {
  int64_t n = 1;
  for (int i = 0; i < d; ++i) n *= s[i];
  return n;
}

// Taking a piece along dim d keeps a contiguous tensor contiguous when the dims before d are
// all 1 (the piece is one block) or the piece is the whole tensor.
bool PieceLayout(const CostContext& c, int d) {
  if (!c.input_contiguous(0)) return false;
  const TensorType& x = c.op.input(0);
  if (d >= x.rank()) return true;
  return LeadingElements(x.shape, d) == 1 || c.outputs[0].shape == x.shape;
}

bool TransposeLayout(const CostContext& c) {
  const TensorType& x = c.op.input(0);
  if (x.rank() < 2) return c.input_contiguous(0);
  const int a = AttrDim(c, "dim0", 0), b = AttrDim(c, "dim1", 1);
  return c.input_contiguous(0) && (a == b || x.shape[a] == 1 || x.shape[b] == 1);
}

bool PermuteLayout(const CostContext& c) {
  auto dims = c.op.Ints("dims");
  if (!dims.ok() || !c.input_contiguous(0)) return false;
  const TensorType& x = c.op.input(0);
  int64_t last = -1;
  for (int64_t d : *dims) {  // non-1 dims must keep their order
    const int64_t nd = d < 0 ? d + x.rank() : d;
    if (x.shape[nd] == 1) continue;
    if (nd < last) return false;
    last = nd;
  }
  return true;
}

bool ExpandLayout(const CostContext& c) { return c.input_contiguous(0) && c.outputs[0].shape == c.op.input(0).shape; }

// contiguous/reshape copy a non-contiguous input (reading and writing it once).
OpCost CopyIfNeededCost(const CostContext& c) {
  OpCost cost = FreeCost()(c);
  if (!c.input_contiguous(0)) {
    cost.bytes = 2 * c.op.input(0).NumBytes();
    cost.kernels = 1;
  }
  return cost;
}

// repeat_interleave is an index_select, which keeps its int64 index (one per output row).
SavedSpec RepeatInterleaveSaved(const CostContext& c) {
  SavedSpec s;
  if (!c.any_requires_grad()) return s;
  const int d = c.op.has_attr("dim") ? AttrDim(c, "dim", 0) : 0;
  s.extra_bytes = (c.outputs[0].rank() == 0 ? 1 : c.outputs[0].shape[d]) * 8;
  return s;
}

// ---- sharding rules (docs/sharding.md) ----

// transpose / permute: the labels move with their dimensions.
absl::StatusOr<ShardingRule> TransposeSharding(const CostContext& c) {
  ShardingRule r = EmptyRule(c);
  LabelPool pool;
  const int rank = c.op.input(0).rank();
  r.inputs[0] = pool.Fresh(rank);
  r.outputs[0] = r.inputs[0];
  if (rank >= 2 && c.op.has_attr("dim0")) {
    std::swap(r.outputs[0][AttrDim(c, "dim0", 0)], r.outputs[0][AttrDim(c, "dim1", 1)]);
  }
  MAPD_RETURN_IF_ERROR(pool.status());
  return r;
}

absl::StatusOr<ShardingRule> PermuteSharding(const CostContext& c) {
  ShardingRule r = EmptyRule(c);
  LabelPool pool;
  const int rank = c.op.input(0).rank();
  r.inputs[0] = pool.Fresh(rank);
  MAPD_ASSIGN_OR_RETURN(std::vector<int64_t> dims, c.op.Ints("dims"));
  for (int64_t d : dims) r.outputs[0].push_back(r.inputs[0][(d % rank + rank) % rank]);
  MAPD_RETURN_IF_ERROR(pool.status());
  return r;
}

// expand: kept dimensions share labels; an expanded size-1 input dimension has its own
// unsplittable label, and the expanded output dimension (like a new leading one) a label of its
// own that splits — each device expands to its slice from the replicated input.
absl::StatusOr<ShardingRule> ExpandSharding(const CostContext& c) {
  ShardingRule r = EmptyRule(c);
  LabelPool pool;
  const Shape& out = c.outputs[0].shape;
  r.outputs[0] = pool.Fresh(static_cast<int>(out.size()));
  r.inputs[0] = AlignLabels(c.op.input(0).shape, out, r.outputs[0], pool, &r.unsplittable);
  MAPD_RETURN_IF_ERROR(pool.status());
  return r;
}

// repeat_interleave along dim: output row i is input row i / repeats, so splitting the input's
// dimension in n contiguous parts splits the output's in the same n parts — one label names
// both (sizes m and m*repeats, as a merged dimension's outermost factor). Without dim the input
// is flattened first: its outermost dimension shares the output's label, the others are
// unsplittable.
absl::StatusOr<ShardingRule> RepeatInterleaveSharding(const CostContext& c) {
  ShardingRule r = EmptyRule(c);
  LabelPool pool;
  const TensorType& x = c.op.input(0);
  const int rank = x.rank();
  auto repeats = c.op.Int("repeats");
  const bool empty = !repeats.ok() || *repeats <= 0 || x.NumElements() == 0;
  r.inputs[0] = pool.Fresh(rank);
  if (c.op.has_attr("dim")) {
    const int d = AttrDim(c, "dim", 0);
    r.outputs[0] = r.inputs[0];
    if (empty) {
      r.unsplittable.push_back(r.inputs[0][d]);
      r.outputs[0][d] = pool.Fresh();
      r.unsplittable.push_back(r.outputs[0][d]);
    }
  } else {
    const bool share = rank > 0 && !empty;
    r.outputs[0] = share ? r.inputs[0].substr(0, 1) : std::string(1, pool.Fresh());
    r.unsplittable = share ? r.inputs[0].substr(1) : r.inputs[0] + r.outputs[0];
  }
  MAPD_RETURN_IF_ERROR(pool.status());
  return r;
}

// slice along dim: that dimension is unsplittable (a device's piece of the slice is not its
// piece of the input) and has different labels in and out — unless the slice keeps the whole
// dimension, which then splits as any other.
absl::StatusOr<ShardingRule> SliceSharding(const CostContext& c) {
  ShardingRule r = EmptyRule(c);
  LabelPool pool;
  const int rank = c.op.input(0).rank();
  r.inputs[0] = pool.Fresh(rank);
  r.outputs[0] = r.inputs[0];
  const int d = AttrDim(c, "dim", 0);
  if (rank > 0 && c.op.input(0).shape[d] != c.outputs[0].shape[d]) {
    r.outputs[0][d] = pool.Fresh();
    r.unsplittable = {r.inputs[0][d], r.outputs[0][d]};
  }
  MAPD_RETURN_IF_ERROR(pool.status());
  return r;
}

// select along dim: that dimension is removed and unsplittable.
absl::StatusOr<ShardingRule> SelectSharding(const CostContext& c) {
  ShardingRule r = EmptyRule(c);
  LabelPool pool;
  const int d = AttrDim(c, "dim", 0);
  r.inputs[0] = pool.Fresh(c.op.input(0).rank());
  r.outputs[0] = r.inputs[0];
  r.outputs[0].erase(d, 1);
  r.unsplittable = r.inputs[0].substr(d, 1);
  MAPD_RETURN_IF_ERROR(pool.status());
  return r;
}

// split / chunk along dim: the split dimension is unsplittable (pieces of a split dimension
// are not the pieces the op makes); pieces of equal size share its label, the others
// dimensions keep the input's.
absl::StatusOr<ShardingRule> PiecesSharding(const CostContext& c) {
  ShardingRule r = EmptyRule(c);
  LabelPool pool;
  const TensorType& x = c.op.input(0);
  const int d = AttrDim(c, "dim", 0);
  r.inputs[0] = pool.Fresh(x.rank());
  std::map<int64_t, char> by_size = {{x.shape[d], r.inputs[0][d]}};
  r.unsplittable.push_back(r.inputs[0][d]);
  for (size_t o = 0; o < c.outputs.size(); ++o) {
    r.outputs[o] = r.inputs[0];
    auto it = by_size.find(c.outputs[o].shape[d]);
    if (it == by_size.end()) {
      it = by_size.emplace(c.outputs[o].shape[d], pool.Fresh()).first;
      r.unsplittable.push_back(it->second);
    }
    r.outputs[o][d] = it->second;
  }
  MAPD_RETURN_IF_ERROR(pool.status());
  return r;
}

// cat along dim: the concatenated dimension is unsplittable (inputs of equal size there share
// a label); the other dimensions share labels across all inputs and the output.
absl::StatusOr<ShardingRule> CatSharding(const CostContext& c) {
  ShardingRule r = EmptyRule(c);
  LabelPool pool;
  const int d = AttrDim(c, "dim", 0);
  const std::string labels = pool.Fresh(c.op.input(0).rank());
  std::map<int64_t, char> by_size;
  auto label_for = [&](int64_t size) {
    auto it = by_size.find(size);
    if (it == by_size.end()) {
      it = by_size.emplace(size, pool.Fresh()).first;
      r.unsplittable.push_back(it->second);
    }
    return it->second;
  };
  for (int i = 0; i < c.op.num_inputs(); ++i) {
    r.inputs[i] = labels;
    r.inputs[i][d] = label_for(c.op.input(i).shape[d]);
  }
  r.outputs[0] = labels;
  r.outputs[0][d] = label_for(c.outputs[0].shape[d]);
  MAPD_RETURN_IF_ERROR(pool.status());
  return r;
}

// stack along a new dim: the new dimension is unsplittable; the others share labels.
absl::StatusOr<ShardingRule> StackSharding(const CostContext& c) {
  ShardingRule r = EmptyRule(c);
  LabelPool pool;
  const int rank = c.op.input(0).rank();
  MAPD_ASSIGN_OR_RETURN(int64_t dim, c.op.Int("dim", 0));
  const int d = static_cast<int>(dim < 0 ? dim + rank + 1 : dim);
  const std::string labels = pool.Fresh(rank);
  for (int i = 0; i < c.op.num_inputs(); ++i) r.inputs[i] = labels;
  r.outputs[0] = labels;
  r.outputs[0].insert(r.outputs[0].begin() + d, pool.Fresh());
  r.unsplittable = r.outputs[0].substr(d, 1);
  MAPD_RETURN_IF_ERROR(pool.status());
  return r;
}

}  // namespace

void RegisterShapeOps(OpRegistry& r) {
  OpTraits view = View();
  OpTraits copying_view = view;
  copying_view.copies_if_noncontiguous = true;
  // Views whose backward makes a new tensor of the input's size: slices fill one with zeros
  // around the gradient, expand sums it.
  OpTraits new_grad_view = view;
  new_grad_view.grad_aliases_output_grad = false;
  const CostFn free = FreeCost();
  const SavedFn none = SavesNothing();
  const ShardingFn reshape_rule = ReshapeRule();  // labels mapped through merged/split dimensions
  r.Add(Op("view", "same data, new shape (one -1 allowed)")
          .Inputs({{"x"}})
          .Attrs({{"shape", AttrKind::kInts, true}})
          .Traits(view)
          .Infer(InferReshape)
          .Cost(free)
          .Saved(none)
          .Sharding(reshape_rule));
  r.Add(Op("reshape", "new shape (one -1 allowed); copies a non-contiguous input")
          .Inputs({{"x"}})
          .Attrs({{"shape", AttrKind::kInts, true}})
          .Traits(copying_view)
          .Infer(InferReshape)
          .Cost(CopyIfNeededCost)
          .Saved(none)
          .Sharding(reshape_rule));
  r.Add(Op("flatten", "merge dims start_dim..end_dim")
          .Inputs({{"x"}})
          .Attrs({{"start_dim", AttrKind::kInt}, {"end_dim", AttrKind::kInt}})
          .Traits(copying_view)
          .Infer(InferFlatten)
          .Cost(CopyIfNeededCost)
          .Saved(none)
          .Sharding(reshape_rule));
  r.Add(Op("transpose", "swap dim0 and dim1")
          .Inputs({{"x"}})
          .Attrs({{"dim0", AttrKind::kInt}, {"dim1", AttrKind::kInt}})
          .Traits(view)
          .Infer(InferTranspose)
          .Cost(free)
          .Saved(none)
          .Layout(TransposeLayout)
          .Sharding(TransposeSharding));
  r.Add(Op("permute", "reorder dims")
          .Inputs({{"x"}})
          .Attrs({{"dims", AttrKind::kInts, true}})
          .Traits(view)
          .Infer(InferPermute)
          .Cost(free)
          .Saved(none)
          .Layout(PermuteLayout)
          .Sharding(PermuteSharding));
  r.Add(Op("contiguous", "dense row-major copy of a non-contiguous input (else the input itself)")
          .Inputs({{"x"}})
          .Traits(copying_view)
          .Infer(InferIdentity)
          .Cost(CopyIfNeededCost)
          .Saved(none)
          .Sharding(IdentityRule()));
  r.Add(Op("unsqueeze", "insert a size-1 dim")
          .Inputs({{"x"}})
          .Attrs({{"dim", AttrKind::kInt, true}})
          .Traits(view)
          .Infer(InferUnsqueeze)
          .Cost(free)
          .Saved(none)
          .Sharding(reshape_rule));
  r.Add(Op("squeeze", "remove size-1 dims (listed ones, or all)")
          .Inputs({{"x"}})
          .Attrs({{"dims", AttrKind::kInts}})
          .Traits(view)
          .Infer(InferSqueeze)
          .Cost(free)
          .Saved(none)
          .Sharding(reshape_rule));
  r.Add(Op("expand", "broadcast size-1 dims to shape (-1 keeps)")
          .Inputs({{"x"}})
          .Attrs({{"shape", AttrKind::kInts, true}})
          .Traits(new_grad_view)
          .Infer(InferExpand)
          .Cost(free)
          .Saved(none)
          .Layout(ExpandLayout)
          .Sharding(ExpandSharding));
  r.Add(Op("repeat_interleave", "repeat each element `repeats` times along dim")
          .Inputs({{"x"}})
          .Attrs({{"repeats", AttrKind::kInt, true}, {"dim", AttrKind::kInt}})
          .Infer(InferRepeatInterleave)
          .Cost(CopyCost)
          .Saved(RepeatInterleaveSaved)
          .Sharding(RepeatInterleaveSharding));
  r.Add(Op("slice", "x[start:end:step] along dim")
          .Inputs({{"x"}})
          .Attrs({{"dim", AttrKind::kInt}, {"start", AttrKind::kInt}, {"end", AttrKind::kInt}, {"step", AttrKind::kInt}})
          .Traits(new_grad_view)
          .Infer(InferSlice)
          .Cost(free)
          .Saved(none)
          .Layout([](const CostContext& c) {
                      auto step = c.op.Int("step", 1);
                      return PieceLayout(c, AttrDim(c, "dim", 0)) && step.ok() && *step == 1;
                    })
          .Sharding(SliceSharding));
  r.Add(Op("select", "x[index] along dim (dim removed)")
          .Inputs({{"x"}})
          .Attrs({{"dim", AttrKind::kInt, true}, {"index", AttrKind::kInt, true}})
          .Traits(new_grad_view)
          .Infer(InferSelect)
          .Cost(free)
          .Saved(none)
          .Layout([](const CostContext& c) { return PieceLayout(c, AttrDim(c, "dim", 0)); })
          .Sharding(SelectSharding));
  r.Add(Op("split", "pieces of split_size (or the listed sizes) along dim")
          .Inputs({{"x"}})
          .Attrs({{"split_size", AttrKind::kInt}, {"sizes", AttrKind::kInts}, {"dim", AttrKind::kInt}})
          .Traits(new_grad_view)
          .Infer(InferSplit)
          .Cost(free)
          .Saved(none)
          .Layout([](const CostContext& c) { return PieceLayout(c, AttrDim(c, "dim", 0)); })
          .Sharding(PiecesSharding));
  r.Add(Op("chunk", "`chunks` near-equal pieces along dim")
          .Inputs({{"x"}})
          .Attrs({{"chunks", AttrKind::kInt, true}, {"dim", AttrKind::kInt}})
          .Traits(new_grad_view)
          .Infer(InferChunk)
          .Cost(free)
          .Saved(none)
          .Layout([](const CostContext& c) { return PieceLayout(c, AttrDim(c, "dim", 0)); })
          .Sharding(PiecesSharding));
  r.Add(Op("cat", "concatenate along dim")
          .Inputs({{"xs"}})
          .Variadic()
          .Attrs({{"dim", AttrKind::kInt}})
          .Infer(InferCat)
          .Cost(CopyCost)
          .Saved(none)
          .Sharding(CatSharding));
  r.Add(Op("stack", "stack along a new dim")
          .Inputs({{"xs"}})
          .Variadic()
          .Attrs({{"dim", AttrKind::kInt}})
          .Infer(InferStack)
          .Cost(CopyCost)
          .Saved(none)
          .Sharding(StackSharding));
}

}  // namespace mapd

// Shape and layout ops as aten writes them: view/reshape (and their *_as forms), permute,
// transpose, flatten, squeeze/unsqueeze, expand, contiguous/clone, repeat_interleave, slice and
// select (a slice is recorded as a view of its base, for in-place writes through it),
// split/chunk, cat/stack, pad (constant, reflect, replicate), roll, index_select and x[idx]
// with one index tensor.
#include <limits>

#include "common/status_macros.h"
#include "model/import/importer_internal.h"

namespace mapd {
namespace import_internal {

namespace {

// op(self, <int list>) → op {attr=[...]} (view, reshape, permute, expand, adaptive pooling).
Handler WithIntList(const std::string& op, const std::string& attr) {
  return [op, attr](Importer& im, Node* n, const Args& a) -> Result {
    MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
    MAPD_ASSIGN_OR_RETURN(std::vector<int64_t> list, im.IntListArg(n, a, 1));
    return One(im.Emit1(n, op, {x}, Attrs().Ints(attr, list)));
  };
}

// view_as / reshape_as / expand_as: the target shape comes from the second tensor.
Handler ShapeAs(const std::string& op) {
  return [op](Importer& im, Node* n, const Args& a) -> Result {
    MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
    MAPD_ASSIGN_OR_RETURN(std::string other, im.TensorArg(n, a, 1));
    const Shape& shape = im.builder().TypeOf(other)->shape;
    return One(im.Emit1(n, op, {x}, Attrs().Ints("shape", shape)));
  };
}

Result Flatten(Importer& im, Node* n, const Args& a) {
  MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
  MAPD_ASSIGN_OR_RETURN(int64_t s, im.IntArg(n, a, 1));
  MAPD_ASSIGN_OR_RETURN(int64_t e, im.IntArg(n, a, 2));
  return One(im.Emit1(n, "flatten", {x}, Attrs().Int("start_dim", s).Int("end_dim", e)));
}

Result Transpose(Importer& im, Node* n, const Args& a) {
  MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
  MAPD_ASSIGN_OR_RETURN(int64_t d0, im.IntArg(n, a, 1));
  MAPD_ASSIGN_OR_RETURN(int64_t d1, im.IntArg(n, a, 2));
  return One(im.Emit1(n, "transpose", {x}, Attrs().Int("dim0", d0).Int("dim1", d1)));
}



Result Squeeze(Importer& im, Node* n, const Args& a) {
  MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
  Attrs attrs;
  if (a.size() > 1) {
    MAPD_ASSIGN_OR_RETURN(std::vector<int64_t> dims, im.IntListArg(n, a, 1));
    attrs.Ints("dims", dims);
  }
  return One(im.Emit1(n, "squeeze", {x}, attrs));
}


Result RepeatInterleave(Importer& im, Node* n, const Args& a) {
  MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
  if (a.size() < 2 || !a[1].is_number()) {
    return im.Error(n, "only an integer number of repeats is supported (not a tensor of repeats)");
  }
  MAPD_ASSIGN_OR_RETURN(int64_t repeats, im.IntArg(n, a, 1));
  Attrs attrs;
  attrs.Int("repeats", repeats);
  MAPD_ASSIGN_OR_RETURN(std::optional<int64_t> dim, im.OptionalIntArg(n, a, 2));
  if (dim) attrs.Int("dim", *dim);
  return One(im.Emit1(n, "repeat_interleave", {x}, attrs));
}

Result Slice(Importer& im, Node* n, const Args& a) {
  MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
  MAPD_ASSIGN_OR_RETURN(int64_t dim, im.IntArg(n, a, 1));
  MAPD_ASSIGN_OR_RETURN(std::optional<int64_t> start, im.OptionalIntArg(n, a, 2));
  MAPD_ASSIGN_OR_RETURN(std::optional<int64_t> end, im.OptionalIntArg(n, a, 3));
  MAPD_ASSIGN_OR_RETURN(int64_t step, im.IntArg(n, a, 4));
  const TensorType& t = im.TypeOf(a[0]);
  // x[:] over a whole dimension is the identity; keep the graph small.
  const int64_t d = dim < 0 ? dim + t.rank() : dim;
  const int64_t s = start.value_or(0);
  const int64_t e = end.value_or(std::numeric_limits<int64_t>::max());
  if (step == 1 && s == 0 && d >= 0 && d < t.rank() && e >= t.shape[d]) return std::vector<AValue>{a[0]};
  const Attrs attrs = Attrs().Int("dim", dim).Int("start", s).Int("end", e).Int("step", step);
  MAPD_ASSIGN_OR_RETURN(AValue view, im.Emit1(n, "slice", {x}, attrs));
  im.RecordSliceView(view.tensor, x, attrs);
  return std::vector<AValue>{view};
}

Result Select(Importer& im, Node* n, const Args& a) {
  MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
  MAPD_ASSIGN_OR_RETURN(int64_t dim, im.IntArg(n, a, 1));
  MAPD_ASSIGN_OR_RETURN(int64_t index, im.IntArg(n, a, 2));
  return One(im.Emit1(n, "select", {x}, Attrs().Int("dim", dim).Int("index", index)));
}

// pad(self, pad, mode="constant", value=None); constant_pad_nd(self, pad, value=0);
// reflection_pad{1,2,3}d / replication_pad{1,2,3}d(self, padding).
Handler Pad(const std::string& fixed_mode) {
  return [fixed_mode](Importer& im, Node* n, const Args& a) -> Result {
    MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
    MAPD_ASSIGN_OR_RETURN(std::vector<int64_t> pads, im.IntListArg(n, a, 1));
    std::string mode = fixed_mode;
    int value_at = 2;
    if (mode.empty()) {
      MAPD_ASSIGN_OR_RETURN(mode, im.StringArg(n, a, 2));
      value_at = 3;
    }
    if (mode == "circular") return im.Error(n, "circular padding is not supported; use constant, reflect or replicate");
    Attrs attrs;
    attrs.Ints("pads", pads).Str("mode", mode);
    if (mode == "constant" && static_cast<size_t>(value_at) < a.size() && !a[value_at].is_none()) {
      MAPD_ASSIGN_OR_RETURN(double value, im.DoubleArg(n, a, value_at));
      attrs.Float("value", value);
    }
    return One(im.Emit1(n, "pad", {x}, attrs));
  };
}

Result Roll(Importer& im, Node* n, const Args& a) {
  MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
  MAPD_ASSIGN_OR_RETURN(std::vector<int64_t> shifts, im.IntListArg(n, a, 1));
  MAPD_ASSIGN_OR_RETURN(std::vector<int64_t> dims, im.IntListArg(n, a, 2));
  return One(im.Emit1(n, "roll", {x}, Attrs().Ints("shifts", shifts).Ints("dims", dims)));
}

Result IndexSelect(Importer& im, Node* n, const Args& a) {
  MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
  MAPD_ASSIGN_OR_RETURN(int64_t dim, im.IntArg(n, a, 1));
  MAPD_ASSIGN_OR_RETURN(std::string index, im.TensorArg(n, a, 2));
  return One(im.Emit1(n, "index_select", {x, index}, Attrs().Int("dim", dim)));
}

// x[idx] with one integer index tensor at dimension d (Tensor?[] indices, the others None):
// index_select of the flattened index, reshaped to x.shape[:d] + idx.shape + x.shape[d+1:] —
// what relative position biases do (table[index]). Boolean masks give data-dependent shapes.
Result Index(Importer& im, Node* n, const Args& a) {
  MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
  if (a.size() < 2 || (a[1].kind != AValue::Kind::kList && a[1].kind != AValue::Kind::kTuple)) {
    return im.Error(n, "expected a list of indices");
  }
  int at = -1;
  for (size_t i = 0; i < a[1].items.size(); ++i) {
    if (a[1].items[i].is_none()) continue;
    if (at >= 0) return im.Error(n, "indexing with more than one index tensor is not supported");
    at = static_cast<int>(i);
  }
  if (at < 0) return std::vector<AValue>{a[0]};
  MAPD_ASSIGN_OR_RETURN(std::string index, im.TensorArg(n, a[1].items, at));
  const TensorType& t = *im.builder().TypeOf(x);
  const TensorType idx = *im.builder().TypeOf(index);
  if (idx.dtype == v1::BOOL || idx.dtype == v1::UINT8) {
    return im.Error(n, "indexing with a boolean mask gives a shape that depends on tensor data; use masked_fill or where");
  }
  if (at >= t.rank()) return im.Error(n, absl::StrCat("index at dimension ", at, " of a ", t.ToString(), " tensor"));
  std::string flat = index;
  if (idx.rank() != 1) {
    MAPD_ASSIGN_OR_RETURN(AValue f, im.Emit1(n, "reshape", {index}, Attrs().Ints("shape", {idx.NumElements()})));
    flat = f.tensor;
  }
  MAPD_ASSIGN_OR_RETURN(AValue picked, im.Emit1(n, "index_select", {x, flat}, Attrs().Int("dim", at)));
  if (idx.rank() == 1) return std::vector<AValue>{picked};
  Shape shape(t.shape.begin(), t.shape.begin() + at);
  shape.insert(shape.end(), idx.shape.begin(), idx.shape.end());
  shape.insert(shape.end(), t.shape.begin() + at + 1, t.shape.end());
  return One(im.Emit1(n, "reshape", {picked.tensor}, Attrs().Ints("shape", shape)));
}

// split(self, split_size | sizes, dim) / split_with_sizes / chunk: a list of tensors.
Handler Split(bool chunk) {
  return [chunk](Importer& im, Node* n, const Args& a) -> Result {
    MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
    MAPD_ASSIGN_OR_RETURN(int64_t dim, im.IntArg(n, a, 2));
    Attrs attrs;
    attrs.Int("dim", dim);
    std::string op = "split";
    if (chunk) {
      MAPD_ASSIGN_OR_RETURN(int64_t chunks, im.IntArg(n, a, 1));
      attrs.Int("chunks", chunks);
      op = "chunk";
    } else if (a[1].is_number()) {
      MAPD_ASSIGN_OR_RETURN(int64_t size, im.IntArg(n, a, 1));
      attrs.Int("split_size", size);
    } else {
      MAPD_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, im.IntListArg(n, a, 1));
      attrs.Ints("sizes", sizes);
    }
    MAPD_ASSIGN_OR_RETURN(std::vector<AValue> parts, im.Emit(n, op, {x}, attrs));
    return std::vector<AValue>{ListOf(std::move(parts))};
  };
}

Handler Join(const std::string& op) {
  return [op](Importer& im, Node* n, const Args& a) -> Result {
    MAPD_ASSIGN_OR_RETURN(std::vector<std::string> xs, im.TensorListArg(n, a, 0));
    if (xs.empty()) return im.Error(n, "needs at least one tensor");
    MAPD_ASSIGN_OR_RETURN(int64_t dim, im.IntArg(n, a, 1));
    return One(im.Emit1(n, op, xs, Attrs().Int("dim", dim)));
  };
}

Result Contiguous(Importer& im, Node* n, const Args& a) {
  MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
  return One(im.Emit1(n, "contiguous", {x}, Attrs()));
}

}  // namespace

void AddShapeHandlers(std::map<std::string, Handler>& m) {
  m["aten::view"] = WithIntList("view", "shape");
  m["aten::reshape"] = WithIntList("reshape", "shape");
  m["aten::view_as"] = ShapeAs("view");
  m["aten::reshape_as"] = ShapeAs("reshape");
  m["aten::expand_as"] = ShapeAs("expand");
  m["aten::flatten"] = Flatten;
  m["aten::transpose"] = Transpose;
  m["aten::permute"] = WithIntList("permute", "dims");
  m["aten::contiguous"] = Contiguous;
  m["aten::clone"] = Contiguous;
  m["aten::unsqueeze"] = WithInt("unsqueeze", "dim");
  m["aten::squeeze"] = Squeeze;
  m["aten::expand"] = WithIntList("expand", "shape");
  m["aten::repeat_interleave"] = RepeatInterleave;
  m["aten::slice"] = Slice;
  m["aten::select"] = Select;
  m["aten::split"] = Split(false);
  m["aten::split_with_sizes"] = Split(false);
  m["aten::unsafe_split"] = Split(false);
  m["aten::chunk"] = Split(true);
  m["aten::unsafe_chunk"] = Split(true);
  m["aten::cat"] = Join("cat");
  m["aten::concat"] = Join("cat");
  m["aten::stack"] = Join("stack");
  m["aten::pad"] = Pad("");
  m["aten::constant_pad_nd"] = Pad("constant");
  m["aten::reflection_pad1d"] = m["aten::reflection_pad2d"] = m["aten::reflection_pad3d"] = Pad("reflect");
  m["aten::replication_pad1d"] = m["aten::replication_pad2d"] = m["aten::replication_pad3d"] = Pad("replicate");
  m["aten::roll"] = Roll;
  m["aten::index_select"] = IndexSelect;
  m["aten::index"] = Index;
}

}  // namespace import_internal
}  // namespace mapd

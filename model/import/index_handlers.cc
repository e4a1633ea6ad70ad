// Selections, scans and scatters as aten writes them: max/min (over everything, over a dim
// with indices, or of two tensors), argmax/argmin, topk, sort, cumsum, flip, gather, scatter
// (tensor or number; reduce="add"), scatter_add, index_add, one_hot and unbind — what
// mixture-of-experts routing and message passing are made of.
#include "common/status_macros.h"
#include "model/import/importer_internal.h"

namespace mapd {
namespace import_internal {
namespace {

// max / min: (self) over everything -> amax/amin; (self, other) -> maximum/minimum;
// (self, dim, keepdim) -> values and indices.
Handler MaxMin(bool is_max) {
  return [is_max](Importer& im, Node* n, const Args& a) -> Result {
    MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
    if (a.size() == 1) return One(im.Emit1(n, is_max ? "amax" : "amin", {x}, Attrs()));
    if (!a[1].is_number()) {
      MAPD_ASSIGN_OR_RETURN(std::string other, im.TensorArg(n, a, 1));
      return One(im.Emit1(n, is_max ? "maximum" : "minimum", {x, other}, Attrs()));
    }
    MAPD_ASSIGN_OR_RETURN(int64_t dim, im.IntArg(n, a, 1));
    MAPD_ASSIGN_OR_RETURN(bool keep, im.BoolArg(n, a, 2));
    return im.Emit(n, is_max ? "max" : "min", {x}, Attrs().Int("dim", dim).Bool("keepdim", keep));
  };
}

// argmax / argmin(self, dim?, keepdim).
Handler Arg(const std::string& op) {
  return [op](Importer& im, Node* n, const Args& a) -> Result {
    MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
    MAPD_ASSIGN_OR_RETURN(std::optional<int64_t> dim, im.OptionalIntArg(n, a, 1));
    MAPD_ASSIGN_OR_RETURN(bool keep, im.BoolArg(n, a, 2));
    Attrs attrs;
    attrs.Bool("keepdim", keep);
    if (dim) attrs.Int("dim", *dim);
    return One(im.Emit1(n, op, {x}, attrs));
  };
}

// topk(self, k, dim, largest, sorted).
Result Topk(Importer& im, Node* n, const Args& a) {
  MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
  MAPD_ASSIGN_OR_RETURN(int64_t k, im.IntArg(n, a, 1));
  MAPD_ASSIGN_OR_RETURN(int64_t dim, im.IntArg(n, a, 2));
  MAPD_ASSIGN_OR_RETURN(bool largest, im.BoolArg(n, a, 3));
  MAPD_ASSIGN_OR_RETURN(bool sorted, im.BoolArg(n, a, 4));
  return im.Emit(n, "topk", {x}, Attrs().Int("k", k).Int("dim", dim).Bool("largest", largest).Bool("sorted", sorted));
}

// sort(self, dim, descending) and sort.stable(self, stable?, dim, descending).
Result Sort(Importer& im, Node* n, const Args& a) {
  MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
  const int dim_at = a.size() >= 4 ? 2 : 1;
  bool stable = false;
  if (dim_at == 2 && !a[1].is_none()) {
    MAPD_ASSIGN_OR_RETURN(stable, im.BoolArg(n, a, 1));
  }
  MAPD_ASSIGN_OR_RETURN(int64_t dim, im.IntArg(n, a, dim_at));
  MAPD_ASSIGN_OR_RETURN(bool descending, im.BoolArg(n, a, dim_at + 1));
  return im.Emit(n, "sort", {x}, Attrs().Int("dim", dim).Bool("descending", descending).Bool("stable", stable));
}

// cumsum(self, dim, dtype?).
Result Cumsum(Importer& im, Node* n, const Args& a) {
  MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
  MAPD_ASSIGN_OR_RETURN(int64_t dim, im.IntArg(n, a, 1));
  MAPD_ASSIGN_OR_RETURN(std::optional<DType> dtype, im.DTypeArg(n, a, 2));
  Attrs attrs;
  attrs.Int("dim", dim);
  if (dtype) attrs.Str("dtype", DTypeShortName(*dtype));
  return One(im.Emit1(n, "cumsum", {x}, attrs));
}

Result Flip(Importer& im, Node* n, const Args& a) {
  MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
  MAPD_ASSIGN_OR_RETURN(std::vector<int64_t> dims, im.IntListArg(n, a, 1));
  return One(im.Emit1(n, "flip", {x}, Attrs().Ints("dims", dims)));
}

// gather(self, dim, index, sparse_grad).
Result Gather(Importer& im, Node* n, const Args& a) {
  MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
  MAPD_ASSIGN_OR_RETURN(int64_t dim, im.IntArg(n, a, 1));
  MAPD_ASSIGN_OR_RETURN(std::string index, im.TensorArg(n, a, 2));
  if (a.size() > 3 && !a[3].is_none()) {
    MAPD_ASSIGN_OR_RETURN(bool sparse, im.BoolArg(n, a, 3));
    if (sparse) return im.Error(n, "sparse_grad=True is not supported (gradients are dense)");
  }
  return One(im.Emit1(n, "gather", {x, index}, Attrs().Int("dim", dim)));
}

// scatter(self, dim, index, src | value[, reduce]) and scatter_add(self, dim, index, src);
// reduce="add" is scatter_add (other reductions are refused by name).
Handler Scatter(bool add) {
  return [add](Importer& im, Node* n, const Args& a) -> Result {
    MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
    MAPD_ASSIGN_OR_RETURN(int64_t dim, im.IntArg(n, a, 1));
    MAPD_ASSIGN_OR_RETURN(std::string index, im.TensorArg(n, a, 2));
    bool adds = add;
    if (!add && a.size() > 4 && !a[4].is_none()) {
      MAPD_ASSIGN_OR_RETURN(std::string reduce, im.StringArg(n, a, 4));
      if (reduce != "add") return im.Error(n, "scatter with reduce='" + reduce + "' is not supported (only 'add')");
      adds = true;
    }
    Attrs attrs;
    attrs.Int("dim", dim);
    std::string src;
    if (a[3].is_number()) {
      if (adds) return im.Error(n, "scatter_add of a number is not supported (pass a tensor)");
      v1::AttrValue value;
      MAPD_RETURN_IF_ERROR(im.TensorOrScalarArg(n, a, 3, &src, &value));
      attrs.Set("value", value);
    } else {
      MAPD_ASSIGN_OR_RETURN(src, im.TensorArg(n, a, 3));
    }
    return One(im.Emit1(n, adds ? "scatter_add" : "scatter", {x, index, src}, attrs));
  };
}

// index_add(self, dim, index, source, alpha).
Result IndexAdd(Importer& im, Node* n, const Args& a) {
  MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
  MAPD_ASSIGN_OR_RETURN(int64_t dim, im.IntArg(n, a, 1));
  MAPD_ASSIGN_OR_RETURN(std::string index, im.TensorArg(n, a, 2));
  MAPD_ASSIGN_OR_RETURN(std::string source, im.TensorArg(n, a, 3));
  Attrs attrs;
  attrs.Int("dim", dim);
  if (a.size() > 4) {
    MAPD_ASSIGN_OR_RETURN(double alpha, im.DoubleArg(n, a, 4));
    if (alpha != 1) attrs.Float("alpha", alpha);
  }
  return One(im.Emit1(n, "index_add", {x, index, source}, attrs));
}

// one_hot(self, num_classes): the class count must be known (-1 reads it from the data).
Result OneHot(Importer& im, Node* n, const Args& a) {
  MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
  MAPD_ASSIGN_OR_RETURN(int64_t classes, im.IntArg(n, a, 1));
  if (classes <= 0) {
    return im.Error(n, "one_hot needs num_classes (the default -1 counts the classes in the data, which a plan "
                       "cannot depend on)");
  }
  return One(im.Emit1(n, "one_hot", {x}, Attrs().Int("num_classes", classes)));
}

// unbind(self, dim): one chunk per index, each squeezed — as LibTorch's unbind, whose one
// backward stacks the pieces' gradients (a select per piece would make a gradient of the whole
// tensor for each).
Result Unbind(Importer& im, Node* n, const Args& a) {
  MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
  MAPD_ASSIGN_OR_RETURN(int64_t dim, im.IntArg(n, a, 1));
  const TensorType& t = im.TypeOf(a[0]);
  if (t.rank() == 0) return im.Error(n, "unbind of a 0-d tensor");
  const int64_t d = dim < 0 ? dim + t.rank() : dim;
  if (d < 0 || d >= t.rank()) return im.Error(n, absl::StrCat("dim ", dim, " is out of range for ", t.ToString()));
  MAPD_ASSIGN_OR_RETURN(std::vector<AValue> pieces, im.Emit(n, "chunk", {x}, Attrs().Int("chunks", t.shape[d]).Int("dim", d)));
  std::vector<AValue> items;
  for (const AValue& p : pieces) {
    MAPD_ASSIGN_OR_RETURN(AValue s, im.Emit1(n, "squeeze", {p.tensor}, Attrs().Ints("dims", {d})));
    items.push_back(s);
  }
  return std::vector<AValue>{ListOf(std::move(items))};
}

}  // namespace

void AddIndexHandlers(std::map<std::string, Handler>& m) {
  m["aten::max"] = MaxMin(true);
  m["aten::min"] = MaxMin(false);
  m["aten::argmax"] = Arg("argmax");
  m["aten::argmin"] = Arg("argmin");
  m["aten::topk"] = Topk;
  m["aten::sort"] = Sort;
  m["aten::cumsum"] = m["aten::cumsum_"] = Cumsum;
  m["aten::flip"] = Flip;
  m["aten::gather"] = Gather;
  m["aten::scatter"] = m["aten::scatter_"] = Scatter(false);
  m["aten::scatter_add"] = m["aten::scatter_add_"] = Scatter(true);
  m["aten::index_add"] = m["aten::index_add_"] = IndexAdd;
  m["aten::one_hot"] = OneHot;
  m["aten::unbind"] = Unbind;
}

}  // namespace import_internal
}  // namespace mapd

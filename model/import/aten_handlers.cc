// One handler per aten op: reads the folded arguments and emits registry ops. This file holds
// linear algebra (linear, matmul, addmm, embedding, einsum, attention), normalisation, softmax,
// losses, reductions and vector norms, and the table of every handler (AtenHandlers), which the
// family files fill in too: elementwise_handlers.cc (activations, arithmetic, comparisons,
// creation and conversion), shape_handlers.cc (views, slicing, joins, padding, indexing),
// rnn_handlers.cc, spatial_handlers.cc and index_handlers.cc.
// Also the Importer's argument readers, which handlers use to name faulty arguments.
#include <limits>

#include "common/status_macros.h"
#include "model/import/einsum.h"
#include "model/import/importer_internal.h"

namespace mapd {
namespace import_internal {

// ---------------------------------------------------------------- argument readers

namespace {
std::string Describe(const AValue& a) {
  switch (a.kind) {
    case AValue::Kind::kNone: return "None";
    case AValue::Kind::kTensor: return "a tensor";
    case AValue::Kind::kConst: return a.constant.tagKind();
    case AValue::Kind::kList: return "a list";
    case AValue::Kind::kTuple: return "a tuple";
    case AValue::Kind::kModule: return "a module";
    case AValue::Kind::kConstTensor: return "a constant tensor";
  }
  return "?";
}
}  // namespace

#define MAPD_ARG_CHECK(i)                                                              \
  if (static_cast<size_t>(i) >= args.size()) {                                         \
    return Error(n, absl::StrCat("expected at least ", (i) + 1, " arguments"));        \
  }

absl::StatusOr<std::string> Importer::TensorArg(Node* n, const Args& args, int i) {
  MAPD_ARG_CHECK(i);
  if (args[i].is_tensor()) return args[i].tensor;
  if (args[i].kind == AValue::Kind::kConst && args[i].scalar_tensor) return ScalarTensor(n, args[i]);
  if (args[i].kind == AValue::Kind::kConstTensor) {
    MAPD_ASSIGN_OR_RETURN(AValue m, Materialise(n, args[i]));
    return m.tensor;
  }
  return Error(n, absl::StrCat("argument ", i, " should be a tensor, got ", Describe(args[i])));
}

absl::StatusOr<TensorType> Importer::TensorTypeArg(Node* n, const Args& args, int i) {
  MAPD_ARG_CHECK(i);
  if (args[i].kind == AValue::Kind::kConstTensor) {
    const at::Tensor& t = args[i].constant.toTensor();
    auto dtype = CheckedDType(t.scalar_type());
    if (!dtype.ok()) return Error(n, std::string(dtype.status().message()));
    return TensorType{*dtype, Shape(t.sizes().begin(), t.sizes().end())};
  }
  MAPD_ASSIGN_OR_RETURN(std::string name, TensorArg(n, args, i));
  return *builder_.TypeOf(name);
}

absl::StatusOr<std::string> Importer::OptionalTensorArg(Node* n, const Args& args, int i) {
  if (static_cast<size_t>(i) >= args.size() || args[i].is_none()) return std::string();
  return TensorArg(n, args, i);
}

absl::StatusOr<int64_t> Importer::IntArg(Node* n, const Args& args, int i) {
  MAPD_ARG_CHECK(i);
  const AValue& a = args[i];
  if (a.kind == AValue::Kind::kConst) {
    if (a.constant.isInt()) return a.constant.toInt();
    if (a.constant.isBool()) return a.constant.toBool() ? 1 : 0;
  }
  return Error(n, absl::StrCat("argument ", i, " should be a known integer, got ", Describe(a)));
}

absl::StatusOr<std::optional<int64_t>> Importer::OptionalIntArg(Node* n, const Args& args, int i) {
  if (static_cast<size_t>(i) >= args.size() || args[i].is_none()) return std::optional<int64_t>();
  MAPD_ASSIGN_OR_RETURN(int64_t v, IntArg(n, args, i));
  return std::optional<int64_t>(v);
}

absl::StatusOr<double> Importer::DoubleArg(Node* n, const Args& args, int i) {
  MAPD_ARG_CHECK(i);
  const AValue& a = args[i];
  if (a.kind == AValue::Kind::kConst) {
    if (a.constant.isDouble()) return a.constant.toDouble();
    if (a.constant.isInt()) return static_cast<double>(a.constant.toInt());
    if (a.constant.isBool()) return a.constant.toBool() ? 1.0 : 0.0;
  }
  return Error(n, absl::StrCat("argument ", i, " should be a known number, got ", Describe(a)));
}

absl::StatusOr<bool> Importer::BoolArg(Node* n, const Args& args, int i) {
  MAPD_ARG_CHECK(i);
  const AValue& a = args[i];
  if (a.kind == AValue::Kind::kConst) {
    if (a.constant.isBool()) return a.constant.toBool();
    if (a.constant.isInt()) return a.constant.toInt() != 0;
  }
  return Error(n, absl::StrCat("argument ", i, " should be a known bool, got ", Describe(a)));
}

absl::StatusOr<std::string> Importer::StringArg(Node* n, const Args& args, int i) {
  MAPD_ARG_CHECK(i);
  if (args[i].kind == AValue::Kind::kConst && args[i].constant.isString()) return args[i].constant.toStringRef();
  return Error(n, absl::StrCat("argument ", i, " should be a string, got ", Describe(args[i])));
}

absl::StatusOr<std::vector<int64_t>> Importer::IntListArg(Node* n, const Args& args, int i) {
  MAPD_ARG_CHECK(i);
  const AValue& a = args[i];
  std::vector<int64_t> out;
  if (a.kind == AValue::Kind::kConst && a.constant.isIntList()) {
    for (int64_t v : a.constant.toIntVector()) out.push_back(v);
    return out;
  }
  if (a.kind == AValue::Kind::kConst && a.constant.isInt()) return std::vector<int64_t>{a.constant.toInt()};
  if (a.kind == AValue::Kind::kList || a.kind == AValue::Kind::kTuple) {
    for (size_t k = 0; k < a.items.size(); ++k) {
      const AValue& it = a.items[k];
      if (it.kind == AValue::Kind::kConst && (it.constant.isInt() || it.constant.isBool())) {
        out.push_back(it.constant.isInt() ? it.constant.toInt() : it.constant.toBool());
      } else {
        return Error(n, absl::StrCat("argument ", i, " item ", k, " should be a known integer, got ", Describe(it),
                                     " (sizes must not depend on tensor data)"));
      }
    }
    return out;
  }
  return Error(n, absl::StrCat("argument ", i, " should be a list of integers, got ", Describe(a)));
}

absl::StatusOr<std::vector<std::string>> Importer::TensorListArg(Node* n, const Args& args, int i) {
  MAPD_ARG_CHECK(i);
  if (args[i].kind != AValue::Kind::kList && args[i].kind != AValue::Kind::kTuple) {
    return Error(n, absl::StrCat("argument ", i, " should be a list of tensors, got ", Describe(args[i])));
  }
  std::vector<std::string> out;
  for (size_t k = 0; k < args[i].items.size(); ++k) {
    MAPD_ASSIGN_OR_RETURN(std::string t, TensorArg(n, args[i].items, static_cast<int>(k)));
    out.push_back(t);
  }
  return out;
}

absl::StatusOr<std::optional<DType>> Importer::DTypeArg(Node* n, const Args& args, int i) {
  if (static_cast<size_t>(i) >= args.size() || args[i].is_none()) return std::optional<DType>();
  MAPD_ASSIGN_OR_RETURN(int64_t st, IntArg(n, args, i));
  auto d = CheckedDType(static_cast<c10::ScalarType>(st));
  if (!d.ok()) return Error(n, std::string(d.status().message()));
  return std::optional<DType>(*d);
}

absl::Status Importer::TensorOrScalarArg(Node* n, const Args& args, int i, std::string* tensor,
                                         v1::AttrValue* scalar) {
  MAPD_ARG_CHECK(i);
  const AValue& a = args[i];
  if (a.is_tensor()) {
    *tensor = a.tensor;
    return absl::OkStatus();
  }
  if (a.is_number()) {
    if (a.constant.isDouble()) scalar->set_f(a.constant.toDouble());
    else if (a.constant.isBool()) scalar->set_i(a.constant.toBool() ? 1 : 0);
    else scalar->set_i(a.constant.toInt());
    return absl::OkStatus();
  }
  return Error(n, absl::StrCat("argument ", i, " should be a tensor or a number, got ", Describe(a)));
}

absl::StatusOr<std::string> Importer::ScalarTensor(Node* n, const AValue& v) {
  if (!v.is_number()) return Error(n, absl::StrCat("expected a number, got ", Describe(v)));
  Attrs attrs;
  attrs.Ints("shape", {});
  if (v.constant.isDouble()) attrs.Float("value", v.constant.toDouble()).Str("dtype", "f32");
  else if (v.constant.isBool()) attrs.Bool("value", v.constant.toBool()).Str("dtype", "bool");
  else attrs.Int("value", v.constant.toInt()).Str("dtype", "i64");
  MAPD_ASSIGN_OR_RETURN(AValue t, Emit1(n, "full", {}, attrs));
  return t.tensor;
}

#undef MAPD_ARG_CHECK

// ---------------------------------------------------------------- handlers

Result One(absl::StatusOr<AValue> v) {
  if (!v.ok()) return v.status();
  return std::vector<AValue>{*v};
}

absl::StatusOr<std::string> EmitTensor(Importer& im, Node* n, const std::string& op,
                                       const std::vector<std::string>& inputs, const Attrs& attrs) {
  MAPD_ASSIGN_OR_RETURN(AValue v, im.Emit1(n, op, inputs, attrs));
  return v.tensor;
}

AValue ListOf(std::vector<AValue> items) {
  AValue v;
  v.kind = AValue::Kind::kList;
  v.items = std::move(items);
  return v;
}

// Handler builders that the family files use too (importer_internal.h).

Handler SameArgs(const std::string& op, int num_tensor_args) {
  return [op, num_tensor_args](Importer& im, Node* n, const Args& a) -> Result {
    std::vector<std::string> ins;
    for (int i = 0; i < num_tensor_args; ++i) {
      MAPD_ASSIGN_OR_RETURN(std::string t, im.TensorArg(n, a, i));
      ins.push_back(t);
    }
    return One(im.Emit1(n, op, ins, Attrs()));
  };
}

// op(self, <int>) → op {attr=k} (unsqueeze, triu, tril).
Handler WithInt(const std::string& op, const std::string& attr) {
  return [op, attr](Importer& im, Node* n, const Args& a) -> Result {
    MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
    MAPD_ASSIGN_OR_RETURN(int64_t v, im.IntArg(n, a, 1));
    return One(im.Emit1(n, op, {x}, Attrs().Int(attr, v)));
  };
}

namespace {

Result Linear(Importer& im, Node* n, const Args& a) {
  MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
  MAPD_ASSIGN_OR_RETURN(std::string w, im.TensorArg(n, a, 1));
  MAPD_ASSIGN_OR_RETURN(std::string b, im.OptionalTensorArg(n, a, 2));
  return One(im.Emit1(n, "linear", {x, w, b}, Attrs()));
}

Handler AddMm(const std::string& op) {
  return [op](Importer& im, Node* n, const Args& a) -> Result {
    MAPD_ASSIGN_OR_RETURN(std::string c, im.TensorArg(n, a, 0));
    MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 1));
    MAPD_ASSIGN_OR_RETURN(std::string y, im.TensorArg(n, a, 2));
    MAPD_ASSIGN_OR_RETURN(double beta, im.DoubleArg(n, a, 3));
    MAPD_ASSIGN_OR_RETURN(double alpha, im.DoubleArg(n, a, 4));
    return One(im.Emit1(n, op, {c, x, y}, Attrs().Float("beta", beta).Float("alpha", alpha)));
  };
}

Result T(Importer& im, Node* n, const Args& a) {
  MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
  if (im.TypeOf(a[0]).rank() < 2) return std::vector<AValue>{a[0]};
  return One(im.Emit1(n, "transpose", {x}, Attrs().Int("dim0", 0).Int("dim1", 1)));
}

Result Embedding(Importer& im, Node* n, const Args& a) {
  MAPD_ASSIGN_OR_RETURN(std::string w, im.TensorArg(n, a, 0));
  MAPD_ASSIGN_OR_RETURN(std::string idx, im.TensorArg(n, a, 1));
  MAPD_ASSIGN_OR_RETURN(int64_t pad, im.IntArg(n, a, 2));
  return One(im.Emit1(n, "embedding", {idx, w}, Attrs().Int("padding_idx", pad)));
}

Result LayerNorm(Importer& im, Node* n, const Args& a) {
  MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
  MAPD_ASSIGN_OR_RETURN(std::vector<int64_t> shape, im.IntListArg(n, a, 1));
  MAPD_ASSIGN_OR_RETURN(std::string w, im.OptionalTensorArg(n, a, 2));
  MAPD_ASSIGN_OR_RETURN(std::string b, im.OptionalTensorArg(n, a, 3));
  MAPD_ASSIGN_OR_RETURN(double eps, im.DoubleArg(n, a, 4));
  return One(im.Emit1(n, "layer_norm", {x, w, b}, Attrs().Ints("normalized_shape", shape).Float("eps", eps)));
}

// aten::rms_norm(input, normalized_shape, weight?, eps?) (PyTorch >= 2.4). With eps=None PyTorch
// adds the machine epsilon of the input's dtype, torch.finfo(dtype).eps (PyTorch 2.4-2.6:
// numeric_limits<scalar_t>::epsilon(); from 2.7 ATen computes f16/bf16 in f32 and uses f32's
// epsilon for them). The registry's own default (1e-5) must not apply, so eps is always set.
double MachineEpsilon(DType dtype) {
  switch (dtype) {
    case v1::FLOAT64: return std::numeric_limits<double>::epsilon();  // 2.220446049250313e-16
    case v1::FLOAT16: return 0.0009765625;                            // 2^-10
    case v1::BFLOAT16: return 0.0078125;                              // 2^-7
    default: return std::numeric_limits<float>::epsilon();            // 1.1920929e-07
  }
}

Result RmsNorm(Importer& im, Node* n, const Args& a) {
  MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
  MAPD_ASSIGN_OR_RETURN(std::vector<int64_t> shape, im.IntListArg(n, a, 1));
  MAPD_ASSIGN_OR_RETURN(std::string w, im.OptionalTensorArg(n, a, 2));
  double eps = MachineEpsilon(im.TypeOf(a[0]).dtype);
  if (a.size() > 3 && !a[3].is_none()) {
    MAPD_ASSIGN_OR_RETURN(eps, im.DoubleArg(n, a, 3));
  }
  return One(im.Emit1(n, "rms_norm", {x, w}, Attrs().Ints("normalized_shape", shape).Float("eps", eps)));
}

// batch_norm in training mode (batch_norm_stats, batch_norm_apply, batch_norm_running_stats)
// yields the new running statistics, which replace the buffers.
Result BatchNorm(Importer& im, Node* n, const Args& a) {
  MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
  MAPD_ASSIGN_OR_RETURN(std::string w, im.OptionalTensorArg(n, a, 1));
  MAPD_ASSIGN_OR_RETURN(std::string b, im.OptionalTensorArg(n, a, 2));
  MAPD_ASSIGN_OR_RETURN(std::string rm, im.OptionalTensorArg(n, a, 3));
  MAPD_ASSIGN_OR_RETURN(std::string rv, im.OptionalTensorArg(n, a, 4));
  MAPD_ASSIGN_OR_RETURN(bool training, im.BoolArg(n, a, 5));
  MAPD_ASSIGN_OR_RETURN(double momentum, im.DoubleArg(n, a, 6));
  MAPD_ASSIGN_OR_RETURN(double eps, im.DoubleArg(n, a, 7));
  std::vector<AValue> outs;
  if (training) {
    // Synchronised: per-channel sums, then the normalisation (ops_norm.cc), so a split batch
    // all-reduces the sums rather than gathering the activations.
    const TensorType* type = im.builder().TypeOf(x);
    if (type == nullptr || type->shape.size() < 2) return im.Error(n, "batch_norm needs an input [N, C, ...]");
    MAPD_ASSIGN_OR_RETURN(AValue stats, im.Emit1(n, "batch_norm_stats", {x}, Attrs()));
    const int64_t count = type->NumElements() / std::max<int64_t>(type->shape[1], 1);
    MAPD_ASSIGN_OR_RETURN(outs, im.Emit(n, "batch_norm_apply", {x, stats.tensor, w, b},
                                        Attrs().Int("count", count).Float("eps", eps)));
    if (!rm.empty() && !rv.empty()) {
      MAPD_ASSIGN_OR_RETURN(std::vector<AValue> running,
                            im.Emit(n, "batch_norm_running_stats", {stats.tensor, rm, rv},
                                    Attrs().Int("count", count).Float("momentum", momentum)));
      outs.insert(outs.end(), running.begin(), running.end());
    }
  } else {
    MAPD_ASSIGN_OR_RETURN(outs, im.Emit(n, "batch_norm", {x, w, b, rm, rv},
                                        Attrs().Bool("training", false).Float("momentum", momentum).Float("eps", eps)));
  }
  if (outs.size() == 3) {
    im.builder().BufferUpdate(rm, outs[1].tensor);
    im.builder().BufferUpdate(rv, outs[2].tensor);
  }
  return std::vector<AValue>{outs[0]};
}

Handler Softmax(const std::string& op) {
  return [op](Importer& im, Node* n, const Args& a) -> Result {
    MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
    MAPD_ASSIGN_OR_RETURN(int64_t dim, im.IntArg(n, a, 1));
    Attrs attrs;
    attrs.Int("dim", dim);
    MAPD_ASSIGN_OR_RETURN(std::optional<DType> dtype, im.DTypeArg(n, a, 2));
    if (dtype) attrs.Str("dtype", DTypeShortName(*dtype));
    return One(im.Emit1(n, op, {x}, attrs));
  };
}

const char* ReductionName(int64_t r) { return r == 0 ? "none" : (r == 2 ? "sum" : "mean"); }

Result CrossEntropy(Importer& im, Node* n, const Args& a) {
  MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
  MAPD_ASSIGN_OR_RETURN(std::string t, im.TensorArg(n, a, 1));
  MAPD_ASSIGN_OR_RETURN(std::string w, im.OptionalTensorArg(n, a, 2));
  MAPD_ASSIGN_OR_RETURN(int64_t red, im.IntArg(n, a, 3));
  MAPD_ASSIGN_OR_RETURN(int64_t ignore, im.IntArg(n, a, 4));
  MAPD_ASSIGN_OR_RETURN(double ls, im.DoubleArg(n, a, 5));
  return One(im.Emit1(n, "cross_entropy", {x, t, w},
                      Attrs().Str("reduction", ReductionName(red)).Int("ignore_index", ignore).Float("label_smoothing", ls)));
}

Result NllLoss(Importer& im, Node* n, const Args& a) {
  MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
  MAPD_ASSIGN_OR_RETURN(std::string t, im.TensorArg(n, a, 1));
  MAPD_ASSIGN_OR_RETURN(std::string w, im.OptionalTensorArg(n, a, 2));
  MAPD_ASSIGN_OR_RETURN(int64_t red, im.IntArg(n, a, 3));
  MAPD_ASSIGN_OR_RETURN(int64_t ignore, im.IntArg(n, a, 4));
  return One(im.Emit1(n, "nll_loss", {x, t, w}, Attrs().Str("reduction", ReductionName(red)).Int("ignore_index", ignore)));
}

Result MseLoss(Importer& im, Node* n, const Args& a) {
  MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
  MAPD_ASSIGN_OR_RETURN(std::string t, im.TensorArg(n, a, 1));
  MAPD_ASSIGN_OR_RETURN(int64_t red, im.IntArg(n, a, 2));
  return One(im.Emit1(n, "mse_loss", {x, t}, Attrs().Str("reduction", ReductionName(red))));
}

// mean/sum(self, dim?, keepdim, dtype?) or (self, dtype?).
Handler Reduce(const std::string& op) {
  return [op](Importer& im, Node* n, const Args& a) -> Result {
    MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
    Attrs attrs;
    int dtype_at = 1;
    if (a.size() >= 3) {
      if (!a[1].is_none()) {
        MAPD_ASSIGN_OR_RETURN(std::vector<int64_t> dims, im.IntListArg(n, a, 1));
        if (dims.empty()) dims = {};  // [] means all dims
        attrs.Ints("dims", dims);
      }
      MAPD_ASSIGN_OR_RETURN(bool keep, im.BoolArg(n, a, 2));
      attrs.Bool("keepdim", keep);
      dtype_at = 3;
    }
    MAPD_ASSIGN_OR_RETURN(std::optional<DType> dtype, im.DTypeArg(n, a, dtype_at));
    if (dtype) attrs.Str("dtype", DTypeShortName(*dtype));
    return One(im.Emit1(n, op, {x}, attrs));
  };
}

Handler MinMax(const std::string& op) {
  return [op](Importer& im, Node* n, const Args& a) -> Result {
    MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
    MAPD_ASSIGN_OR_RETURN(std::vector<int64_t> dims, im.IntListArg(n, a, 1));
    MAPD_ASSIGN_OR_RETURN(bool keep, im.BoolArg(n, a, 2));
    return One(im.Emit1(n, op, {x}, Attrs().Ints("dims", dims).Bool("keepdim", keep)));
  };
}

// norm(self, p, dim, keepdim[, dtype]); linalg_vector_norm(self, ord, dim, keepdim, dtype);
// frobenius_norm(self, dim, keepdim).
Handler VectorNorm(int ord_at) {
  return [ord_at](Importer& im, Node* n, const Args& a) -> Result {
    MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
    Attrs attrs;
    const int dims_at = ord_at < 0 ? 1 : 2;
    if (ord_at >= 0 && static_cast<size_t>(ord_at) < a.size() && !a[ord_at].is_none()) {
      MAPD_ASSIGN_OR_RETURN(double ord, im.DoubleArg(n, a, ord_at));
      attrs.Float("ord", ord);
    }
    if (static_cast<size_t>(dims_at) < a.size() && !a[dims_at].is_none()) {
      MAPD_ASSIGN_OR_RETURN(std::vector<int64_t> dims, im.IntListArg(n, a, dims_at));
      attrs.Ints("dims", dims);
    }
    if (static_cast<size_t>(dims_at + 1) < a.size()) {
      MAPD_ASSIGN_OR_RETURN(bool keep, im.BoolArg(n, a, dims_at + 1));
      attrs.Bool("keepdim", keep);
    }
    if (static_cast<size_t>(dims_at + 2) < a.size() && !a[dims_at + 2].is_none()) {
      return im.Error(n, "a norm computed in another dtype is not supported; convert the input first");
    }
    return One(im.Emit1(n, "vector_norm", {x}, attrs));
  };
}

// ---- einsum: lowered to sum, permute, reshape and one bmm per pair of operands

// A graph tensor with one einsum label per dimension.
struct Labelled {
  std::string tensor;
  std::string labels;
};

// Sums out the labels of `t` that `keep` lacks.
absl::StatusOr<Labelled> SumOut(Importer& im, Node* n, Labelled t, const std::string& keep) {
  std::vector<int64_t> dims;
  std::string kept;
  for (size_t d = 0; d < t.labels.size(); ++d) {
    if (keep.find(t.labels[d]) == std::string::npos) dims.push_back(static_cast<int64_t>(d));
    else kept.push_back(t.labels[d]);
  }
  if (dims.empty()) return t;
  MAPD_ASSIGN_OR_RETURN(AValue s, im.Emit1(n, "sum", {t.tensor}, Attrs().Ints("dims", dims).Bool("keepdim", false)));
  return Labelled{s.tensor, kept};
}

absl::StatusOr<Labelled> Permuted(Importer& im, Node* n, Labelled t, const std::string& order) {
  if (t.labels == order) return t;
  std::vector<int64_t> dims;
  for (char c : order) dims.push_back(static_cast<int64_t>(t.labels.find(c)));
  MAPD_ASSIGN_OR_RETURN(AValue p, im.Emit1(n, "permute", {t.tensor}, Attrs().Ints("dims", dims)));
  return Labelled{p.tensor, order};
}

absl::StatusOr<std::string> Reshaped(Importer& im, Node* n, const std::string& t, const Shape& shape) {
  if (im.builder().TypeOf(t)->shape == shape) return t;
  MAPD_ASSIGN_OR_RETURN(AValue r, im.Emit1(n, "reshape", {t}, Attrs().Ints("shape", shape)));
  return r.tensor;
}

// a and b contracted into one tensor with the labels in `keep` (the output's and those later
// operands use): [batch, left, contracted] @ [batch, contracted, right].
absl::StatusOr<Labelled> Contract(Importer& im, Node* n, Labelled a, Labelled b, const std::string& keep) {
  MAPD_ASSIGN_OR_RETURN(a, SumOut(im, n, a, b.labels + keep));
  MAPD_ASSIGN_OR_RETURN(b, SumOut(im, n, b, a.labels + keep));
  std::map<char, int64_t> size;
  for (const Labelled* t : {&a, &b}) {
    const Shape& shape = im.builder().TypeOf(t->tensor)->shape;
    for (size_t d = 0; d < t->labels.size(); ++d) {
      auto [it, fresh] = size.emplace(t->labels[d], shape[d]);
      if (!fresh && it->second != shape[d]) {
        return im.Error(n, absl::StrCat("einsum label '", std::string(1, t->labels[d]), "' has sizes ", it->second, " and ",
                                        shape[d], " (broadcasting a size-1 dimension is not supported)"));
      }
    }
  }
  std::string batch, left, contracted, right;
  for (char c : a.labels) {
    const bool in_b = b.labels.find(c) != std::string::npos, kept = keep.find(c) != std::string::npos;
    (in_b ? (kept ? batch : contracted) : left).push_back(c);
  }
  for (char c : b.labels) {
    if (a.labels.find(c) == std::string::npos) right.push_back(c);
  }
  auto product = [&](const std::string& labels) {
    int64_t p = 1;
    for (char c : labels) p *= size[c];
    return p;
  };
  MAPD_ASSIGN_OR_RETURN(a, Permuted(im, n, a, batch + left + contracted));
  MAPD_ASSIGN_OR_RETURN(b, Permuted(im, n, b, batch + contracted + right));
  MAPD_ASSIGN_OR_RETURN(std::string a3, Reshaped(im, n, a.tensor, {product(batch), product(left), product(contracted)}));
  MAPD_ASSIGN_OR_RETURN(std::string b3, Reshaped(im, n, b.tensor, {product(batch), product(contracted), product(right)}));
  MAPD_ASSIGN_OR_RETURN(AValue c, im.Emit1(n, "bmm", {a3, b3}, {}));
  const std::string labels = batch + left + right;
  Shape shape;
  for (char l : labels) shape.push_back(size[l]);
  MAPD_ASSIGN_OR_RETURN(std::string out, Reshaped(im, n, c.tensor, shape));
  return Labelled{out, labels};
}

// einsum(equation, tensors, path=None): pairwise from the left (the path is an optimisation
// hint that does not change the result).
Result Einsum(Importer& im, Node* n, const Args& a) {
  MAPD_ASSIGN_OR_RETURN(std::string equation, im.StringArg(n, a, 0));
  MAPD_ASSIGN_OR_RETURN(std::vector<std::string> tensors, im.TensorListArg(n, a, 1));
  if (tensors.empty()) return im.Error(n, "einsum of no operands");
  std::vector<int> ranks;
  for (const std::string& t : tensors) ranks.push_back(im.builder().TypeOf(t)->rank());
  auto eq = ParseEinsum(equation, ranks);
  if (!eq.ok()) return im.Error(n, std::string(eq.status().message()));
  Labelled acc{tensors[0], eq->operands[0]};
  for (size_t i = 1; i < tensors.size(); ++i) {
    std::string keep = eq->output;
    for (size_t j = i + 1; j < tensors.size(); ++j) keep += eq->operands[j];
    MAPD_ASSIGN_OR_RETURN(acc, Contract(im, n, acc, Labelled{tensors[i], eq->operands[i]}, keep));
  }
  MAPD_ASSIGN_OR_RETURN(acc, SumOut(im, n, acc, eq->output));
  MAPD_ASSIGN_OR_RETURN(acc, Permuted(im, n, acc, eq->output));
  return std::vector<AValue>{AValue::Tensor(acc.tensor)};
}

// scaled_dot_product_attention(q, k, v, attn_mask?, dropout_p, is_causal, scale?) (PyTorch 2.x).
Result Sdpa(Importer& im, Node* n, const Args& a) {
  MAPD_ASSIGN_OR_RETURN(std::string q, im.TensorArg(n, a, 0));
  MAPD_ASSIGN_OR_RETURN(std::string k, im.TensorArg(n, a, 1));
  MAPD_ASSIGN_OR_RETURN(std::string v, im.TensorArg(n, a, 2));
  MAPD_ASSIGN_OR_RETURN(std::string mask, im.OptionalTensorArg(n, a, 3));
  MAPD_ASSIGN_OR_RETURN(double p, im.DoubleArg(n, a, 4));
  MAPD_ASSIGN_OR_RETURN(bool causal, im.BoolArg(n, a, 5));
  Attrs attrs;
  attrs.Float("dropout_p", p).Bool("is_causal", causal);
  if (a.size() > 6 && !a[6].is_none()) {
    MAPD_ASSIGN_OR_RETURN(double scale, im.DoubleArg(n, a, 6));
    attrs.Float("scale", scale);
  }
  return One(im.Emit1(n, "scaled_dot_product_attention", {q, k, v, mask}, attrs));
}

}  // namespace

const std::map<std::string, Handler>& AtenHandlers() {
  static const auto* table = [] {
    auto* t = new std::map<std::string, Handler>();
    auto& m = *t;
    m["aten::linear"] = Linear;
    m["aten::matmul"] = SameArgs("matmul", 2);
    m["aten::mm"] = SameArgs("matmul", 2);
    m["aten::bmm"] = SameArgs("bmm", 2);
    m["aten::addmm"] = AddMm("addmm");
    m["aten::baddbmm"] = AddMm("baddbmm");
    m["aten::t"] = T;
    m["aten::embedding"] = Embedding;
    m["aten::layer_norm"] = LayerNorm;
    m["aten::rms_norm"] = RmsNorm;
    m["aten::batch_norm"] = BatchNorm;
    m["aten::softmax"] = Softmax("softmax");
    m["aten::log_softmax"] = Softmax("log_softmax");
    m["aten::cross_entropy_loss"] = CrossEntropy;
    m["aten::nll_loss"] = NllLoss;
    m["aten::nll_loss_nd"] = NllLoss;
    m["aten::nll_loss2d"] = NllLoss;
    m["aten::mse_loss"] = MseLoss;
    AddElementwiseHandlers(m);
    m["aten::mean"] = Reduce("mean");
    m["aten::sum"] = Reduce("sum");
    m["aten::amax"] = MinMax("amax");
    m["aten::amin"] = MinMax("amin");
    m["aten::norm"] = VectorNorm(1);
    m["aten::linalg_vector_norm"] = VectorNorm(1);
    m["aten::frobenius_norm"] = VectorNorm(-1);
    AddShapeHandlers(m);
    m["aten::einsum"] = Einsum;
    AddRnnHandlers(m);
    AddSpatialHandlers(m);
    AddIndexHandlers(m);
    m["aten::scaled_dot_product_attention"] = Sdpa;
    return t;
  }();
  return *table;
}

}  // namespace import_internal
}  // namespace mapd

// One handler per aten op: reads the folded arguments and emits registry ops.
// Also the Importer's argument readers, which handlers use to name faulty arguments.
#include <limits>

#include "common/status_macros.h"
#include "planner/import/einsum.h"
#include "planner/import/importer_internal.h"

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

namespace {

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

Result Gelu(Importer& im, Node* n, const Args& a) {
  MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
  std::string approx = "none";
  if (a.size() > 1) {
    MAPD_ASSIGN_OR_RETURN(approx, im.StringArg(n, a, 1));
  }
  return One(im.Emit1(n, "gelu", {x}, Attrs().Str("approximate", approx)));
}

// leaky_relu(x, negative_slope).
Result LeakyRelu(Importer& im, Node* n, const Args& a) {
  MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
  double slope = 0.01;
  if (a.size() > 1) {
    MAPD_ASSIGN_OR_RETURN(slope, im.DoubleArg(n, a, 1));
  }
  return One(im.Emit1(n, "leaky_relu", {x}, Attrs().Float("negative_slope", slope)));
}

// elu(x, alpha, scale, input_scale); selu and celu(x, alpha) are elus with fixed constants, as
// LibTorch computes them.
Result Elu(Importer& im, Node* n, const Args& a) {
  MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
  const std::string kind = n->kind().toQualString();
  Attrs attrs;
  if (kind == "aten::selu" || kind == "aten::selu_") {
    attrs.Float("alpha", 1.6732632423543772848170429916717).Float("scale", 1.0507009873554804934193349852946);
  } else if (kind == "aten::celu" || kind == "aten::celu_") {
    MAPD_ASSIGN_OR_RETURN(double alpha, im.DoubleArg(n, a, 1));
    if (alpha == 0) return im.Error(n, "celu with alpha 0 is undefined");
    attrs.Float("alpha", alpha).Float("input_scale", 1.0 / alpha);
  } else {
    MAPD_ASSIGN_OR_RETURN(double alpha, im.DoubleArg(n, a, 1));
    MAPD_ASSIGN_OR_RETURN(double scale, im.DoubleArg(n, a, 2));
    MAPD_ASSIGN_OR_RETURN(double input_scale, im.DoubleArg(n, a, 3));
    attrs.Float("alpha", alpha).Float("scale", scale).Float("input_scale", input_scale);
  }
  return One(im.Emit1(n, "elu", {x}, attrs));
}

// softplus(x, beta, threshold).
Result Softplus(Importer& im, Node* n, const Args& a) {
  MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
  MAPD_ASSIGN_OR_RETURN(double beta, im.DoubleArg(n, a, 1));
  MAPD_ASSIGN_OR_RETURN(double threshold, im.DoubleArg(n, a, 2));
  return One(im.Emit1(n, "softplus", {x}, Attrs().Float("beta", beta).Float("threshold", threshold)));
}

// logical_and/or/xor/not of any tensors; bitwise_and/or/xor/not (and Python's &, |, ^, ~ on
// tensors) are the same op for bool masks (`masks_only`); on integers they are bit operations,
// which are refused by name.
Handler Logical(const std::string& registry_op, int num_tensors, bool masks_only) {
  return [registry_op, num_tensors, masks_only](Importer& im, Node* n, const Args& a) -> Result {
    std::vector<std::string> ins;
    for (int i = 0; i < num_tensors; ++i) {
      MAPD_ASSIGN_OR_RETURN(std::string t, im.TensorArg(n, a, i));
      if (masks_only && im.builder().TypeOf(t)->dtype != v1::BOOL) {
        return im.Error(n, "bit operations on integer tensors are not supported (bool masks are)");
      }
      ins.push_back(t);
    }
    return One(im.Emit1(n, registry_op, ins, Attrs()));
  };
}

// hardtanh(x, min_val, max_val); nn.ReLU6 traces as hardtanh_(x, 0, 6).
Result Hardtanh(Importer& im, Node* n, const Args& a) {
  MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
  MAPD_ASSIGN_OR_RETURN(double lo, im.DoubleArg(n, a, 1));
  MAPD_ASSIGN_OR_RETURN(double hi, im.DoubleArg(n, a, 2));
  return One(im.Emit1(n, "hardtanh", {x}, Attrs().Float("min_val", lo).Float("max_val", hi)));
}

// clamp(x, min?, max?) with number bounds (or None); clamp_min(x, min) and clamp_max(x, max) are
// `bounds` = "min" / "max". Tensor bounds are refused by name.
Handler Clamp(const std::string& bounds) {
  return [bounds](Importer& im, Node* n, const Args& a) -> Result {
    MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
    Attrs attrs;
    const std::vector<std::string> names = bounds == "both" ? std::vector<std::string>{"min", "max"} : std::vector<std::string>{bounds};
    for (size_t k = 0; k < names.size(); ++k) {
      const int i = static_cast<int>(k) + 1;
      if (i >= static_cast<int>(a.size()) || a[i].kind == AValue::Kind::kNone) continue;
      if (a[i].kind == AValue::Kind::kTensor && !a[i].scalar_tensor) {
        return im.Error(n, absl::StrCat("clamp with a tensor ", names[k], " bound is not supported; give a number"));
      }
      MAPD_ASSIGN_OR_RETURN(double v, im.DoubleArg(n, a, i));
      attrs.Float(names[k], v);
    }
    return One(im.Emit1(n, "clamp", {x}, attrs));
  };
}

// dropout(x, p, train): identity unless training with p > 0.
Result Dropout(Importer& im, Node* n, const Args& a) {
  MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
  MAPD_ASSIGN_OR_RETURN(double p, im.DoubleArg(n, a, 1));
  MAPD_ASSIGN_OR_RETURN(bool train, im.BoolArg(n, a, 2));
  if (!train || p == 0) return std::vector<AValue>{AValue::Tensor(x)};
  return One(im.Emit1(n, "dropout", {x}, Attrs().Float("p", p).Bool("train", true)));
}

// Binary arithmetic with either operand possibly a number. `commutes`: a number on the left
// may be swapped to the right; otherwise it becomes `reverse`.
Handler Binary(const std::string& op, bool commutes, bool has_alpha, bool reverse_args = false) {
  return [=](Importer& im, Node* n, const Args& a) -> Result {
    std::string lhs, rhs;
    v1::AttrValue ls, rs;
    const int li = reverse_args ? 1 : 0, ri = reverse_args ? 0 : 1;
    MAPD_RETURN_IF_ERROR(im.TensorOrScalarArg(n, a, li, &lhs, &ls));
    MAPD_RETURN_IF_ERROR(im.TensorOrScalarArg(n, a, ri, &rhs, &rs));
    Attrs attrs;
    double alpha = 1;
    if (has_alpha && a.size() > 2) {
      MAPD_ASSIGN_OR_RETURN(alpha, im.DoubleArg(n, a, 2));
    }
    if (lhs.empty() && rhs.empty()) return im.Error(n, "both operands are numbers");
    if (lhs.empty()) {
      // number (op) tensor
      if (reverse_args && alpha != 1) {
        // rsub(tensor, number, alpha) = number - alpha * tensor
        MAPD_ASSIGN_OR_RETURN(AValue scaled, im.Emit1(n, "mul", {rhs}, Attrs().Float("scalar", alpha)));
        rhs = scaled.tensor;
        alpha = 1;
      }
      if (alpha != 1) {
        MAPD_ASSIGN_OR_RETURN(AValue scaled, im.Emit1(n, "mul", {rhs}, Attrs().Float("scalar", alpha)));
        rhs = scaled.tensor;
      }
      attrs.Set("scalar", ls);
      if (!commutes) attrs.Bool("reverse", true);
      return One(im.Emit1(n, op, {rhs}, attrs));
    }
    if (reverse_args && alpha != 1) {
      // rsub(a, b, alpha) = b - alpha * a, here with both tensors or a number on the right.
      MAPD_ASSIGN_OR_RETURN(AValue scaled, im.Emit1(n, "mul", {rhs}, Attrs().Float("scalar", alpha)));
      rhs = scaled.tensor;
      alpha = 1;
    }
    if (alpha != 1) attrs.Float("alpha", alpha);
    if (rhs.empty()) {
      attrs.Set("scalar", rs);
      return One(im.Emit1(n, op, {lhs}, attrs));
    }
    return One(im.Emit1(n, op, {lhs, rhs}, attrs));
  };
}

Result Div(Importer& im, Node* n, const Args& a) {
  std::string lhs, rhs;
  v1::AttrValue ls, rs;
  MAPD_RETURN_IF_ERROR(im.TensorOrScalarArg(n, a, 0, &lhs, &ls));
  MAPD_RETURN_IF_ERROR(im.TensorOrScalarArg(n, a, 1, &rhs, &rs));
  Attrs attrs;
  if (a.size() > 2 && !a[2].is_none()) {
    MAPD_ASSIGN_OR_RETURN(std::string mode, im.StringArg(n, a, 2));
    attrs.Str("rounding_mode", mode);
  }
  if (lhs.empty()) {
    attrs.Set("scalar", ls).Bool("reverse", true);
    return One(im.Emit1(n, "div", {rhs}, attrs));
  }
  if (rhs.empty()) {
    attrs.Set("scalar", rs);
    return One(im.Emit1(n, "div", {lhs}, attrs));
  }
  return One(im.Emit1(n, "div", {lhs, rhs}, attrs));
}

Result FloorDivide(Importer& im, Node* n, const Args& a) {
  Args b = a;
  b.resize(2);
  b.push_back(AValue::Const(c10::IValue(std::string("floor"))));
  return Div(im, n, b);
}

Handler Compare(const std::string& op, const std::string& flipped) {
  return [=](Importer& im, Node* n, const Args& a) -> Result {
    std::string lhs, rhs;
    v1::AttrValue ls, rs;
    MAPD_RETURN_IF_ERROR(im.TensorOrScalarArg(n, a, 0, &lhs, &ls));
    MAPD_RETURN_IF_ERROR(im.TensorOrScalarArg(n, a, 1, &rhs, &rs));
    if (lhs.empty()) return One(im.Emit1(n, flipped, {rhs}, Attrs().Set("scalar", ls)));
    if (rhs.empty()) return One(im.Emit1(n, op, {lhs}, Attrs().Set("scalar", rs)));
    return One(im.Emit1(n, op, {lhs, rhs}, Attrs()));
  };
}

Result MaskedFill(Importer& im, Node* n, const Args& a) {
  MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
  MAPD_ASSIGN_OR_RETURN(std::string mask, im.TensorArg(n, a, 1));
  std::string value;
  v1::AttrValue scalar;
  MAPD_RETURN_IF_ERROR(im.TensorOrScalarArg(n, a, 2, &value, &scalar));
  if (!value.empty()) return One(im.Emit1(n, "masked_fill", {x, mask, value}, Attrs()));
  return One(im.Emit1(n, "masked_fill", {x, mask}, Attrs().Set("value", scalar)));
}

Result Where(Importer& im, Node* n, const Args& a) {
  MAPD_ASSIGN_OR_RETURN(std::string cond, im.TensorArg(n, a, 0));
  std::string x, y;
  v1::AttrValue xs, ys;
  MAPD_RETURN_IF_ERROR(im.TensorOrScalarArg(n, a, 1, &x, &xs));
  MAPD_RETURN_IF_ERROR(im.TensorOrScalarArg(n, a, 2, &y, &ys));
  Attrs attrs;
  if (x.empty()) attrs.Set("x_scalar", xs);
  if (y.empty()) attrs.Set("y_scalar", ys);
  return One(im.Emit1(n, "where", {cond, x, y}, attrs));
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


// op(self, <int list>) → op {attr=[...]} (view, reshape, permute, expand, adaptive pooling).
Handler WithIntList(const std::string& op, const std::string& attr) {
  return [op, attr](Importer& im, Node* n, const Args& a) -> Result {
    MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
    MAPD_ASSIGN_OR_RETURN(std::vector<int64_t> list, im.IntListArg(n, a, 1));
    return One(im.Emit1(n, op, {x}, Attrs().Ints(attr, list)));
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

// arange(end, dtype?, ...), arange(start, end, dtype?, ...), arange(start, end, step, dtype?, ...):
// the overload follows from the argument count (4 trailing dtype/layout/device/pin_memory).
Result Arange(Importer& im, Node* n, const Args& a) {
  const int numbers = static_cast<int>(a.size()) - 4;
  if (numbers < 1 || numbers > 3) return im.Error(n, absl::StrCat("unexpected arange overload with ", a.size(), " arguments"));
  Attrs attrs;
  auto number = [&](int i, const char* key) -> absl::Status {
    v1::AttrValue v;
    std::string t;
    MAPD_RETURN_IF_ERROR(im.TensorOrScalarArg(n, a, i, &t, &v));
    if (!t.empty()) return im.Error(n, "arange bounds must not depend on tensor data");
    attrs.Set(key, v);
    return absl::OkStatus();
  };
  if (numbers == 1) {
    MAPD_RETURN_IF_ERROR(number(0, "end"));
  } else {
    MAPD_RETURN_IF_ERROR(number(0, "start"));
    MAPD_RETURN_IF_ERROR(number(1, "end"));
    if (numbers == 3) MAPD_RETURN_IF_ERROR(number(2, "step"));
  }
  MAPD_ASSIGN_OR_RETURN(std::optional<DType> dtype, im.DTypeArg(n, a, numbers));
  if (dtype) attrs.Str("dtype", DTypeShortName(*dtype));
  return One(im.Emit1(n, "arange", {}, attrs));
}

// zeros/ones(size, dtype?, ...), full(size, value, dtype?, ...), their *_like and new_* forms.
enum class FillFrom { kSize, kLike, kNew };
Handler Fill(const std::string& op, FillFrom from) {
  return [op, from](Importer& im, Node* n, const Args& a) -> Result {
    std::vector<int64_t> shape;
    std::optional<DType> dtype;
    int next = 0;
    if (from == FillFrom::kSize) {
      MAPD_ASSIGN_OR_RETURN(shape, im.IntListArg(n, a, 0));
      next = 1;
    } else {
      MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
      const TensorType& t = *im.builder().TypeOf(x);
      dtype = t.dtype;
      shape = t.shape;
      next = 1;
      if (from == FillFrom::kNew) {
        MAPD_ASSIGN_OR_RETURN(shape, im.IntListArg(n, a, 1));
        next = 2;
      }
    }
    Attrs attrs;
    attrs.Ints("shape", shape);
    if (op == "full") {
      v1::AttrValue v;
      std::string t;
      MAPD_RETURN_IF_ERROR(im.TensorOrScalarArg(n, a, next, &t, &v));
      if (!t.empty()) return im.Error(n, "the fill value must not depend on tensor data");
      attrs.Set("value", v);
      ++next;
    }
    MAPD_ASSIGN_OR_RETURN(std::optional<DType> given, im.DTypeArg(n, a, next));
    if (given) dtype = given;
    if (dtype) attrs.Str("dtype", DTypeShortName(*dtype));
    return One(im.Emit1(n, op, {}, attrs));
  };
}

// bernoulli_(self, p, generator?) and bernoulli(self, p, generator?): 0/1 draws with probability
// p shaped like self (stochastic depth: torch.empty(size).bernoulli_(p), self's values unused).
Result Bernoulli(Importer& im, Node* n, const Args& a) {
  MAPD_ASSIGN_OR_RETURN(TensorType like, im.TensorTypeArg(n, a, 0));
  if (a.size() < 2 || !a[1].is_number()) {
    return im.Error(n, "bernoulli with a tensor of probabilities is not supported; give p as a number "
                       "(tensor.bernoulli_(p), as stochastic depth does)");
  }
  MAPD_ASSIGN_OR_RETURN(double p, im.DoubleArg(n, a, 1));
  return One(im.Emit1(n, "bernoulli", {},
                      Attrs().Ints("shape", like.shape).Float("p", p).Str("dtype", DTypeShortName(like.dtype))));
}

// copy_(self, src, non_blocking): self's type with src's values (broadcast, converted).
Result Copy(Importer& im, Node* n, const Args& a) {
  MAPD_ASSIGN_OR_RETURN(TensorType self, im.TensorTypeArg(n, a, 0));
  MAPD_ASSIGN_OR_RETURN(std::string src, im.TensorArg(n, a, 1));
  const TensorType from = *im.builder().TypeOf(src);
  if (from.dtype != self.dtype) {
    MAPD_ASSIGN_OR_RETURN(AValue cast, im.Emit1(n, "to", {src}, Attrs().Str("dtype", DTypeShortName(self.dtype))));
    src = cast.tensor;
  }
  if (from.shape != self.shape) {
    MAPD_ASSIGN_OR_RETURN(AValue wide, im.Emit1(n, "expand", {src}, Attrs().Ints("shape", self.shape)));
    MAPD_ASSIGN_OR_RETURN(AValue dense, im.Emit1(n, "contiguous", {wide.tensor}, {}));
    return std::vector<AValue>{dense};
  }
  return std::vector<AValue>{AValue::Tensor(src)};
}

// randn_like / rand_like(self, dtype?, ...) and randn / rand(size, dtype?, ...): draws of self's
// (or size's) shape, made every step.
Handler Draw(const std::string& op, bool like) {
  return [op, like](Importer& im, Node* n, const Args& a) -> Result {
    TensorType type{v1::FLOAT32, {}};
    if (like) {
      MAPD_ASSIGN_OR_RETURN(type, im.TensorTypeArg(n, a, 0));
    } else {
      MAPD_ASSIGN_OR_RETURN(type.shape, im.IntListArg(n, a, 0));
      if (a.size() > 1 && a[1].kind == AValue::Kind::kList) return im.Error(n, "drawing with named dimensions is not supported");
    }
    MAPD_ASSIGN_OR_RETURN(std::optional<DType> given, im.DTypeArg(n, a, 1));
    if (given) type.dtype = *given;
    if (!IsFloating(type.dtype)) return im.Error(n, absl::StrCat(op, " of ", DTypeShortName(type.dtype), " is not supported"));
    return One(im.Emit1(n, op, {}, Attrs().Ints("shape", type.shape).Str("dtype", DTypeShortName(type.dtype))));
  };
}

// aten::to has several overloads; the target dtype is the first ScalarType among the
// arguments after self, or another tensor's dtype. No dtype (a device move) is the identity.
Result To(Importer& im, Node* n, const Args& a) {
  MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
  std::optional<DType> dtype;
  if (a.size() > 1 && a[1].is_tensor()) {
    dtype = im.TypeOf(a[1]).dtype;
  } else {
    for (size_t i = 1; i < std::min<size_t>(a.size(), 3); ++i) {
      if (a[i].kind == AValue::Kind::kConst && a[i].constant.isInt()) {
        MAPD_ASSIGN_OR_RETURN(dtype, im.DTypeArg(n, a, static_cast<int>(i)));
        break;
      }
    }
  }
  if (!dtype || *dtype == im.TypeOf(a[0]).dtype) return std::vector<AValue>{a[0]};
  return One(im.Emit1(n, "to", {x}, Attrs().Str("dtype", DTypeShortName(*dtype))));
}

Result TypeAs(Importer& im, Node* n, const Args& a) {
  MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
  MAPD_ASSIGN_OR_RETURN(std::string other, im.TensorArg(n, a, 1));
  if (im.TypeOf(a[0]).dtype == im.builder().TypeOf(other)->dtype) return std::vector<AValue>{a[0]};
  return One(im.Emit1(n, "type_as", {x, other}, Attrs()));
}

Result Contiguous(Importer& im, Node* n, const Args& a) {
  MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
  return One(im.Emit1(n, "contiguous", {x}, Attrs()));
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

Handler Pow() {
  return Binary("pow", /*commutes=*/false, /*has_alpha=*/false);
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
    m["aten::gelu"] = Gelu;
    for (const char* op : {"aten::hardtanh", "aten::hardtanh_"}) m[op] = Hardtanh;
    for (const char* op : {"aten::leaky_relu", "aten::leaky_relu_"}) m[op] = LeakyRelu;
    for (const char* op : {"hardswish", "hardsigmoid", "mish", "log1p", "sign"}) {
      m[absl::StrCat("aten::", op)] = SameArgs(op, 1);
      m[absl::StrCat("aten::", op, "_")] = SameArgs(op, 1);
    }
    for (const char* op : {"aten::clamp", "aten::clamp_"}) m[op] = Clamp("both");
    for (const char* op : {"aten::clamp_min", "aten::clamp_min_"}) m[op] = Clamp("min");
    for (const char* op : {"aten::clamp_max", "aten::clamp_max_"}) m[op] = Clamp("max");
    for (const char* op : {"silu", "relu", "tanh", "sigmoid", "neg", "rsqrt", "sqrt", "exp", "log", "abs", "sin", "cos"}) {
      m[absl::StrCat("aten::", op)] = SameArgs(op, 1);
      m[absl::StrCat("aten::", op, "_")] = SameArgs(op, 1);
    }
    for (const char* op : {"aten::elu", "aten::elu_", "aten::selu", "aten::selu_", "aten::celu", "aten::celu_"}) m[op] = Elu;
    m["aten::softplus"] = Softplus;
    m["aten::glu"] = WithInt("glu", "dim");
    m["aten::minimum"] = SameArgs("minimum", 2);
    m["aten::maximum"] = SameArgs("maximum", 2);
    for (const char* op : {"and", "or", "xor"}) {
      const std::string logical = absl::StrCat("logical_", op);
      m["aten::" + logical] = m["aten::" + logical + "_"] = Logical(logical, 2, false);
      m[absl::StrCat("aten::bitwise_", op)] = m[absl::StrCat("aten::__", op, "__")] = Logical(logical, 2, true);
    }
    m["aten::logical_not"] = m["aten::logical_not_"] = Logical("logical_not", 1, false);
    m["aten::bitwise_not"] = Logical("logical_not", 1, true);
    m["aten::dropout"] = Dropout;
    m["aten::dropout_"] = Dropout;
    m["aten::feature_dropout"] = Dropout;
    m["aten::add"] = Binary("add", true, true);
    m["aten::add_"] = Binary("add", true, true);
    m["aten::sub"] = Binary("sub", false, true);
    m["aten::sub_"] = Binary("sub", false, true);
    m["aten::rsub"] = Binary("sub", false, true, /*reverse_args=*/true);
    m["aten::mul"] = Binary("mul", true, false);
    m["aten::mul_"] = Binary("mul", true, false);
    m["aten::div"] = Div;
    m["aten::div_"] = Div;
    m["aten::true_divide"] = Div;
    m["aten::floor_divide"] = FloorDivide;
    m["aten::pow"] = Pow();
    m["aten::eq"] = Compare("eq", "eq");
    m["aten::ne"] = Compare("ne", "ne");
    m["aten::lt"] = Compare("lt", "gt");
    m["aten::gt"] = Compare("gt", "lt");
    m["aten::le"] = Compare("le", "ge");
    m["aten::ge"] = Compare("ge", "le");
    m["aten::masked_fill"] = MaskedFill;
    m["aten::masked_fill_"] = MaskedFill;
    m["aten::where"] = Where;
    m["aten::triu"] = WithInt("triu", "diagonal");
    m["aten::tril"] = WithInt("tril", "diagonal");
    m["aten::mean"] = Reduce("mean");
    m["aten::sum"] = Reduce("sum");
    m["aten::amax"] = MinMax("amax");
    m["aten::amin"] = MinMax("amin");
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
    m["aten::arange"] = Arange;
    m["aten::bernoulli"] = Bernoulli;
    m["aten::pad"] = Pad("");
    m["aten::constant_pad_nd"] = Pad("constant");
    m["aten::reflection_pad1d"] = m["aten::reflection_pad2d"] = m["aten::reflection_pad3d"] = Pad("reflect");
    m["aten::replication_pad1d"] = m["aten::replication_pad2d"] = m["aten::replication_pad3d"] = Pad("replicate");
    m["aten::roll"] = Roll;
    m["aten::einsum"] = Einsum;
    AddRnnHandlers(m);
    // In-place writes (through slices too: RebindInPlace scatters them back).
    m["aten::zero_"] = Fill("zeros", FillFrom::kLike);
    m["aten::fill_"] = Fill("full", FillFrom::kLike);
    m["aten::copy_"] = Copy;
    m["aten::index_select"] = IndexSelect;
    m["aten::index"] = Index;
    m["aten::norm"] = VectorNorm(1);
    m["aten::linalg_vector_norm"] = VectorNorm(1);
    m["aten::frobenius_norm"] = VectorNorm(-1);
    m["aten::bernoulli_"] = Bernoulli;
    m["aten::randn_like"] = Draw("randn", true);
    m["aten::rand_like"] = Draw("rand", true);
    m["aten::randn"] = Draw("randn", false);
    m["aten::rand"] = Draw("rand", false);
    m["aten::zeros"] = Fill("zeros", FillFrom::kSize);
    m["aten::ones"] = Fill("ones", FillFrom::kSize);
    m["aten::full"] = Fill("full", FillFrom::kSize);
    m["aten::zeros_like"] = Fill("zeros", FillFrom::kLike);
    m["aten::ones_like"] = Fill("ones", FillFrom::kLike);
    m["aten::full_like"] = Fill("full", FillFrom::kLike);
    m["aten::new_zeros"] = Fill("zeros", FillFrom::kNew);
    m["aten::new_ones"] = Fill("ones", FillFrom::kNew);
    m["aten::new_full"] = Fill("full", FillFrom::kNew);
    m["aten::to"] = To;
    m["aten::type_as"] = TypeAs;
    AddSpatialHandlers(m);
    AddIndexHandlers(m);
    m["aten::scaled_dot_product_attention"] = Sdpa;
    return t;
  }();
  return *table;
}

}  // namespace import_internal
}  // namespace mapd

// Elementwise ops as aten writes them: activations (gelu, leaky_relu, elu/selu/celu, softplus,
// hardtanh, clamp, glu and the one-argument ones: relu, silu, tanh, ...), dropout, logical and
// bitwise ops on masks, arithmetic with tensors or numbers (add, sub, rsub, mul, div,
// floor_divide, pow), comparisons, masked_fill, where, triu/tril; and the ops that make or
// convert tensors: arange, zeros/ones/full (with their *_like and new_* forms), random draws,
// bernoulli, the in-place writes zero_, fill_ and copy_, to and type_as.
#include <algorithm>

#include "common/status_macros.h"
#include "model/import/importer_internal.h"

namespace mapd {
namespace import_internal {

namespace {

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
      // An integer bound stays an integer: clamp of an integer tensor by a float promotes it to
      // float (PyTorch's rule), which the registry's clamp does not model — the generic path does.
      if (a[i].is_number() && (a[i].constant.isInt() || a[i].constant.isBool())) {
        attrs.Int(names[k], a[i].constant.isBool() ? a[i].constant.toBool() : a[i].constant.toInt());
        continue;
      }
      if (!IsFloating(im.builder().TypeOf(x)->dtype)) {
        return im.Error(n, "clamp of an integer tensor by a float bound makes floats");
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

Handler Pow() {
  return Binary("pow", /*commutes=*/false, /*has_alpha=*/false);
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

}  // namespace

void AddElementwiseHandlers(std::map<std::string, Handler>& m) {
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
  m["aten::arange"] = Arange;
  m["aten::bernoulli"] = Bernoulli;
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
  // In-place writes (through slices too: RebindInPlace scatters them back).
  m["aten::zero_"] = Fill("zeros", FillFrom::kLike);
  m["aten::fill_"] = Fill("full", FillFrom::kLike);
  m["aten::copy_"] = Copy;
}

}  // namespace import_internal
}  // namespace mapd

// Elementwise ops: activations (and GLU's gate), unary math, binary arithmetic (tensor or
// scalar operand), minimum/maximum, comparisons and logical ops, masked_fill, where,
// triu/tril, dtype conversions, dropout.
#include <algorithm>

#include "common/status_macros.h"
#include "model/ops/registry.h"
#include "model/ops/shape_util.h"

namespace mapd {
namespace {

using Types = std::vector<TensorType>;

OpTraits Elementwise() {
  OpTraits t;
  t.elementwise = true;
  return t;
}

// Unary ops that keep the dtype (relu, neg, dropout) or produce floats (exp, gelu, ...).
InferFn UnaryInfer(bool to_float) {
  return [to_float](const OpContext& ctx) -> absl::StatusOr<Types> {
    TensorType t = ctx.input(0);
    if (to_float && !IsFloating(t.dtype)) t.dtype = v1::FLOAT32;
    return Types{t};
  };
}

absl::StatusOr<Types> InferGelu(const OpContext& ctx) {
  MAPD_ASSIGN_OR_RETURN(std::string approx, ctx.Str("approximate", "none"));
  if (approx != "none" && approx != "tanh") {
    return ctx.Error("approximate must be 'none' or 'tanh', got '", approx, "'");
  }
  return UnaryInfer(true)(ctx);
}

absl::StatusOr<Types> InferDropout(const OpContext& ctx) {
  MAPD_ASSIGN_OR_RETURN(double p, ctx.Float("p", 0.5));
  if (p < 0 || p > 1) return ctx.Error("p must be in [0, 1], got ", p);
  MAPD_RETURN_IF_ERROR(ExpectFloating(ctx, 0, "input"));
  return Types{ctx.input(0)};
}

// Binary arithmetic: (a, b) tensors, or (a) with attribute `scalar` as the other operand;
// `reverse` puts the scalar on the left (scalar - a, scalar / a, scalar ** a).
// Bool operands follow PyTorch: add and mul of bools stay bool, sub with any bool operand is
// an error (aten's sub_check), true division gives float, and floor/trunc division and pow
// have no bool kernel. A bool tensor with an int scalar promotes to i64, as in PyTorch.
InferFn BinaryInfer(bool true_divide) {
  return [true_divide](const OpContext& ctx) -> absl::StatusOr<Types> {
    TensorType out;
    int bool_operands = ctx.input(0).dtype == v1::BOOL ? 1 : 0;
    if (ctx.has_input(1)) {
      if (ctx.has_attr("scalar")) return ctx.Error("give a second input or attribute 'scalar', not both");
      MAPD_ASSIGN_OR_RETURN(out.shape, BroadcastShapes(ctx, ctx.input(0).shape, ctx.input(1).shape));
      out.dtype = PromoteOperands(ctx.input(0), ctx.input(1));
      if (ctx.input(1).dtype == v1::BOOL) ++bool_operands;
    } else {
      const v1::AttrValue* s = ctx.Attr("scalar");
      if (s == nullptr) return ctx.Error("needs a second input or attribute 'scalar'");
      out.shape = ctx.input(0).shape;
      const bool bool_scalar = s->value_case() == v1::AttrValue::kB;
      if (bool_scalar) ++bool_operands;
      // A bool number keeps a bool tensor bool (x + True); an int number makes it i64.
      out.dtype = bool_scalar && ctx.input(0).dtype == v1::BOOL
                      ? v1::BOOL
                      : PromoteWithScalar(ctx.input(0).dtype, s->value_case() == v1::AttrValue::kF);
    }
    if (ctx.op() == "sub" && bool_operands > 0) {
      if (bool_operands == 2) {
        return ctx.Error("subtraction of two bool tensors is not supported (use logical_xor)");
      }
      return ctx.Error("subtraction with a bool tensor is not supported (use logical_not to invert a mask)");
    }
    if (true_divide) {
      MAPD_ASSIGN_OR_RETURN(std::string mode, ctx.Str("rounding_mode", ""));
      if (!mode.empty() && mode != "trunc" && mode != "floor") {
        return ctx.Error("rounding_mode must be 'trunc', 'floor' or absent, got '", mode, "'");
      }
      if (mode.empty() && !IsFloating(out.dtype)) out.dtype = v1::FLOAT32;
      if (out.dtype == v1::BOOL) {
        return ctx.Error("division with rounding_mode '", mode, "' is not supported for bool operands");
      }
    }
    if (out.dtype == v1::BOOL && ctx.op() == "pow") return ctx.Error("pow is not supported for bool operands");
    return Types{out};
  };
}

// minimum / maximum of two tensors: broadcast, promoted as arithmetic is.
absl::StatusOr<Types> InferTensorPair(const OpContext& ctx) {
  MAPD_ASSIGN_OR_RETURN(Shape shape, BroadcastShapes(ctx, ctx.input(0).shape, ctx.input(1).shape));
  return Types{{PromoteOperands(ctx.input(0), ctx.input(1)), shape}};
}

// logical_and / or / xor (two tensors) and logical_not (one): any dtype, nonzero is true.
absl::StatusOr<Types> InferLogical(const OpContext& ctx) {
  Shape shape = ctx.input(0).shape;
  if (ctx.has_input(1)) {
    MAPD_ASSIGN_OR_RETURN(shape, BroadcastShapes(ctx, ctx.input(0).shape, ctx.input(1).shape));
  }
  return Types{{v1::BOOL, shape}};
}

// glu(x, dim): the first half of x along dim times the sigmoid of the second half.
absl::StatusOr<Types> InferGlu(const OpContext& ctx) {
  const TensorType& x = ctx.input(0);
  MAPD_RETURN_IF_ERROR(ExpectFloating(ctx, 0, "input"));
  if (x.rank() == 0) return ctx.Error("glu of a 0-d tensor");
  MAPD_ASSIGN_OR_RETURN(int64_t dim, ctx.Int("dim", -1));
  MAPD_ASSIGN_OR_RETURN(int d, NormalizeDim(ctx, dim, x.rank()));
  if (x.shape[d] % 2 != 0) return ctx.Error("dimension ", d, " of ", x.ToString(), " must have an even size to halve");
  TensorType out = x;
  out.shape[d] /= 2;
  return Types{out};
}

absl::StatusOr<Types> InferCompare(const OpContext& ctx) {
  Shape shape = ctx.input(0).shape;
  if (ctx.has_input(1)) {
    MAPD_ASSIGN_OR_RETURN(shape, BroadcastShapes(ctx, ctx.input(0).shape, ctx.input(1).shape));
  } else if (!ctx.has_attr("scalar")) {
    return ctx.Error("needs a second input or attribute 'scalar'");
  }
  return Types{{v1::BOOL, shape}};
}

// masked_fill(x, mask[, value]): value is a 0-d tensor input or the float attribute `value`.
absl::StatusOr<Types> InferMaskedFill(const OpContext& ctx) {
  const TensorType& x = ctx.input(0);
  const TensorType& mask = ctx.input(1);
  if (mask.dtype != v1::BOOL) return ctx.Error("mask must be bool, got ", mask.ToString());
  MAPD_ASSIGN_OR_RETURN(Shape bc, BroadcastShapes(ctx, x.shape, mask.shape));
  if (bc != x.shape) {
    return ctx.Error("mask ", mask.ToString(), " does not broadcast to input ", x.ToString());
  }
  if (ctx.has_input(2)) {
    if (ctx.input(2).rank() != 0) return ctx.Error("value must be a 0-d tensor, got ", ctx.input(2).ToString());
  } else if (!ctx.has_attr("value")) {
    return ctx.Error("needs a value input or attribute 'value'");
  }
  return Types{x};
}

// where(cond, x, y): x or y may be absent and given as attributes x_scalar / y_scalar.
absl::StatusOr<Types> InferWhere(const OpContext& ctx) {
  const TensorType& cond = ctx.input(0);
  if (cond.dtype != v1::BOOL) return ctx.Error("condition must be bool, got ", cond.ToString());
  Shape shape = cond.shape;
  DType dtype = v1::DTYPE_UNSPECIFIED;
  bool any_float_scalar = false;
  for (int i = 1; i <= 2; ++i) {
    const char* attr = i == 1 ? "x_scalar" : "y_scalar";
    if (ctx.has_input(i)) {
      if (ctx.has_attr(attr)) return ctx.Error("input ", i, " is given both as a tensor and as '", attr, "'");
      MAPD_ASSIGN_OR_RETURN(shape, BroadcastShapes(ctx, shape, ctx.input(i).shape));
      dtype = dtype == v1::DTYPE_UNSPECIFIED ? ctx.input(i).dtype : PromoteDTypes(dtype, ctx.input(i).dtype);
    } else {
      const v1::AttrValue* s = ctx.Attr(attr);
      if (s == nullptr) return ctx.Error("input ", i, " is absent and attribute '", attr, "' is not set");
      any_float_scalar |= s->value_case() == v1::AttrValue::kF;
    }
  }
  if (dtype == v1::DTYPE_UNSPECIFIED) dtype = any_float_scalar ? v1::FLOAT32 : v1::INT64;
  else dtype = PromoteWithScalar(dtype, any_float_scalar);
  return Types{{dtype, shape}};
}

absl::StatusOr<Types> InferTriangle(const OpContext& ctx) {
  MAPD_RETURN_IF_ERROR(ExpectRank(ctx, 0, 2, 64, "input"));
  MAPD_RETURN_IF_ERROR(ctx.Int("diagonal", 0).status());
  return Types{ctx.input(0)};
}

absl::StatusOr<Types> InferTo(const OpContext& ctx) {
  MAPD_ASSIGN_OR_RETURN(std::string name, ctx.Str("dtype"));
  MAPD_ASSIGN_OR_RETURN(DType d, ctx.DTypeAttr("dtype", v1::FLOAT32));
  (void)name;
  return Types{{d, ctx.input(0).shape}};
}

absl::StatusOr<Types> InferTypeAs(const OpContext& ctx) {
  return Types{{ctx.input(1).dtype, ctx.input(0).shape}};
}

absl::StatusOr<Types> InferPow(const OpContext& ctx) {
  if (!ctx.has_input(1) && !ctx.has_attr("scalar")) return ctx.Error("needs an exponent input or attribute 'scalar'");
  return BinaryInfer(false)(ctx);
}


// ---- saved tensors ----

// mul: the gradient of a broadcast operand (a per-edge or per-channel scale) is grad * other
// at the output's size, summed down to the operand's: that product is a temporary.
OpCost MulCost(const CostContext& c) {
  OpCost cost = ElementwiseCost(1, 1)(c);
  for (int i = 0; i < 2 && c.op.has_input(1); ++i) {
    if (c.input_requires_grad(i) && c.op.input(i).NumElements() < c.outputs[0].NumElements()) {
      cost.grad_workspace_bytes = std::max(cost.grad_workspace_bytes, c.outputs[0].NumBytes());
    }
  }
  return cost;
}

// div: b's gradient is -grad * ((a / b) / b), at the output's size (summed down when b is
// broadcast): two quotients are temporaries beside it, and for a broadcast b the full-size
// product before the sum (measured with MAPD_ALLOC_TRACE).
OpCost DivCost(const CostContext& c) {
  OpCost cost = ElementwiseCost(1, 2)(c);
  if (c.op.has_input(1) && c.input_requires_grad(1)) {
    const bool broadcast = c.op.input(1).NumElements() < c.outputs[0].NumElements();
    cost.grad_workspace_bytes = (broadcast ? 3 : 2) * c.outputs[0].NumBytes();
  }
  return cost;
}

// pow(x, number): the gradient is grad * (number * x.pow(number - 1)): the power and its
// product with the number are temporaries beside it (measured with MAPD_ALLOC_TRACE).
OpCost PowCost(const CostContext& c) {
  OpCost cost = ElementwiseCost(1, 3)(c);
  auto reverse = c.op.Bool("reverse", false);
  if (!c.op.has_input(1) && !(reverse.ok() && *reverse) && c.input_requires_grad(0)) {
    cost.grad_workspace_bytes = 2 * c.op.input(0).NumBytes();
  }
  return cost;
}

// mul: each tensor operand is kept for the other's gradient; a scalar factor keeps nothing.
SavedSpec MulSaved(const CostContext& c) {
  SavedSpec s;
  if (!c.op.has_input(1)) return s;
  if (c.input_requires_grad(1)) s.inputs.push_back(0);
  if (c.input_requires_grad(0)) s.inputs.push_back(1);
  return s;
}

// div: a / b keeps b (and a when b needs a gradient); number / a keeps a; a / number keeps
// nothing.
SavedSpec DivSaved(const CostContext& c) {
  SavedSpec s;
  if (!c.any_requires_grad()) return s;
  if (c.op.has_input(1)) {
    s.inputs.push_back(1);
    if (c.input_requires_grad(1)) s.inputs.push_back(0);
    return s;
  }
  auto reverse = c.op.Bool("reverse", false);
  if (reverse.ok() && *reverse) s.inputs.push_back(0);
  return s;
}

// pow: x ** number keeps x; tensor exponents (and number ** x) also keep the result.
SavedSpec PowSaved(const CostContext& c) {
  SavedSpec s;
  if (!c.any_requires_grad()) return s;
  s.inputs.push_back(0);
  if (c.op.has_input(1)) s.inputs.push_back(1);
  auto reverse = c.op.Bool("reverse", false);
  if (c.op.has_input(1) || (reverse.ok() && *reverse)) s.outputs.push_back(0);
  return s;
}

// Training-mode dropout keeps its noise: on the CPU a scaled mask of the input's size and
// dtype (LibTorch 1.13's native_dropout; the CUDA kernel keeps a bool mask instead).
SavedSpec DropoutSaved(const CostContext& c) {
  SavedSpec s;
  auto p = c.op.Float("p", 0.5);
  auto train = c.op.Bool("train", true);
  if (c.any_requires_grad() && p.ok() && *p > 0 && train.ok() && *train) s.extra_bytes = c.op.input(0).NumBytes();
  return s;
}

// ---- sharding rules (docs/sharding.md) ----

// triu/tril: which elements are zeroed depends on the global row and column index, so the
// matrix dimensions (the last two) are unsplittable; leading dimensions split. (A split would
// need the diagonal shifted by the device's row/column offset.)
absl::StatusOr<ShardingRule> TriangleSharding(const CostContext& c) {
  ShardingRule r = EmptyRule(c);
  LabelPool pool;
  const int rank = c.op.input(0).rank();
  r.inputs[0] = pool.Fresh(rank);
  r.outputs[0] = r.inputs[0];
  r.unsplittable = r.inputs[0].substr(rank - 2);
  MAPD_RETURN_IF_ERROR(pool.status());
  return r;
}

OpCost MinMaxCost(const CostContext& c) {
  OpCost cost = ElementwiseCost(1, 2)(c);
  if (c.any_requires_grad()) cost.grad_workspace_bytes = c.outputs[0].NumBytes() + 2 * c.outputs[0].NumElements();
  return cost;
}

// glu: the halved dimension is unsplittable (a device would need both halves' rows).
absl::StatusOr<ShardingRule> GluSharding(const CostContext& c) {
  LabelPool pool;
  ShardingRule r = SameLabelsExcept(c, {AttrDim(c, "dim", -1)}, pool);
  MAPD_RETURN_IF_ERROR(pool.status());
  return r;
}

}  // namespace

void RegisterElementwiseOps(OpRegistry& r) {
  const ShardingFn bc = BroadcastRule();  // every elementwise op: labels aligned by broadcasting
  const OpTraits ew = Elementwise();
  // What autograd keeps for each unary op: its input, its output, or nothing.
  enum Keeps { kNothing, kInput, kOutput };
  struct Unary {
    const char* name;
    const char* summary;
    bool to_float;
    Keeps keeps;
    double flops, grad_flops;  // per element
  };
  const Unary unary[] = {
      {"silu", "x * sigmoid(x)", true, kInput, 4, 6},       {"relu", "max(x, 0)", false, kOutput, 1, 1},
      {"tanh", "hyperbolic tangent", true, kOutput, 4, 3},  {"sigmoid", "1 / (1 + exp(-x))", true, kOutput, 4, 3},
      {"neg", "-x", false, kNothing, 1, 1},                 {"rsqrt", "1 / sqrt(x)", true, kOutput, 2, 4},
      {"sqrt", "square root", true, kOutput, 1, 2},         {"exp", "e^x", true, kOutput, 1, 1},
      {"log", "natural logarithm", true, kInput, 1, 1},     {"abs", "|x|", false, kInput, 1, 1},
      {"sin", "sine", true, kInput, 1, 2},                  {"cos", "cosine", true, kInput, 1, 2},
      {"hardswish", "x * relu6(x + 3) / 6 (MobileNetV3)", false, kInput, 4, 4},
      {"hardsigmoid", "relu6(x + 3) / 6 (MobileNetV3)", false, kInput, 3, 2},
      {"mish", "x * tanh(softplus(x))", true, kInput, 8, 12},
      {"log1p", "log(1 + x)", true, kInput, 2, 2},
      {"sign", "-1, 0 or 1 by the sign of x (gradient zero)", false, kNothing, 1, 0},
  };
  for (const auto& u : unary) {
    SavedFn saved = u.keeps == kInput ? Saves({0}, {}) : (u.keeps == kOutput ? Saves({}, {0}) : SavesNothing());
    r.Add(Op(u.name, u.summary)
            .Inputs({{"x"}})
            .Traits(ew)
            .Infer(UnaryInfer(u.to_float))
            .Cost(ElementwiseCost(u.flops, u.grad_flops))
            .Saved(saved)
            .Sharding(bc));
  }
  // Clamps: at::hardtanh and at::clamp keep their input (their backwards mask the gradient by it;
  // hardtanh's mask excludes the bounds, clamp's includes them — two ops, so both are exact).
  r.Add(Op("hardtanh", "x clamped to [min_val, max_val] (ReLU6 is hardtanh(x, 0, 6))")
          .Inputs({{"x"}})
          .Attrs({{"min_val", AttrKind::kNumber, true}, {"max_val", AttrKind::kNumber, true}})
          .Traits(ew)
          .Infer(UnaryInfer(false))
          .Cost(ElementwiseCost(2, 2))
          .Saved(Saves({0}, {}))
          .Sharding(bc));
  r.Add(Op("clamp", "x clamped to [min, max]; either bound may be absent (clamp_min, clamp_max)")
          .Inputs({{"x"}})
          .Attrs({{"min", AttrKind::kNumber}, {"max", AttrKind::kNumber}})
          .Traits(ew)
          .Infer(UnaryInfer(false))
          .Cost(ElementwiseCost(2, 2))
          .Saved(Saves({0}, {}))
          .Sharding(bc));
  r.Add(Op("leaky_relu", "x for x > 0, negative_slope * x otherwise")
          .Inputs({{"x"}})
          .Attrs({{"negative_slope", AttrKind::kNumber}})
          .Traits(ew)
          .Infer(UnaryInfer(false))
          .Cost(ElementwiseCost(2, 2))
          .Saved(Saves({0}, {}))
          .Sharding(bc));
  // at::elu and at::softplus keep their input (the in-place elu_ keeps its result; the IR is
  // functional, so the runtime calls elu).
  r.Add(Op("elu", "x for x > 0, else scale * alpha * (exp(x * input_scale) - 1)")
          .Inputs({{"x"}})
          .Attrs({{"alpha", AttrKind::kNumber}, {"scale", AttrKind::kNumber}, {"input_scale", AttrKind::kNumber}})
          .Traits(ew)
          .Infer(UnaryInfer(true))
          .Cost(ElementwiseCost(3, 3))
          .Saved(Saves({0}, {}))
          .Sharding(bc));
  r.Add(Op("softplus", "log(1 + exp(beta * x)) / beta; x itself where beta * x > threshold")
          .Inputs({{"x"}})
          .Attrs({{"beta", AttrKind::kNumber}, {"threshold", AttrKind::kNumber}})
          .Traits(ew)
          .Infer(UnaryInfer(true))
          .Cost(ElementwiseCost(4, 4))
          .Saved(Saves({0}, {}))
          .Sharding(bc));
  r.Add(Op("glu", "gated linear unit: a * sigmoid(b) for x's halves a, b along dim")
          .Inputs({{"x"}})
          .Attrs({{"dim", AttrKind::kInt}})
          .Infer(InferGlu)
          .Cost(ElementwiseCost(5, 6))
          .Saved(Saves({0}, {}))
          .Sharding(GluSharding));
  // Both operands are kept: the gradient goes to the larger (smaller) one, halved on ties — as
  // where(a == b, grad / 2, grad).masked_fill_(a < b, 0): grad / 2 and two bool masks are
  // temporaries beside each gradient (measured with MAPD_ALLOC_TRACE).
  for (const char* op : {"minimum", "maximum"}) {
    r.Add(Op(op, std::string("elementwise ") + (op[1] == 'i' ? "smaller" : "larger") + " of a and b")
            .Inputs({{"a"}, {"b"}})
            .Traits(ew)
            .Infer(InferTensorPair)
            .Cost(MinMaxCost)
            .Saved(Saves({0, 1}, {}))
            .Sharding(bc));
  }
  for (const char* op : {"logical_and", "logical_or", "logical_xor"}) {
    r.Add(Op(op, "elementwise logic giving bool (nonzero is true)")
            .Inputs({{"a"}, {"b"}})
            .Traits(ew)
            .Infer(InferLogical)
            .Cost(ElementwiseCost(1, 0))
            .Saved(SavesNothing())
            .Sharding(bc));
  }
  r.Add(Op("logical_not", "x == 0, as bool")
          .Inputs({{"x"}})
          .Traits(ew)
          .Infer(InferLogical)
          .Cost(ElementwiseCost(1, 0))
          .Saved(SavesNothing())
          .Sharding(bc));
  r.Add(Op("gelu", "Gaussian error linear unit (approximate='none'|'tanh')")
          .Inputs({{"x"}})
          .Attrs({{"approximate", AttrKind::kString}})
          .Traits(ew)
          .Infer(InferGelu)
          .Cost(ElementwiseCost(10, 12))
          .Saved(Saves({0}, {}))
          .Sharding(bc));
  OpTraits drop = ew;
  drop.random = true;
  // Dropout splits like any elementwise op; for a split plan to match single-device training
  // the runtime must draw each device's slice of the global mask (not a fresh local one).
  r.Add(Op("dropout", "zero elements with probability p and scale by 1/(1-p) when train")
          .Inputs({{"x"}})
          .Attrs({{"p", AttrKind::kFloat}, {"train", AttrKind::kBool}})
          .Traits(drop)
          .Infer(InferDropout)
          .Cost(ElementwiseCost(2, 1))
          .Saved(DropoutSaved)
          .Sharding(bc));

  const std::vector<AttrSpec> scalar_attrs = {{"scalar", AttrKind::kNumber}, {"reverse", AttrKind::kBool},
                                              {"alpha", AttrKind::kNumber}};
  r.Add(Op("add", "a + alpha*b (b a tensor or attribute 'scalar')")
          .Inputs({{"a"}, {"b", true}})
          .Attrs(scalar_attrs)
          .Traits(ew)
          .Infer(BinaryInfer(false))
          .Cost(ElementwiseCost(1, 1))
          .Saved(SavesNothing())
          .Sharding(bc));
  r.Add(Op("sub", "a - alpha*b")
          .Inputs({{"a"}, {"b", true}})
          .Attrs(scalar_attrs)
          .Traits(ew)
          .Infer(BinaryInfer(false))
          .Cost(ElementwiseCost(1, 1))
          .Saved(SavesNothing())
          .Sharding(bc));
  r.Add(Op("mul", "a * b")
          .Inputs({{"a"}, {"b", true}})
          .Attrs({{"scalar", AttrKind::kNumber}, {"reverse", AttrKind::kBool}})
          .Traits(ew)
          .Infer(BinaryInfer(false))
          .Cost(MulCost)
          .Saved(MulSaved)
          .Sharding(bc));
  r.Add(Op("div", "a / b (true division unless rounding_mode)")
          .Inputs({{"a"}, {"b", true}})
          .Attrs({{"scalar", AttrKind::kNumber}, {"reverse", AttrKind::kBool}, {"rounding_mode", AttrKind::kString}})
          .Traits(ew)
          .Infer(BinaryInfer(true))
          .Cost(DivCost)
          .Saved(DivSaved)
          .Sharding(bc));
  r.Add(Op("pow", "a ** b (b a tensor or attribute 'scalar')")
          .Inputs({{"a"}, {"b", true}})
          .Attrs({{"scalar", AttrKind::kNumber}, {"reverse", AttrKind::kBool}})
          .Traits(ew)
          .Infer(InferPow)
          .Cost(PowCost)
          .Saved(PowSaved)
          .Sharding(bc));
  for (const char* cmp : {"eq", "ne", "lt", "gt", "le", "ge"}) {
    r.Add(Op(cmp, "elementwise comparison giving bool")
            .Inputs({{"a"}, {"b", true}})
            .Attrs({{"scalar", AttrKind::kNumber}})
            .Traits(ew)
            .Infer(InferCompare)
            .Cost(ElementwiseCost(1, 0))
            .Saved(SavesNothing())
            .Sharding(bc));
  }
  r.Add(Op("masked_fill", "x with value where mask is true")
          .Inputs({{"x"}, {"mask"}, {"value", true}})
          .Attrs({{"value", AttrKind::kNumber}})
          .Traits(ew)
          .Infer(InferMaskedFill)
          .Cost(ElementwiseCost(1, 1))
          .Saved(Saves({1}, {}))
          .Sharding(bc));
  r.Add(Op("where", "cond ? x : y")
          .Inputs({{"cond"}, {"x", true}, {"y", true}})
          .Attrs({{"x_scalar", AttrKind::kNumber}, {"y_scalar", AttrKind::kNumber}})
          .Traits(ew)
          .Infer(InferWhere)
          .Cost(ElementwiseCost(1, 1))
          .Saved(Saves({0}, {}))
          .Sharding(bc));
  r.Add(Op("triu", "upper triangle (zeros below diagonal)")
          .Inputs({{"x"}})
          .Attrs({{"diagonal", AttrKind::kInt}})
          .Infer(InferTriangle)
          .Cost(ElementwiseCost(1, 1))
          .Saved(SavesNothing())
          .Sharding(TriangleSharding));
  r.Add(Op("tril", "lower triangle (zeros above diagonal)")
          .Inputs({{"x"}})
          .Attrs({{"diagonal", AttrKind::kInt}})
          .Infer(InferTriangle)
          .Cost(ElementwiseCost(1, 1))
          .Saved(SavesNothing())
          .Sharding(TriangleSharding));
  r.Add(Op("to", "convert to dtype")
          .Inputs({{"x"}})
          .Attrs({{"dtype", AttrKind::kString, true}})
          .Traits(ew)
          .Infer(InferTo)
          .Cost(ElementwiseCost(1, 1))
          .Saved(SavesNothing())
          .Sharding(bc));
  r.Add(Op("type_as", "convert x to the dtype of other")
          .Inputs({{"x"}, {"other"}})
          .Traits(ew)
          .Infer(InferTypeAs)
          .Cost(ElementwiseCost(1, 1))
          .Saved(SavesNothing())
          .Sharding(bc));
}

}  // namespace mapd

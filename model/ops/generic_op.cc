#include "model/ops/generic_op.h"

#include <cstdlib>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "model/ir/dtype.h"

namespace mapd {

namespace {

struct KindName {
  GenericArg::Kind kind;
  const char* tag;
};
constexpr KindName kKindNames[] = {
    {GenericArg::Kind::kTensor, "t"},   {GenericArg::Kind::kTensorList, "tl"}, {GenericArg::Kind::kOptionalTensorList, "otl"},
    {GenericArg::Kind::kNone, "none"},  {GenericArg::Kind::kInt, "i"},         {GenericArg::Kind::kFloat, "f"},
    {GenericArg::Kind::kBool, "b"},     {GenericArg::Kind::kInts, "il"},       {GenericArg::Kind::kFloats, "fl"},
    {GenericArg::Kind::kBools, "bl"},   {GenericArg::Kind::kString, "s"},      {GenericArg::Kind::kDevice, "dev"},
    {GenericArg::Kind::kGenerator, "gen"},
};

std::string IntList(const std::vector<int64_t>& v, bool none_as_underscore) {
  std::vector<std::string> parts;
  for (int64_t x : v) parts.push_back(none_as_underscore && x < 0 ? "_" : absl::StrCat(x));
  return absl::StrJoin(parts, ",");
}

absl::StatusOr<std::vector<int64_t>> ParseIntList(const std::string& s, const std::string& whole) {
  std::vector<int64_t> out;
  if (s.empty()) return out;
  for (absl::string_view p : absl::StrSplit(s, ',')) {
    int64_t v = -1;
    if (p != "_" && !absl::SimpleAtoi(p, &v)) return absl::InvalidArgumentError(absl::StrCat("bad integer in '", whole, "'"));
    out.push_back(v);
  }
  return out;
}

}  // namespace

std::string GenericArg::Encode() const {
  const char* tag = "none";
  for (const auto& k : kKindNames) {
    if (k.kind == kind) tag = k.tag;
  }
  switch (kind) {
    case Kind::kNone:
    case Kind::kDevice:
    case Kind::kGenerator:
      return tag;
    case Kind::kString:
      return absl::StrCat(tag, ":", text);
    case Kind::kFloat:
    case Kind::kFloats: {
      std::vector<std::string> parts;
      for (double f : floats) parts.push_back(absl::StrFormat("%.17g", f));
      return absl::StrCat(tag, ":", absl::StrJoin(parts, ","));
    }
    default:
      return absl::StrCat(tag, ":", IntList(ints, kind == Kind::kOptionalTensorList));
  }
}

absl::StatusOr<GenericArg> GenericArg::Decode(const std::string& s) {
  const size_t colon = s.find(':');
  const std::string tag = s.substr(0, colon);
  const std::string rest = colon == std::string::npos ? "" : s.substr(colon + 1);
  GenericArg a;
  bool known = false;
  for (const auto& k : kKindNames) {
    if (tag == k.tag) {
      a.kind = k.kind;
      known = true;
    }
  }
  if (!known) return absl::InvalidArgumentError(absl::StrCat("unknown argument kind in '", s, "'"));
  switch (a.kind) {
    case Kind::kNone:
    case Kind::kDevice:
    case Kind::kGenerator:
      return a;
    case Kind::kString:
      a.text = rest;
      return a;
    case Kind::kFloat:
    case Kind::kFloats:
      if (!rest.empty()) {
        for (absl::string_view p : absl::StrSplit(rest, ',')) {
          double f = 0;
          if (!absl::SimpleAtod(p, &f)) return absl::InvalidArgumentError(absl::StrCat("bad number in '", s, "'"));
          a.floats.push_back(f);
        }
      }
      break;
    default: {
      MAPD_ASSIGN_OR_RETURN(a.ints, ParseIntList(rest, s));
      break;
    }
  }
  const bool one = a.kind == Kind::kTensor || a.kind == Kind::kInt || a.kind == Kind::kBool;
  if ((one && a.ints.size() != 1) || (a.kind == Kind::kFloat && a.floats.size() != 1)) {
    return absl::InvalidArgumentError(absl::StrCat("argument '", s, "' must hold one value"));
  }
  return a;
}

std::string GenericNode::Name() const { return schema.substr(0, schema.find('.')); }

std::vector<std::string> GenericAttrNames() {
  return {"schema",    "args",     "in_dtypes",  "in_shapes",  "out_dtypes", "out_shapes", "batch",
          "batch_in",  "batch_out", "alias",     "grad",       "saved_in",   "saved_out",  "saved_extra",
          "workspace", "grad_workspace", "random", "measured_on"};
}

namespace {

void PutTypes(Attrs& a, const std::string& prefix, const std::vector<TensorType>& types) {
  std::vector<std::string> dtypes;
  std::vector<std::string> shapes;
  for (const auto& t : types) {
    dtypes.push_back(DTypeShortName(t.dtype));
    shapes.push_back(IntList(t.shape, false));
  }
  a.Strings(prefix + "_dtypes", dtypes).Strings(prefix + "_shapes", shapes);
}

const v1::AttrValue* Find(const AttrMap& attrs, const std::string& name) {
  auto it = attrs.find(name);
  return it == attrs.end() ? nullptr : &it->second;
}

std::vector<std::string> StringsOf(const AttrMap& attrs, const std::string& name) {
  const v1::AttrValue* v = Find(attrs, name);
  std::vector<std::string> out;
  if (v != nullptr && v->value_case() == v1::AttrValue::kStrings) out.assign(v->strings().values().begin(), v->strings().values().end());
  return out;
}

std::vector<int64_t> IntsOf(const AttrMap& attrs, const std::string& name) {
  const v1::AttrValue* v = Find(attrs, name);
  std::vector<int64_t> out;
  if (v == nullptr) return out;
  if (v->value_case() == v1::AttrValue::kI) return {v->i()};
  if (v->value_case() == v1::AttrValue::kInts) out.assign(v->ints().values().begin(), v->ints().values().end());
  return out;
}

absl::StatusOr<std::vector<TensorType>> TypesOf(const AttrMap& attrs, const std::string& prefix) {
  const std::vector<std::string> dtypes = StringsOf(attrs, prefix + "_dtypes");
  const std::vector<std::string> shapes = StringsOf(attrs, prefix + "_shapes");
  if (dtypes.size() != shapes.size()) {
    return absl::InvalidArgumentError(absl::StrCat("attributes ", prefix, "_dtypes and ", prefix, "_shapes differ in length"));
  }
  std::vector<TensorType> out;
  for (size_t i = 0; i < dtypes.size(); ++i) {
    TensorType t;
    MAPD_ASSIGN_OR_RETURN(t.dtype, ParseDType(dtypes[i]));
    MAPD_ASSIGN_OR_RETURN(t.shape, ParseIntList(shapes[i], shapes[i]));
    out.push_back(std::move(t));
  }
  return out;
}

absl::StatusOr<LinearBytes> LinearOf(const AttrMap& attrs, const std::string& name) {
  const std::vector<int64_t> v = IntsOf(attrs, name);
  if (v.empty()) return LinearBytes{};
  if (v.size() != 2 || v[0] < 0 || v[0] + v[1] < 0) {
    return absl::InvalidArgumentError(absl::StrCat("attribute '", name, "' must be [fixed bytes, bytes per sample]"));
  }
  return LinearBytes{v[0], v[1]};
}

absl::Status CheckIndices(const std::vector<int64_t>& v, int64_t limit, const std::string& what) {
  for (int64_t i : v) {
    if (i < 0 || i >= limit) return absl::InvalidArgumentError(absl::StrCat(what, " ", i, " is out of range (", limit, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

Attrs GenericNode::ToAttrs() const {
  Attrs a;
  a.Str("schema", schema);
  std::vector<std::string> encoded;
  for (const auto& arg : args) encoded.push_back(arg.Encode());
  a.Strings("args", encoded);
  PutTypes(a, "in", input_types);
  PutTypes(a, "out", output_types);
  if (batch.batch > 0) a.Int("batch", batch.batch).Ints("batch_in", batch.inputs).Ints("batch_out", batch.outputs);
  a.Ints("alias", alias);
  std::vector<int64_t> g;
  for (bool b : grad) g.push_back(b ? 1 : 0);
  a.Ints("grad", g).Ints("saved_in", saved_inputs).Ints("saved_out", saved_outputs);
  a.Ints("saved_extra", {saved_extra.fixed, saved_extra.per_sample});
  a.Ints("workspace", {workspace.fixed, workspace.per_sample});
  a.Ints("grad_workspace", {grad_workspace.fixed, grad_workspace.per_sample});
  a.Bool("random", random).Str("measured_on", measured_on);
  return a;
}

absl::StatusOr<GenericNode> GenericNode::Parse(const AttrMap& attrs, int num_inputs) {
  GenericNode g;
  const v1::AttrValue* schema = Find(attrs, "schema");
  if (schema == nullptr || schema->value_case() != v1::AttrValue::kS || schema->s().empty()) {
    return absl::InvalidArgumentError("attribute 'schema' (the ATen operator, e.g. aten::cdist) is missing");
  }
  g.schema = schema->s();
  for (const std::string& s : StringsOf(attrs, "args")) {
    MAPD_ASSIGN_OR_RETURN(GenericArg a, GenericArg::Decode(s));
    if (a.kind == GenericArg::Kind::kTensor || a.kind == GenericArg::Kind::kTensorList) {
      MAPD_RETURN_IF_ERROR(CheckIndices(a.ints, num_inputs, "argument input"));
    }
    if (a.kind == GenericArg::Kind::kOptionalTensorList) {
      for (int64_t i : a.ints) {  // -1: None
        if (i >= 0) MAPD_RETURN_IF_ERROR(CheckIndices({i}, num_inputs, "argument input"));
      }
    }
    g.args.push_back(std::move(a));
  }
  MAPD_ASSIGN_OR_RETURN(g.input_types, TypesOf(attrs, "in"));
  MAPD_ASSIGN_OR_RETURN(g.output_types, TypesOf(attrs, "out"));
  if (static_cast<int>(g.input_types.size()) != num_inputs) {
    return absl::InvalidArgumentError(absl::StrCat("in_dtypes names ", g.input_types.size(), " inputs, the node has ", num_inputs));
  }
  if (g.output_types.empty()) return absl::InvalidArgumentError("out_dtypes is empty: a generic node has at least one output");
  const size_t outs = g.output_types.size();
  if (const v1::AttrValue* b = Find(attrs, "batch"); b != nullptr && b->i() > 0) {
    g.batch.batch = b->i();
    g.batch.inputs = IntsOf(attrs, "batch_in");
    g.batch.outputs = IntsOf(attrs, "batch_out");
    if (g.batch.inputs.size() != g.input_types.size() || g.batch.outputs.size() != outs) {
      return absl::InvalidArgumentError("batch_in/batch_out must have one entry per input/output");
    }
    for (size_t i = 0; i < g.batch.inputs.size(); ++i) {
      const int64_t d = g.batch.inputs[i];
      if (d >= g.input_types[i].rank() || (d >= 0 && g.input_types[i].shape[d] != g.batch.batch)) {
        return absl::InvalidArgumentError(absl::StrCat("batch_in names dimension ", d, " of input ", i, ", which is not the batch"));
      }
    }
    for (size_t o = 0; o < outs; ++o) {
      const int64_t d = g.batch.outputs[o];
      if (d < 0 || d >= g.output_types[o].rank() || g.output_types[o].shape[d] != g.batch.batch) {
        return absl::InvalidArgumentError(absl::StrCat("batch_out names dimension ", d, " of output ", o, ", which is not the batch"));
      }
    }
  }
  g.alias = IntsOf(attrs, "alias");
  if (g.alias.empty()) g.alias.assign(outs, -1);
  for (int64_t grad : IntsOf(attrs, "grad")) g.grad.push_back(grad != 0);
  if (g.grad.empty()) g.grad.assign(outs, true);
  if (g.alias.size() != outs || g.grad.size() != outs) return absl::InvalidArgumentError("alias/grad must have one entry per output");
  for (int64_t a : g.alias) {
    if (a >= num_inputs) return absl::InvalidArgumentError(absl::StrCat("alias names input ", a, ", which the node lacks"));
  }
  g.saved_inputs = IntsOf(attrs, "saved_in");
  g.saved_outputs = IntsOf(attrs, "saved_out");
  MAPD_RETURN_IF_ERROR(CheckIndices(g.saved_inputs, num_inputs, "saved_in"));
  MAPD_RETURN_IF_ERROR(CheckIndices(g.saved_outputs, static_cast<int64_t>(outs), "saved_out"));
  MAPD_ASSIGN_OR_RETURN(g.saved_extra, LinearOf(attrs, "saved_extra"));
  MAPD_ASSIGN_OR_RETURN(g.workspace, LinearOf(attrs, "workspace"));
  MAPD_ASSIGN_OR_RETURN(g.grad_workspace, LinearOf(attrs, "grad_workspace"));
  if (const v1::AttrValue* r = Find(attrs, "random"); r != nullptr) g.random = r->b() || r->i() != 0;
  if (const v1::AttrValue* m = Find(attrs, "measured_on"); m != nullptr) g.measured_on = m->s();
  return g;
}

int64_t GenericNode::BatchOf(const std::vector<const TensorType*>& inputs) const {
  for (size_t i = 0; i < inputs.size() && i < batch.inputs.size(); ++i) {
    if (inputs[i] != nullptr && batch.inputs[i] >= 0 && batch.inputs[i] < inputs[i]->rank()) return inputs[i]->shape[batch.inputs[i]];
  }
  return batch.batch;
}

absl::StatusOr<std::vector<TensorType>> GenericNode::OutputTypes(const std::vector<const TensorType*>& inputs) const {
  if (inputs.size() != input_types.size()) {
    return absl::InvalidArgumentError(absl::StrCat("has ", inputs.size(), " inputs; ", schema, " was measured with ", input_types.size()));
  }
  const bool per_sample = batch.batch > 0;
  const int64_t b = per_sample ? BatchOf(inputs) : 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] == nullptr) return absl::InvalidArgumentError(absl::StrCat("input ", i, " is absent"));
    TensorType want = input_types[i];
    if (per_sample && batch.inputs[i] >= 0) want.shape[batch.inputs[i]] = b;
    if (*inputs[i] == want) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        "input ", i, " is ", inputs[i]->ToString(), " but ", schema, " was measured at import with ", input_types[i].ToString(),
        per_sample ? absl::StrCat(" and may change only its batch dimension (", batch.inputs[i], "), the same in every input")
                   : " and was not proven per-sample (its sizes cannot change after import: it runs replicated, on whole batches)"));
  }
  std::vector<TensorType> out = output_types;
  if (per_sample) {
    for (size_t o = 0; o < out.size(); ++o) out[o].shape[batch.outputs[o]] = b;
  }
  return out;
}

namespace {

// Ops whose arithmetic is this many FLOPs per output element.
const std::set<std::string>& PerOutputElementOps() {
  static const std::set<std::string> ops = {
      "abs", "neg", "exp", "exp2", "expm1", "log", "log1p", "log2", "log10", "sin", "cos", "tan", "sinh", "cosh",
      "tanh", "asin", "acos", "atan", "asinh", "acosh", "atanh", "sigmoid", "erf", "erfc", "erfinv", "sqrt", "rsqrt",
      "reciprocal", "square", "dropout_", "pow_", "sign", "sgn", "floor", "ceil", "round", "trunc", "frac", "lgamma", "digamma",
      "hardswish", "hardsigmoid", "mish", "silu", "gelu", "softplus", "logit", "relu", "relu6", "leaky_relu", "elu",
      "celu", "selu", "hardtanh", "clamp", "clamp_min", "clamp_max", "sinc", "nan_to_num", "deg2rad", "rad2deg",
      "add", "sub", "rsub", "mul", "div", "true_divide", "pow", "float_power", "atan2", "maximum", "minimum", "fmax",
      "fmin", "fmod", "remainder", "hypot", "lerp", "xlogy", "where", "addcmul", "addcdiv", "copysign",
      "floor_divide", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "logical_not",
      "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "masked_fill", "heaviside", "isnan", "isinf",
      "isfinite", "threshold", "rrelu_with_noise", "rrelu", "prelu", "hardshrink", "softshrink", "tanhshrink",
      "logsigmoid", "glu", "dropout", "feature_dropout", "alpha_dropout", "feature_alpha_dropout", "bernoulli",
      "normal", "rand_like", "randn_like", "randint_like", "uniform", "exponential", "poisson", "native_dropout",
  };
  return ops;
}

// Ops that read each input element once (reductions and scans).
const std::set<std::string>& PerInputElementOps() {
  static const std::set<std::string> ops = {
      "sum", "mean", "prod", "amax", "amin", "logsumexp", "norm", "linalg_vector_norm", "frobenius_norm", "var",
      "std", "var_mean", "std_mean", "cumsum", "cumprod", "logcumsumexp", "cummax", "cummin", "all", "any",
      "count_nonzero", "max", "min", "upsample_bilinear2d", "grid_sampler", "softmax_backward_data", "argmax", "argmin", "median", "nanmedian", "kthvalue", "mode", "nansum",
      "nanmean", "aminmax", "softmax", "log_softmax", "_softmax", "_log_softmax", "renorm", "_weight_norm",
      "cosine_similarity", "pairwise_distance", "normalize", "embedding_bag", "_embedding_bag", "histc", "mse_loss", "l1_loss",
      "smooth_l1_loss", "huber_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits", "cross_entropy_loss",
      "nll_loss", "nll_loss_nd", "nll_loss2d", "kl_div", "max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d",
      "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool2d",
      "trace", "diff", "cross", "dist", "cosine_embedding_loss", "multinomial",
  };
  return ops;
}

// Ops that move or copy memory and compute nothing (views, copies, layouts, gathers).
const std::set<std::string>& MovementOps() {
  static const std::set<std::string> ops = {
      "detach", "alias", "view", "reshape", "_reshape_alias", "_unsafe_view", "permute", "transpose", "t", "expand",
      "expand_as", "unsqueeze", "squeeze", "select", "slice", "narrow", "unfold", "as_strided", "contiguous",
      "clone", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "repeat", "repeat_interleave", "roll", "flip",
      "fliplr", "flipud", "rot90", "cat", "concat", "stack", "hstack", "vstack", "tril", "triu", "gather",
      "index_select", "take", "take_along_dim", "index", "one_hot", "fill", "zeros_like", "ones_like", "full_like",
      "empty_like", "new_zeros", "new_ones", "new_full", "movedim", "moveaxis", "swapaxes", "diagonal", "diag",
      "diag_embed", "flatten", "unflatten", "split", "chunk", "unbind", "tensor_split", "to", "_to_copy", "type_as",
      "masked_select", "im2col", "col2im", "constant_pad_nd", "reflection_pad1d", "reflection_pad2d",
      "replication_pad1d", "replication_pad2d", "upsample_nearest1d", "upsample_nearest2d", "tile", "broadcast_to",
      "embedding", "select_scatter", "slice_scatter", "as_strided_scatter", "full", "zeros", "ones", "arange",
      "scalar_tensor", "copy", "numpy_T", "mT",
      "index_put", "scatter", "scatter_add", "index_add", "index_copy", "index_fill", "masked_scatter", "sort",
      "argsort", "topk", "view_as", "reshape_as", "lift_fresh", "pad", "meshgrid", "block_diag", "cartesian_prod",
  };
  return ops;
}

int64_t Dim(const TensorType* t, int from_end) {
  if (t == nullptr || t->rank() < from_end) return 1;
  return t->shape[t->rank() - from_end];
}

}  // namespace

double GenericFormulaFlops(const std::string& name, const std::vector<const TensorType*>& inputs,
                           const std::vector<TensorType>& outputs, const std::vector<GenericArg>& args) {
  const std::string op = name.substr(name.find("::") == std::string::npos ? 0 : name.find("::") + 2);
  double out_elems = 0;
  for (const auto& o : outputs) out_elems += static_cast<double>(o.NumElements());
  double in_elems = 0;
  for (const auto* t : inputs) in_elems += t == nullptr ? 0.0 : static_cast<double>(t->NumElements());
  const TensorType* first = inputs.empty() ? nullptr : inputs[0];
  if (MovementOps().count(op)) return 0;
  if (PerOutputElementOps().count(op)) return outputs.empty() ? 0 : static_cast<double>(outputs[0].NumElements());
  if (PerInputElementOps().count(op)) return in_elems;
  // Products: 2 FLOPs per multiply-add, the contraction over the first operand's last dimension.
  if (op == "mm" || op == "bmm" || op == "matmul" || op == "addmm" || op == "baddbmm" || op == "addbmm" ||
      op == "addmv" || op == "mv" || op == "dot" || op == "vdot" || op == "inner" || op == "linear" || op == "bilinear") {
    const TensorType* a = (op == "addmm" || op == "baddbmm" || op == "addbmm" || op == "addmv") && inputs.size() > 1 ? inputs[1] : first;
    const double k = static_cast<double>(op == "bilinear" ? Dim(a, 1) * Dim(inputs.size() > 1 ? inputs[1] : nullptr, 1) : Dim(a, 1));
    return 2.0 * (outputs.empty() ? 0.0 : static_cast<double>(outputs[0].NumElements())) * k;
  }
  // Convolutions: a multiply-add per weight element a group's output element reads.
  if (op == "conv1d" || op == "conv2d" || op == "conv3d" || op == "convolution" || op == "_convolution" ||
      op == "conv_transpose1d" || op == "conv_transpose2d" || op == "conv_transpose3d") {
    const TensorType* w = inputs.size() > 1 ? inputs[1] : nullptr;
    if (w == nullptr || w->rank() < 2 || outputs.empty()) return -1;
    const bool transposed = op.find("transpose") != std::string::npos;
    const double per_output = static_cast<double>(w->NumElements()) / static_cast<double>(w->shape[0]);
    // A transposed convolution scatters each input element into per_output outputs instead.
    const double elems = transposed && first != nullptr ? static_cast<double>(first->NumElements())
                                                        : static_cast<double>(outputs[0].NumElements());
    return 2.0 * elems * per_output;
  }
  // Normalisations: a mean, a variance, a normalisation and an affine map per element.
  if (op == "layer_norm" || op == "native_layer_norm" || op == "group_norm" || op == "native_group_norm" ||
      op == "batch_norm" || op == "native_batch_norm" || op == "instance_norm" || op == "rms_norm") {
    return 5.0 * (first == nullptr ? 0.0 : static_cast<double>(first->NumElements()));
  }
  // Attention: two products of the queries' and keys' lengths, and a softmax between.
  if (op == "scaled_dot_product_attention" && inputs.size() >= 3 && inputs[1] != nullptr && first != nullptr) {
    const double lk = static_cast<double>(Dim(inputs[1], 2));
    return 4.0 * static_cast<double>(first->NumElements()) * lk + 5.0 * static_cast<double>(first->NumElements()) /
                                                                     static_cast<double>(Dim(first, 1)) * lk;
  }
  // cdist: a difference, a power and a sum per coordinate of every pair.
  if (op == "cdist" || op == "_cdist_forward") return 3.0 * out_elems * static_cast<double>(Dim(first, 1));
  (void)args;
  return -1;
}

}  // namespace mapd

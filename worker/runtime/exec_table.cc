// One LibTorch implementation per registry op (see exec_table.h). Each entry uses the most
// direct ATen call for the op and records, in `saved`, what autograd keeps for backward with
// that call in LibTorch 1.13 (derivatives.yaml and the composite ops' source). Shapes: B batch,
// H heads, L/S query/key lengths, C classes or channels. The normalisation ops (layer, RMS,
// batch and group norms, softmax) are in exec_table_norm.cc.
#include "worker/runtime/exec_table.h"

#include <ATen/ATen.h>
#include <ATen/ScalarOps.h>
#include <ATen/core/Reduction.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "model/ir/dtype.h"
#include "model/import/generic_call.h"
#include "model/ops/generic_op.h"
#include "model/ops/registry.h"
#include "worker/runtime/exec_table_internal.h"
#include "worker/runtime/torch_types.h"

namespace mapd {

// ---------------------------------------------------------------- ExecContext

const at::Tensor& ExecContext::in(int i) const {
  if (!has_input(i)) throw std::invalid_argument(absl::StrCat("input ", i, " is absent"));
  return inputs_[i];
}

at::Tensor ExecContext::Dropout(const at::Tensor& x, double p) const {
  if (!training_ || p <= 0 || !dropout_noise_ || p >= 1) return at::dropout(x, p, training_);
  return x * dropout_noise_(x, p);
}

bool DrawsRandomNumbers(const v1::Node& node) {
  // Ops whose registry entry says they draw (dropout, bernoulli, rand, randn); attention only
  // with a dropout probability.
  const OpDef* def = OpRegistry::Global().Find(node.op());
  if (def != nullptr && def->traits.random) return true;
  if (node.op() == kGenericOp) {
    auto r = node.attrs().find("random");
    return r != node.attrs().end() && r->second.b();
  }
  if (node.op() != "scaled_dot_product_attention") return false;
  auto it = node.attrs().find("dropout_p");
  return it != node.attrs().end() && (it->second.f() > 0 || it->second.i() > 0);
}

const v1::AttrValue* ExecContext::Find(const std::string& attr) const {
  auto it = node_.attrs().find(attr);
  return it == node_.attrs().end() ? nullptr : &it->second;
}

bool ExecContext::has(const std::string& attr) const { return Find(attr) != nullptr; }

namespace {
[[noreturn]] void BadAttr(const std::string& attr, const char* want, const v1::AttrValue& v) {
  throw std::invalid_argument(absl::StrCat("attribute '", attr, "' must be ", want, ", got ", AttrKindName(v), " ",
                                           AttrValueToString(v)));
}
}  // namespace

int64_t ExecContext::Int(const std::string& attr, int64_t def) const {
  const v1::AttrValue* v = Find(attr);
  if (v == nullptr) return def;
  if (v->value_case() == v1::AttrValue::kI) return v->i();
  if (v->value_case() == v1::AttrValue::kB) return v->b() ? 1 : 0;
  BadAttr(attr, "an int", *v);
}

double ExecContext::Float(const std::string& attr, double def) const {
  const v1::AttrValue* v = Find(attr);
  if (v == nullptr) return def;
  if (v->value_case() == v1::AttrValue::kF) return v->f();
  if (v->value_case() == v1::AttrValue::kI) return static_cast<double>(v->i());
  if (v->value_case() == v1::AttrValue::kB) return v->b() ? 1.0 : 0.0;
  BadAttr(attr, "a number", *v);
}

bool ExecContext::Bool(const std::string& attr, bool def) const {
  const v1::AttrValue* v = Find(attr);
  if (v == nullptr) return def;
  if (v->value_case() == v1::AttrValue::kB) return v->b();
  if (v->value_case() == v1::AttrValue::kI) return v->i() != 0;
  BadAttr(attr, "a bool", *v);
}

std::string ExecContext::Str(const std::string& attr, const std::string& def) const {
  const v1::AttrValue* v = Find(attr);
  if (v == nullptr) return def;
  if (v->value_case() == v1::AttrValue::kS) return v->s();
  BadAttr(attr, "a string", *v);
}

std::vector<int64_t> ExecContext::Ints(const std::string& attr, const std::vector<int64_t>& def) const {
  const v1::AttrValue* v = Find(attr);
  if (v == nullptr) return def;
  if (v->value_case() == v1::AttrValue::kInts) return {v->ints().values().begin(), v->ints().values().end()};
  if (v->value_case() == v1::AttrValue::kI) return {v->i()};
  BadAttr(attr, "a list of ints", *v);
}

c10::Scalar ExecContext::Scalar(const std::string& attr) const {
  const v1::AttrValue* v = Find(attr);
  if (v == nullptr) throw std::invalid_argument(absl::StrCat("missing attribute '", attr, "'"));
  switch (v->value_case()) {
    case v1::AttrValue::kI: return c10::Scalar(static_cast<int64_t>(v->i()));
    case v1::AttrValue::kF: return c10::Scalar(v->f());
    case v1::AttrValue::kB: return c10::Scalar(v->b());
    default: BadAttr(attr, "a number", *v);
  }
}

c10::ScalarType ExecContext::DType(const std::string& attr, c10::ScalarType def) const {
  if (!has(attr)) return def;
  auto d = ParseDType(Str(attr, ""));
  if (!d.ok()) throw std::invalid_argument(std::string(d.status().message()));
  return ToScalarType(*d);
}

// ---------------------------------------------------------------- ExecTable

const ExecEntry* ExecTable::Find(const std::string& op) const {
  auto it = entries_.find(op);
  return it == entries_.end() ? nullptr : &it->second;
}

std::vector<std::string> ExecTable::Names() const {
  std::vector<std::string> names;
  for (const auto& kv : entries_) names.push_back(kv.first);
  return names;
}

void ExecTable::Add(ExecEntry entry) {
  std::string op = entry.op;
  entries_[op] = std::move(entry);
}

// ---------------------------------------------------------------- implementations

namespace {

using Outs = std::vector<at::Tensor>;
constexpr double kInf = std::numeric_limits<double>::infinity();

using exec_internal::Opt;

int64_t NormDim(int64_t d, int64_t rank) { return d < 0 ? d + rank : d; }

// Reduction dims: the listed ones, or every dim when the list is empty or absent.
std::vector<int64_t> ReduceDims(const ExecContext& c, const at::Tensor& x) {
  std::vector<int64_t> dims = c.Ints("dims", {});
  if (dims.empty()) {
    for (int64_t d = 0; d < x.dim(); ++d) dims.push_back(d);
  }
  return dims;
}

// 1- or 2-element int list → 2 values (kernel_size=3 → {3, 3}); `def` when absent or empty.
std::vector<int64_t> Pair(const ExecContext& c, const std::string& attr, const std::vector<int64_t>& def) {
  std::vector<int64_t> v = c.Ints(attr, def);
  if (v.empty()) v = def;
  if (v.size() == 1) v.push_back(v[0]);
  return v;
}

int64_t ReductionEnum(const ExecContext& c) {
  const std::string r = c.Str("reduction", "mean");
  if (r == "none") return at::Reduction::None;
  if (r == "sum") return at::Reduction::Sum;
  return at::Reduction::Mean;
}

// A Python number as a 0-d tensor that promotes like one (a "wrapped number").
at::Tensor Wrapped(const c10::Scalar& s) { return at::native::wrapped_scalar_tensor(s); }

at::TensorOptions CreationOptions(const ExecContext& c) {
  return at::TensorOptions().dtype(ToScalarType(c.output_types().at(0).dtype)).device(c.device());
}

// ---- contractions

Outs Linear(const ExecContext& c) { return {at::linear(c.in(0), c.in(1), Opt(c, 2))}; }
Outs Matmul(const ExecContext& c) { return {at::matmul(c.in(0), c.in(1))}; }
Outs Bmm(const ExecContext& c) { return {at::bmm(c.in(0), c.in(1))}; }
Outs Addmm(const ExecContext& c) {
  return {at::addmm(c.in(0), c.in(1), c.in(2), c.has("beta") ? c.Scalar("beta") : c10::Scalar(1),
                    c.has("alpha") ? c.Scalar("alpha") : c10::Scalar(1))};
}
Outs Baddbmm(const ExecContext& c) {
  return {at::baddbmm(c.in(0), c.in(1), c.in(2), c.has("beta") ? c.Scalar("beta") : c10::Scalar(1),
                      c.has("alpha") ? c.Scalar("alpha") : c10::Scalar(1))};
}
Outs Embedding(const ExecContext& c) { return {at::embedding(c.in(1), c.in(0), c.Int("padding_idx", -1))}; }

// softmax(q k^T * scale + mask) v, composed of ATen ops. Grouped-query attention repeats each
// k/v head for Hq/Hk query heads first. The scaling and masking act in place on the fresh
// scores tensor (matmul does not save its output), so the scores cost one [.., L, S] buffer.
Outs Sdpa(const ExecContext& c) {
  at::Tensor q = c.in(0), k = c.in(1), v = c.in(2);
  const int64_t r = q.dim();
  if (r >= 3 && k.size(r - 3) != q.size(r - 3)) {
    const int64_t rep = q.size(r - 3) / k.size(r - 3);
    k = at::repeat_interleave(k, rep, r - 3);
    v = at::repeat_interleave(v, rep, r - 3);
  }
  const double scale = c.has("scale") ? c.Float("scale", 1.0) : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1));
  scores.mul_(scale);
  if (c.Bool("is_causal", false)) {
    const int64_t L = q.size(-2), S = k.size(-2);
    at::Tensor future = at::ones({L, S}, q.options().dtype(at::kBool)).triu(1);
    scores.masked_fill_(future, -kInf);
  }
  if (c.has_input(3)) {
    const at::Tensor& mask = c.in(3);
    if (mask.scalar_type() == at::kBool) {
      scores.masked_fill_(mask.logical_not(), -kInf);  // PyTorch: true = may attend
    } else {
      scores.add_(mask);
    }
  }
  at::Tensor attn = at::softmax(scores, -1);
  const double p = c.Float("dropout_p", 0.0);
  attn = c.Dropout(attn, p);
  return {at::matmul(attn, v)};
}

// ---- losses

Outs CrossEntropy(const ExecContext& c) {
  return {at::cross_entropy_loss(c.in(0), c.in(1), Opt(c, 2), ReductionEnum(c), c.Int("ignore_index", -100),
                                 c.Float("label_smoothing", 0.0))};
}
Outs NllLoss(const ExecContext& c) {
  return {at::nll_loss_nd(c.in(0), c.in(1), Opt(c, 2), ReductionEnum(c), c.Int("ignore_index", -100))};
}
Outs MseLoss(const ExecContext& c) { return {at::mse_loss(c.in(0), c.in(1), ReductionEnum(c))}; }

// ---- elementwise

// LibTorch 1.13's CPU backward of the erf GELU computes garbage when the incoming gradient is
// not contiguous (a transpose or permute after the GELU: wav2vec2's feature extractor, experts
// laid out "bseh" by einsum); a hook hands it a contiguous gradient.
Outs Gelu(const ExecContext& c) {
  const std::string approximate = c.Str("approximate", "none");
  at::Tensor y = at::gelu(c.in(0), approximate);
  if (approximate == "none" && y.requires_grad()) y.register_hook([](const at::Tensor& g) { return g.contiguous(); });
  return {y};
}
Outs LeakyRelu(const ExecContext& c) { return {at::leaky_relu(c.in(0), c.has("negative_slope") ? c.Scalar("negative_slope") : c10::Scalar(0.01))}; }
Outs Hardtanh(const ExecContext& c) { return {at::hardtanh(c.in(0), c.Scalar("min_val"), c.Scalar("max_val"))}; }
Outs Clamp(const ExecContext& c) {
  const c10::optional<c10::Scalar> lo = c.has("min") ? c10::optional<c10::Scalar>(c.Scalar("min")) : c10::nullopt;
  const c10::optional<c10::Scalar> hi = c.has("max") ? c10::optional<c10::Scalar>(c.Scalar("max")) : c10::nullopt;
  return {at::clamp(c.in(0), lo, hi)};
}
Outs Elu(const ExecContext& c) {
  auto num = [&c](const char* attr) { return c.has(attr) ? c.Scalar(attr) : c10::Scalar(1.0); };
  return {at::elu(c.in(0), num("alpha"), num("scale"), num("input_scale"))};
}
Outs Softplus(const ExecContext& c) {
  return {at::softplus(c.in(0), c.has("beta") ? c.Scalar("beta") : c10::Scalar(1.0),
                       c.has("threshold") ? c.Scalar("threshold") : c10::Scalar(20.0))};
}
Outs Glu(const ExecContext& c) { return {at::glu(c.in(0), c.Int("dim", -1))}; }
Outs Minimum(const ExecContext& c) { return {at::minimum(c.in(0), c.in(1))}; }
Outs Maximum(const ExecContext& c) { return {at::maximum(c.in(0), c.in(1))}; }
// A rank program's communication step: the distributed runtime (worker/rank) runs it as a real
// collective; a graph that reaches this table with one was not lowered for that runtime.
Outs Collective(const ExecContext& c) {
  throw std::invalid_argument("collective nodes run only in the distributed runtime (worker/rank), not as a graph op");
}

Outs Dropout(const ExecContext& c) {
  return {c.Bool("train", true) ? c.Dropout(c.in(0), c.Float("p", 0.5)) : c.in(0)};
}

Outs Add(const ExecContext& c) {
  const c10::Scalar alpha = c.has("alpha") ? c.Scalar("alpha") : c10::Scalar(1);
  if (c.has_input(1)) return {at::add(c.in(0), c.in(1), alpha)};
  const c10::Scalar s = c.Scalar("scalar");
  if (c.Bool("reverse", false)) return {at::add(Wrapped(s), c.in(0), alpha)};  // s + alpha*a
  return {at::add(c.in(0), s, alpha)};
}
Outs Sub(const ExecContext& c) {
  const c10::Scalar alpha = c.has("alpha") ? c.Scalar("alpha") : c10::Scalar(1);
  if (c.has_input(1)) return {at::sub(c.in(0), c.in(1), alpha)};
  const c10::Scalar s = c.Scalar("scalar");
  if (c.Bool("reverse", false)) return {at::rsub(c.in(0), s, alpha)};  // s - alpha*a
  return {at::sub(c.in(0), s, alpha)};
}
Outs Mul(const ExecContext& c) {
  if (c.has_input(1)) return {at::mul(c.in(0), c.in(1))};
  return {at::mul(c.in(0), c.Scalar("scalar"))};
}
Outs Div(const ExecContext& c) {
  c10::optional<c10::string_view> mode;
  const std::string m = c.Str("rounding_mode", "");
  if (!m.empty()) mode = m;
  if (c.has_input(1)) return {at::div(c.in(0), c.in(1), mode)};
  const c10::Scalar s = c.Scalar("scalar");
  if (c.Bool("reverse", false)) return {at::div(Wrapped(s), c.in(0), mode)};  // s / a
  return {at::div(c.in(0), s, mode)};
}
Outs Pow(const ExecContext& c) {
  if (c.has_input(1)) return {at::pow(c.in(0), c.in(1))};
  const c10::Scalar s = c.Scalar("scalar");
  if (c.Bool("reverse", false)) return {at::pow(s, c.in(0))};  // s ** a
  return {at::pow(c.in(0), s)};
}

using TensorCmp = at::Tensor (*)(const at::Tensor&, const at::Tensor&);
using ScalarCmp = at::Tensor (*)(const at::Tensor&, const at::Scalar&);
ExecFn Compare(TensorCmp t, ScalarCmp s) {
  return [t, s](const ExecContext& c) -> Outs {
    if (c.has_input(1)) return {t(c.in(0), c.in(1))};
    return {s(c.in(0), c.Scalar("scalar"))};
  };
}

Outs MaskedFill(const ExecContext& c) {
  if (c.has_input(2)) return {at::masked_fill(c.in(0), c.in(1), c.in(2))};
  return {at::masked_fill(c.in(0), c.in(1), c.Scalar("value"))};
}

Outs Where(const ExecContext& c) {
  const at::Tensor& cond = c.in(0);
  const bool x = c.has_input(1), y = c.has_input(2);
  if (x && y) return {at::where(cond, c.in(1), c.in(2))};
  if (x) return {at::where(cond, c.in(1), c.Scalar("y_scalar"))};
  if (y) return {at::where(cond, c.Scalar("x_scalar"), c.in(2))};
  return {at::where(cond, c.Scalar("x_scalar"), c.Scalar("y_scalar"))};
}

Outs Triu(const ExecContext& c) { return {at::triu(c.in(0), c.Int("diagonal", 0))}; }
Outs Tril(const ExecContext& c) { return {at::tril(c.in(0), c.Int("diagonal", 0))}; }
Outs To(const ExecContext& c) { return {c.in(0).to(c.DType("dtype", at::kFloat))}; }
Outs TypeAs(const ExecContext& c) { return {c.in(0).type_as(c.in(1))}; }
using TensorPairFn = at::Tensor (*)(const at::Tensor&, const at::Tensor&);
ExecFn Pairwise(TensorPairFn f) {
  return [f](const ExecContext& c) -> Outs { return {f(c.in(0), c.in(1))}; };
}

using UnaryFn = at::Tensor (*)(const at::Tensor&);
ExecFn Unary(UnaryFn f) {
  return [f](const ExecContext& c) -> Outs { return {f(c.in(0))}; };
}

// ---- reductions

c10::optional<at::ScalarType> ReduceDType(const ExecContext& c) {
  if (!c.has("dtype")) return c10::nullopt;
  return c.DType("dtype", at::kFloat);
}
// Over all dims (no `dims`) this is mean(x) rather than mean.dim(x, all dims): in LibTorch
// 1.13 mean.dim's backward keeps x itself, mean's keeps only sizes.
Outs Mean(const ExecContext& c) {
  const at::Tensor& x = c.in(0);
  const bool keepdim = c.Bool("keepdim", false);
  if (c.Ints("dims", {}).empty()) {
    at::Tensor m = at::mean(x, ReduceDType(c));
    return {keepdim ? m.reshape(std::vector<int64_t>(x.dim(), 1)) : m};
  }
  return {at::mean(x, ReduceDims(c, x), keepdim, ReduceDType(c))};
}
Outs Sum(const ExecContext& c) {
  const at::Tensor& x = c.in(0);
  return {at::sum(x, ReduceDims(c, x), c.Bool("keepdim", false), ReduceDType(c))};
}
Outs Amax(const ExecContext& c) {
  const at::Tensor& x = c.in(0);
  return {at::amax(x, ReduceDims(c, x), c.Bool("keepdim", false))};
}
Outs Amin(const ExecContext& c) {
  const at::Tensor& x = c.in(0);
  return {at::amin(x, ReduceDims(c, x), c.Bool("keepdim", false))};
}
Outs MaxDim(const ExecContext& c) {
  auto [values, indices] = at::max(c.in(0), c.Int("dim", 0), c.Bool("keepdim", false));
  return {values, indices};
}
Outs MinDim(const ExecContext& c) {
  auto [values, indices] = at::min(c.in(0), c.Int("dim", 0), c.Bool("keepdim", false));
  return {values, indices};
}
c10::optional<int64_t> OptDim(const ExecContext& c) {
  if (!c.has("dim")) return c10::nullopt;
  return c.Int("dim", 0);
}
Outs Argmax(const ExecContext& c) { return {at::argmax(c.in(0), OptDim(c), c.Bool("keepdim", false))}; }
Outs Argmin(const ExecContext& c) { return {at::argmin(c.in(0), OptDim(c), c.Bool("keepdim", false))}; }
Outs Topk(const ExecContext& c) {
  auto [values, indices] =
      at::topk(c.in(0), c.Int("k", 1), c.Int("dim", -1), c.Bool("largest", true), c.Bool("sorted", true));
  return {values, indices};
}
Outs Sort(const ExecContext& c) {
  auto [values, indices] = at::sort(c.in(0), c.Bool("stable", false), c.Int("dim", -1), c.Bool("descending", false));
  return {values, indices};
}
Outs Cumsum(const ExecContext& c) { return {at::cumsum(c.in(0), c.Int("dim", 0), ReduceDType(c))}; }

// ---- layout

Outs View(const ExecContext& c) { return {c.in(0).view(c.Ints("shape", {}))}; }
Outs Reshape(const ExecContext& c) { return {c.in(0).reshape(c.Ints("shape", {}))}; }
Outs Flatten(const ExecContext& c) { return {c.in(0).flatten(c.Int("start_dim", 0), c.Int("end_dim", -1))}; }
Outs Transpose(const ExecContext& c) {
  const at::Tensor& x = c.in(0);
  if (x.dim() == 0 || (x.dim() < 2 && !c.has("dim0"))) return {x};
  return {x.transpose(c.Int("dim0", 0), c.Int("dim1", 1))};
}
Outs Permute(const ExecContext& c) { return {c.in(0).permute(c.Ints("dims", {}))}; }
Outs Contiguous(const ExecContext& c) { return {c.in(0).contiguous()}; }
Outs Unsqueeze(const ExecContext& c) { return {c.in(0).unsqueeze(c.Int("dim", 0))}; }
Outs Squeeze(const ExecContext& c) {
  at::Tensor x = c.in(0);
  std::vector<int64_t> dims = c.Ints("dims", {});
  if (dims.empty()) return {x.squeeze()};
  for (int64_t& d : dims) d = NormDim(d, x.dim());
  std::sort(dims.rbegin(), dims.rend());
  for (int64_t d : dims) x = x.squeeze(d);  // a listed dim that is not 1 stays
  return {x};
}
Outs Expand(const ExecContext& c) { return {c.in(0).expand(c.Ints("shape", {}))}; }
Outs RepeatInterleave(const ExecContext& c) {
  const at::Tensor& x = c.in(0);
  const int64_t repeats = c.Int("repeats", 1);
  if (!c.has("dim")) return {at::repeat_interleave(x, repeats)};
  return {at::repeat_interleave(x, repeats, NormDim(c.Int("dim", 0), x.dim()))};
}
// Python slice semantics clamped to the dimension, as the registry infers them.
Outs Slice(const ExecContext& c) {
  const at::Tensor& x = c.in(0);
  const int64_t d = NormDim(c.Int("dim", 0), x.dim());
  const int64_t n = x.size(d);
  auto clamp = [n](int64_t v) {
    if (v < 0) v += n;
    return std::min(std::max<int64_t>(v, 0), n);
  };
  const int64_t s = clamp(c.Int("start", 0));
  const int64_t e = std::max(s, clamp(c.Int("end", std::numeric_limits<int64_t>::max())));
  return {x.slice(d, s, e, c.Int("step", 1))};
}
Outs Select(const ExecContext& c) { return {c.in(0).select(c.Int("dim", 0), c.Int("index", 0))}; }
Outs Split(const ExecContext& c) {
  const at::Tensor& x = c.in(0);
  const int64_t dim = c.Int("dim", 0);
  if (c.has("sizes")) return at::split_with_sizes(x, c.Ints("sizes", {}), dim);
  return at::split(x, c.Int("split_size", 1), dim);
}
Outs Chunk(const ExecContext& c) { return at::chunk(c.in(0), c.Int("chunks", 1), c.Int("dim", 0)); }
Outs Cat(const ExecContext& c) { return {at::cat(c.inputs(), c.Int("dim", 0))}; }
Outs Stack(const ExecContext& c) { return {at::stack(c.inputs(), c.Int("dim", 0))}; }

// ---- rearranging and indexing

Outs Pad(const ExecContext& c) {
  const at::Tensor& x = c.in(0);
  const std::vector<int64_t> pads = c.Ints("pads", {});
  const std::string mode = c.Str("mode", "constant");
  if (mode == "constant") return {at::constant_pad_nd(x, pads, c.has("value") ? c.Scalar("value") : c10::Scalar(0))};
  const size_t dims = pads.size() / 2;
  if (mode == "reflect") {
    if (dims == 1) return {at::reflection_pad1d(x, pads)};
    if (dims == 2) return {at::reflection_pad2d(x, pads)};
    return {at::reflection_pad3d(x, pads)};
  }
  if (dims == 1) return {at::replication_pad1d(x, pads)};
  if (dims == 2) return {at::replication_pad2d(x, pads)};
  return {at::replication_pad3d(x, pads)};
}
Outs Roll(const ExecContext& c) { return {at::roll(c.in(0), c.Ints("shifts", {}), c.Ints("dims", {}))}; }
Outs IndexSelect(const ExecContext& c) {
  const at::Tensor& x = c.in(0);
  return {at::index_select(x, x.dim() == 0 ? 0 : NormDim(c.Int("dim", 0), x.dim()), c.in(1).reshape({-1}))};
}
Outs Flip(const ExecContext& c) { return {at::flip(c.in(0), c.Ints("dims", {}))}; }
// Integer indices as the int64 LibTorch's gather and scatter kernels require.
at::Tensor Index64(const at::Tensor& index) { return index.scalar_type() == at::kLong ? index : index.to(at::kLong); }
Outs Gather(const ExecContext& c) { return {at::gather(c.in(0), c.Int("dim", 0), Index64(c.in(1)))}; }
Outs Scatter(const ExecContext& c) {
  if (c.has_input(2)) return {at::scatter(c.in(0), c.Int("dim", 0), Index64(c.in(1)), c.in(2))};
  return {at::scatter(c.in(0), c.Int("dim", 0), Index64(c.in(1)), c.Scalar("value"))};
}
Outs ScatterAdd(const ExecContext& c) { return {at::scatter_add(c.in(0), c.Int("dim", 0), Index64(c.in(1)), c.in(2))}; }
Outs IndexAdd(const ExecContext& c) {
  return {at::index_add(c.in(0), c.Int("dim", 0), c.in(1).reshape({-1}), c.in(2),
                        c.has("alpha") ? c.Scalar("alpha") : c10::Scalar(1))};
}
Outs OneHot(const ExecContext& c) { return {at::one_hot(c.in(0), c.Int("num_classes", -1))}; }
Outs SliceScatter(const ExecContext& c) {
  const at::Tensor& x = c.in(0);
  const int64_t d = NormDim(c.Int("dim", 0), x.dim());
  c10::optional<int64_t> start, end;
  if (c.has("start")) start = c.Int("start", 0);
  if (c.has("end")) end = std::min(c.Int("end", x.size(d)), x.size(d));
  return {at::slice_scatter(x, c.in(1), d, start, end, c.Int("step", 1))};
}
Outs VectorNorm(const ExecContext& c) {
  const at::Tensor& x = c.in(0);
  const c10::Scalar ord = c.has("ord") ? c.Scalar("ord") : c10::Scalar(2.0);
  const std::vector<int64_t> dims = c.Ints("dims", {});
  return {at::linalg_vector_norm(x, ord, dims.empty() ? at::OptionalIntArrayRef() : at::OptionalIntArrayRef(dims),
                                 c.Bool("keepdim", false))};
}

// ---- creation (dtype: the one the registry inferred; device: the run's)

Outs Arange(const ExecContext& c) {
  const c10::Scalar start = c.has("start") ? c.Scalar("start") : c10::Scalar(0);
  const c10::Scalar step = c.has("step") ? c.Scalar("step") : c10::Scalar(1);
  return {at::arange(start, c.Scalar("end"), step, CreationOptions(c))};
}
Outs Zeros(const ExecContext& c) { return {at::zeros(c.Ints("shape", {}), CreationOptions(c))}; }
Outs Ones(const ExecContext& c) { return {at::ones(c.Ints("shape", {}), CreationOptions(c))}; }
Outs Full(const ExecContext& c) { return {at::full(c.Ints("shape", {}), c.Scalar("value"), CreationOptions(c))}; }
// The global draws, as torch.randn(shape) / torch.rand(shape) make them.
Outs Randn(const ExecContext& c) { return {at::randn(c.Ints("shape", {}), c.generator(), CreationOptions(c))}; }
Outs Rand(const ExecContext& c) { return {at::rand(c.Ints("shape", {}), c.generator(), CreationOptions(c))}; }
// The global draw, as torch.empty(shape).bernoulli_(p) makes it (stochastic depth's noise).
Outs Bernoulli(const ExecContext& c) {
  return {at::empty(c.Ints("shape", {}), CreationOptions(c)).bernoulli_(c.Float("p", 0.5), c.generator())};
}

// ---- convolution and pooling

Outs Conv2d(const ExecContext& c) {
  return {at::conv2d(c.in(0), c.in(1), Opt(c, 2), Pair(c, "stride", {1}), Pair(c, "padding", {0}),
                     Pair(c, "dilation", {1}), c.Int("groups", 1))};
}
Outs MaxPool2d(const ExecContext& c) {
  const std::vector<int64_t> k = Pair(c, "kernel_size", {});
  return {at::max_pool2d(c.in(0), k, Pair(c, "stride", k), Pair(c, "padding", {0}), Pair(c, "dilation", {1}),
                         c.Bool("ceil_mode", false))};
}
Outs AvgPool2d(const ExecContext& c) {
  const std::vector<int64_t> k = Pair(c, "kernel_size", {});
  c10::optional<int64_t> divisor;
  if (c.has("divisor_override")) divisor = c.Int("divisor_override", 1);
  return {at::avg_pool2d(c.in(0), k, Pair(c, "stride", k), Pair(c, "padding", {0}), c.Bool("ceil_mode", false),
                         c.Bool("count_include_pad", true), divisor)};
}
Outs AdaptiveAvgPool2d(const ExecContext& c) {
  return {at::adaptive_avg_pool2d(c.in(0), Pair(c, "output_size", {1}))};
}
Outs ConvTranspose2d(const ExecContext& c) {
  return {at::conv_transpose2d(c.in(0), c.in(1), Opt(c, 2), Pair(c, "stride", {1}), Pair(c, "padding", {0}),
                               Pair(c, "output_padding", {0}), c.Int("groups", 1), Pair(c, "dilation", {1}))};
}
Outs Upsample(const ExecContext& c) {
  auto scale = [&c](const char* attr) {
    return c.has(attr) ? c10::optional<double>(c.Float(attr, 1.0)) : c10::optional<double>();
  };
  const std::vector<int64_t> size = c.Ints("output_size", {});
  if (c.Str("mode", "nearest") == "bilinear") {
    return {at::upsample_bilinear2d(c.in(0), size, c.Bool("align_corners", false), scale("scale_h"), scale("scale_w"))};
  }
  return {at::upsample_nearest2d(c.in(0), size, scale("scale_h"), scale("scale_w"))};
}

// ---------------------------------------------------------------- the generic ATen op
//
// A generic node (model/ops/generic_op.h) runs by its schema through c10::Dispatcher with a boxed
// stack; autograd differentiates it like any other call.

// A node's parsed attributes and operator, kept per node (a step runs the same nodes again).
struct PreparedCall {
  GenericNode node;
  c10::OperatorHandle op;
};

const PreparedCall& Prepare(const v1::Node& node) {
  static std::mutex mu;
  static auto* cache = new std::unordered_map<std::string, std::unique_ptr<PreparedCall>>();
  // The call depends on the schema and the arguments only (not on shapes, which micro-batch and
  // rank graphs change).
  std::string key = node.name();
  for (const char* attr : {"schema", "args"}) {
    auto a = node.attrs().find(attr);
    if (a == node.attrs().end()) continue;
    key += "|" + a->second.s();
    for (const auto& v : a->second.strings().values()) key += "|" + v;
  }
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache->find(key);
  if (it != cache->end()) return *it->second;
  auto g = GenericNode::Parse(node.attrs(), node.inputs_size());
  if (!g.ok()) throw std::invalid_argument(std::string(g.status().message()));
  auto op = FindAtenOperator(g->schema);
  if (!op.ok()) throw std::invalid_argument(std::string(op.status().message()));
  auto call = std::make_unique<PreparedCall>(PreparedCall{std::move(*g), *op});
  return *cache->emplace(key, std::move(call)).first->second;
}

std::vector<at::Tensor> RunGeneric(const ExecContext& c) {
  const PreparedCall& call = Prepare(c.node());
  auto out = CallAten(call.op, call.node.args, c.inputs(), c.device(), c.generator());
  if (!out.ok()) throw std::invalid_argument(std::string(out.status().message()));
  if (out->size() != c.output_types().size()) {
    throw std::invalid_argument(absl::StrCat(call.node.schema, " returned ", out->size(), " tensors; the node has ",
                                             c.output_types().size(), " outputs"));
  }
  // LibTorch 1.13's erf-GELU backward is wrong for a non-contiguous gradient (see Gelu above): its
  // gradient is made contiguous first.
  if (call.node.schema == "aten::gelu") {
    for (at::Tensor& y : *out) {
      if (y.requires_grad()) y.register_hook([](const at::Tensor& g) { return g.contiguous(); });
    }
  }
  return *std::move(out);
}

// The table. `saved` names what autograd keeps for backward (inputs only when they require
// grad's counterpart; "nothing" means no tensor beyond sizes/scalars).
ExecTable* BuildTable() {
  auto* t = new ExecTable();
  auto add = [t](const char* op, ExecFn fn, const char* saved) { t->Add({op, std::move(fn), saved}); };
  // contractions
  add("linear", Linear,
      "x and weight (addmm/matmul operands; x as a view of itself when 3-D input is folded); bias: nothing");
  add("matmul", Matmul,
      "both operands, as the mm/bmm operands they fold to (views of the inputs when the batch dims fold, else the "
      "expanded/reshaped copies)");
  add("bmm", Bmm, "a and b");
  add("addmm", Addmm, "a and b (c: nothing)");
  add("baddbmm", Baddbmm, "a and b (c: nothing)");
  add("embedding", Embedding, "indices (int64) and a reference to weight (a parameter: no new memory)");
  add("scaled_dot_product_attention", Sdpa,
      "q, k^T (and for GQA the repeated k and v, [.., Hq, S, E]; repeat_interleave itself saves an int64 index of "
      "Hq entries), the bool mask (causal: [L,S]; bool attn_mask: its negation), the softmax output P [.., L, S], "
      "the dropout noise [.., L, S] when dropout_p > 0 in training (CPU; CUDA: a bool mask), and for the final "
      "matmul P (or the dropped-out P) and v. The scaled scores are freed after the softmax");
  // normalisation and softmax (exec_table_norm.cc)
  exec_internal::AddNormOps(*t);
  // any ATen op without an entry of its own
  add(kGenericOp, RunGeneric,
      "what autograd saved when the importer ran it (the node's saved_in, saved_out and saved_extra attributes)");
  // losses
  add("cross_entropy", CrossEntropy,
      "the log_softmax output [N, C] (shared by log_softmax and nll_loss backward), target, weight, and a 0-d "
      "total_weight; label_smoothing > 0 adds an [N] bool ignore_index mask (and, with a class weight, the "
      "weight again for the smoothing term)");
  add("nll_loss", NllLoss, "input, target, weight and a 0-d total_weight");
  add("mse_loss", MseLoss, "input and target");
  // elementwise
  add("gelu", Gelu, "x");
  add("hardtanh", Hardtanh, "x");
  add("leaky_relu", LeakyRelu, "x");
  add("elu", Elu, "x");
  add("softplus", Softplus, "x");
  add("glu", Glu, "x");
  add("minimum", Minimum, "a and b");
  add("maximum", Maximum, "a and b");
  add("logical_and", Pairwise(at::logical_and), "nothing (no gradient)");
  add("logical_or", Pairwise(at::logical_or), "nothing (no gradient)");
  add("logical_xor", Pairwise(at::logical_xor), "nothing (no gradient)");
  add("logical_not", Unary(at::logical_not), "nothing (no gradient)");
  add("hardswish", Unary(at::hardswish), "x");
  add("hardsigmoid", Unary(at::hardsigmoid), "x");
  add("mish", Unary(at::mish), "x");
  add("log1p", Unary(at::log1p), "x");
  add("sign", Unary(at::sign), "nothing (its gradient is zero)");
  add("clamp", Clamp, "x");
  add("dropout", Dropout,
      "CPU: the scaled noise tensor (x's size and dtype); CUDA (fused): a bool mask of x's size. Nothing when "
      "p = 0 or not training");
  add("silu", Unary(at::silu), "x");
  add("relu", Unary(at::relu), "the output");
  add("collective", Collective, "nothing (runs only in the distributed runtime)");
  add("tanh", Unary(at::tanh), "the output");
  add("sigmoid", Unary(at::sigmoid), "the output");
  add("neg", Unary(at::neg), "nothing");
  add("rsqrt", Unary(at::rsqrt), "the output");
  add("sqrt", Unary(at::sqrt), "the output");
  add("exp", Unary(at::exp), "the output");
  add("log", Unary(at::log), "x");
  add("abs", Unary(at::abs), "x");
  add("sin", Unary(at::sin), "x");
  add("cos", Unary(at::cos), "x");
  add("add", Add, "nothing");
  add("sub", Sub, "nothing");
  add("mul", Mul, "tensor*tensor: each operand that the other's gradient needs (a for b's, b for a's); "
                  "tensor*scalar: nothing");
  add("div", Div,
      "tensor/tensor: b, and a when b requires grad; tensor/scalar: nothing; scalar/tensor (reverse): a and a 0-d "
      "scalar; with rounding_mode the gradient is zero but the same tensors are kept");
  add("pow", Pow,
      "a**scalar: a; a**b: a, b and the output; scalar**a (reverse): a and the output");
  add("eq", Compare(at::eq, at::eq), "nothing (no gradient)");
  add("ne", Compare(at::ne, at::ne), "nothing (no gradient)");
  add("lt", Compare(at::lt, at::lt), "nothing (no gradient)");
  add("gt", Compare(at::gt, at::gt), "nothing (no gradient)");
  add("le", Compare(at::le, at::le), "nothing (no gradient)");
  add("ge", Compare(at::ge, at::ge), "nothing (no gradient)");
  add("masked_fill", MaskedFill, "mask (bool)");
  add("where", Where, "cond (bool)");
  add("triu", Triu, "nothing");
  add("tril", Tril, "nothing");
  add("to", To, "nothing (returns x itself when it already has the dtype)");
  add("type_as", TypeAs, "nothing (returns x itself when it already has the dtype)");
  // reductions
  add("mean", Mean, "over listed dims: x (mean.dim keeps its input in LibTorch 1.13); over all dims: nothing");
  add("sum", Sum, "nothing");
  add("amax", Amax, "x and the output");
  add("amin", Amin, "x and the output");
  add("vector_norm", VectorNorm, "x and the output");
  add("max", MaxDim, "the int64 indices (output 1)");
  add("min", MinDim, "the int64 indices (output 1)");
  add("argmax", Argmax, "nothing (no gradient)");
  add("argmin", Argmin, "nothing (no gradient)");
  add("topk", Topk, "the int64 indices (output 1)");
  add("sort", Sort, "the int64 indices (output 1)");
  add("cumsum", Cumsum, "nothing (the backward is a reversed cumsum of the gradient)");
  // layout (views share x's storage)
  add("view", View, "nothing (view)");
  add("reshape", Reshape, "nothing (view when the strides allow, else a copy)");
  add("flatten", Flatten, "nothing (view when the strides allow, else a copy)");
  add("transpose", Transpose, "nothing (view)");
  add("permute", Permute, "nothing (view)");
  add("contiguous", Contiguous, "nothing (x itself when already contiguous, else a copy)");
  add("unsqueeze", Unsqueeze, "nothing (view)");
  add("squeeze", Squeeze, "nothing (view)");
  add("expand", Expand, "nothing (view)");
  add("repeat_interleave", RepeatInterleave,
      "an int64 index of the output's length along dim (index_select); not x");
  add("slice", Slice, "nothing (view)");
  add("select", Select, "nothing (view)");
  add("split", Split, "nothing (views)");
  add("chunk", Chunk, "nothing (views)");
  add("cat", Cat, "nothing");
  add("pad", Pad, "nothing (the backward slices or folds the gradient back)");
  add("roll", Roll, "nothing (the backward rolls the gradient back)");
  add("index_select", IndexSelect, "index (the backward adds the gradient's rows into x's with index_add)");
  add("flip", Flip, "nothing (the backward flips the gradient)");
  add("gather", Gather, "x and index (the backward scatters the gradient into zeros of x's shape)");
  add("scatter", Scatter, "index");
  add("scatter_add", ScatterAdd, "index");
  add("index_add", IndexAdd, "index and source");
  add("one_hot", OneHot, "nothing (no gradient)");
  add("slice_scatter", SliceScatter, "nothing (the backward slices the gradient)");
  add("stack", Stack, "nothing");
  // creation
  add("arange", Arange, "nothing (no gradient)");
  add("zeros", Zeros, "nothing (no gradient)");
  add("ones", Ones, "nothing (no gradient)");
  add("full", Full, "nothing (no gradient)");
  add("bernoulli", Bernoulli, "nothing (no gradient)");
  add("randn", Randn, "nothing (no gradient)");
  add("rand", Rand, "nothing (no gradient)");
  // convolution and pooling
  add("conv2d", Conv2d, "x and weight");
  add("conv_transpose2d", ConvTranspose2d, "x and weight");
  add("upsample", Upsample, "nothing (the backward needs sizes only)");
  add("max_pool2d", MaxPool2d, "x and the int64 argmax indices (output's size)");
  add("avg_pool2d", AvgPool2d, "x");
  add("adaptive_avg_pool2d", AdaptiveAvgPool2d,
      "x (output_size 1x1 is a mean over H, W, which keeps x in LibTorch 1.13; otherwise the pooling keeps x)");
  return t;
}

}  // namespace

const ExecTable& ExecTable::Global() {
  static const ExecTable* table = BuildTable();
  return *table;
}

}  // namespace mapd

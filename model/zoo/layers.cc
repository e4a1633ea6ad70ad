#include "model/zoo/layers.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "model/ir/attrs.h"

namespace mapd {

namespace {

v1::InitRule Rule(v1::InitRule::Kind kind) {
  v1::InitRule r;
  r.set_kind(kind);
  return r;
}

}  // namespace

v1::InitRule ZerosInit() { return Rule(v1::InitRule::ZEROS); }
v1::InitRule OnesInit() { return Rule(v1::InitRule::ONES); }

v1::InitRule NormalInit(double std) {
  v1::InitRule r = Rule(v1::InitRule::NORMAL);
  r.set_std(std);
  return r;
}

v1::InitRule UniformInit(double low, double high) {
  v1::InitRule r = Rule(v1::InitRule::UNIFORM);
  r.set_low(low);
  r.set_high(high);
  return r;
}

v1::InitRule KaimingUniformInit(int64_t fan_in) {
  v1::InitRule r = Rule(v1::InitRule::KAIMING_UNIFORM);
  r.set_fan_in(fan_in);
  return r;
}

v1::InitRule FanInBiasInit(int64_t fan_in) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  return UniformInit(-bound, bound);
}

Shape Layers::ShapeOf(const std::string& value) const {
  const TensorType* t = b_.TypeOf(value);
  return t == nullptr ? Shape() : t->shape;
}

std::string Layers::Name(const std::string& local) const {
  return b_.scope().empty() ? local : absl::StrCat(b_.scope(), ".", local);
}

std::string Layers::Param(const std::string& local, const Shape& shape, const v1::InitRule& init) {
  return b_.Param(Name(local), TensorType{dtype_, shape}, init);
}

std::string Layers::Buffer(const std::string& local, const Shape& shape, const v1::InitRule& init) {
  v1::Parameter p;
  p.set_name(Name(local));
  *p.mutable_type() = TensorType{dtype_, shape}.ToProto();
  p.set_kind(v1::Parameter::BUFFER);
  p.set_trainable(false);
  *p.mutable_init() = init;
  return b_.AddParameter(std::move(p));
}

std::string Layers::IndexInput(const std::string& name, const Shape& shape, const std::string& role) {
  return b_.Input(name, TensorType{v1::INT64, shape}, role);
}

std::string Layers::Linear(const std::string& module, const std::string& x, int64_t out, bool bias,
                           const v1::InitRule& w_init, const v1::InitRule& b_init) {
  if (!ok()) return "";
  ScopeGuard scope(b_, module);
  const int64_t in = ShapeOf(x).back();
  const std::string w = Param("weight", {out, in}, w_init);
  const std::string bv = bias ? Param("bias", {out}, b_init) : "";
  return b_.Op("linear", {x, w, bv});
}

std::string Layers::Embedding(const std::string& module, const std::string& ids, int64_t rows, int64_t dim,
                              const v1::InitRule& init) {
  ScopeGuard scope(b_, module);
  const std::string w = Param("weight", {rows, dim}, init);
  return b_.Op("embedding", {ids, w});
}

std::string Layers::LayerNorm(const std::string& module, const std::string& x, double eps) {
  if (!ok()) return "";
  ScopeGuard scope(b_, module);
  const int64_t dim = ShapeOf(x).back();
  const std::string w = Param("weight", {dim}, OnesInit());
  const std::string bias = Param("bias", {dim}, ZerosInit());
  return b_.Op("layer_norm", {x, w, bias}, Attrs().Ints("normalized_shape", {dim}).Float("eps", eps));
}

std::string Layers::RmsNorm(const std::string& module, const std::string& x, double eps) {
  if (!ok()) return "";
  ScopeGuard scope(b_, module);
  const int64_t dim = ShapeOf(x).back();
  const std::string w = Param("weight", {dim}, OnesInit());
  return b_.Op("rms_norm", {x, w}, Attrs().Ints("normalized_shape", {dim}).Float("eps", eps));
}

std::string Layers::Conv2d(const std::string& module, const std::string& x, int64_t out, int64_t kernel,
                           int64_t stride, int64_t padding, bool bias) {
  if (!ok()) return "";
  ScopeGuard scope(b_, module);
  const Shape xs = ShapeOf(x);
  const int64_t in = xs[xs.size() - 3];
  const int64_t fan_in = in * kernel * kernel;
  const std::string w = Param("weight", {out, in, kernel, kernel}, KaimingUniformInit(fan_in));
  const std::string bv = bias ? Param("bias", {out}, ZerosInit()) : "";
  return b_.Op("conv2d", {x, w, bv},
               Attrs().Ints("stride", {stride, stride}).Ints("padding", {padding, padding})
                   .Ints("dilation", {1, 1}).Int("groups", 1));
}

std::string Layers::SplitHeads(const std::string& x, int64_t heads) {
  if (!ok()) return "";
  const Shape s = ShapeOf(x);
  const std::string v = b_.Op("view", {x}, Attrs().Ints("shape", {s[0], s[1], heads, s[2] / heads}));
  return b_.Op("transpose", {v}, Attrs().Int("dim0", 1).Int("dim1", 2));
}

std::string Layers::MergeHeads(const std::string& x) {
  if (!ok()) return "";
  const Shape s = ShapeOf(x);
  const std::string t = b_.Op("transpose", {x}, Attrs().Int("dim0", 1).Int("dim1", 2));
  // reshape, not view: the transposed tensor is not contiguous.
  return b_.Op("reshape", {t}, Attrs().Ints("shape", {s[0], s[2], s[1] * s[3]}));
}

std::string Layers::Attention(const std::string& q, const std::string& k, const std::string& v, bool causal) {
  const std::string ctx = b_.Op("scaled_dot_product_attention", {q, k, v}, Attrs().Bool("is_causal", causal));
  return MergeHeads(ctx);
}

std::string Layers::FusedQkvAttention(const std::string& qkv, int64_t heads, bool causal) {
  if (!ok()) return "";
  const int64_t hidden = ShapeOf(qkv).back() / 3;
  const auto parts = b_.Node("split", {qkv}, Attrs().Int("split_size", hidden).Int("dim", -1));
  if (parts.size() != 3) return "";
  // One statement each: the node order must not follow the compiler's argument order.
  const std::string q = SplitHeads(parts[0], heads);
  const std::string k = SplitHeads(parts[1], heads);
  const std::string v = SplitHeads(parts[2], heads);
  return Attention(q, k, v, causal);
}

std::string Layers::PreLnBlock(const std::string& x, const PreLnBlockSpec& spec) {
  if (!ok()) return "";
  const PreLnBlockSpec::Names& n = spec.names;
  const int64_t hidden = ShapeOf(x).back();
  std::string h = LayerNorm(n.ln_1, x, spec.eps);
  {
    ScopeGuard attn(b_, n.attn);
    std::string qkv;
    if (n.qkv.empty()) {
      const std::string w = Param("in_proj_weight", {3 * hidden, hidden}, spec.init);
      qkv = b_.Op("linear", {h, w, Param("in_proj_bias", {3 * hidden}, ZerosInit())});
    } else {
      qkv = Linear(n.qkv, h, 3 * hidden, true, spec.init);
    }
    h = Linear(n.attn_out, FusedQkvAttention(qkv, spec.heads, spec.causal), hidden, true, spec.out_init);
  }
  const std::string mid = Add(x, h);
  h = LayerNorm(n.ln_2, mid, spec.eps);
  {
    ScopeGuard mlp(b_, n.mlp);
    h = Linear(n.fc_in, h, spec.ffn, true, spec.init);
    h = b_.Op("gelu", {h}, Attrs().Str("approximate", spec.gelu_approximate));
    h = Linear(n.fc_out, h, hidden, true, spec.out_init);
  }
  return Add(mid, h);
}

namespace {

// The loss in at least f32, as mixed-precision training does (half-precision logits are cast
// up; f64 ones stay f64); the result is the graph's output.
std::string CrossEntropy(GraphBuilder& b, DType dtype, std::string logits, const std::string& labels) {
  if (dtype == v1::FLOAT16 || dtype == v1::BFLOAT16) logits = b.Op("to", {logits}, Attrs().Str("dtype", "f32"));
  const std::string loss = b.Op("cross_entropy", {logits, labels});
  b.Output(loss);
  return loss;
}

}  // namespace

std::string Layers::ClassificationLoss(const std::string& logits, const std::string& labels) {
  ScopeGuard scope(b_, "loss");
  return CrossEntropy(b_, dtype_, logits, labels);
}

std::string Layers::LanguageModelLoss(const std::string& logits, const std::string& targets) {
  if (!ok()) return "";
  ScopeGuard scope(b_, "loss");
  const int64_t vocab = ShapeOf(logits).back();
  const std::string flat = b_.Op("view", {logits}, Attrs().Ints("shape", {-1, vocab}));
  const std::string flat_targets = b_.Op("view", {targets}, Attrs().Ints("shape", {-1}));
  return CrossEntropy(b_, dtype_, flat, flat_targets);
}

}  // namespace mapd

// Building blocks shared by the zoo families: parameters named by module path, the common
// modules (linear, embedding, norms, conv), multi-head attention plumbing and the losses.
//
// Each module helper pushes its module name as the builder scope, so its nodes carry the
// module path ("h.3.attn.c_attn") and its parameters are "<path>.weight" / "<path>.bias" —
// the names PyTorch's state_dict would use. Helpers are no-ops returning "" once the builder
// has recorded an error (GraphBuilder's errors are sticky).
#ifndef MAPD_MODEL_ZOO_LAYERS_H_
#define MAPD_MODEL_ZOO_LAYERS_H_

#include <cstdint>
#include <string>

#include "model/graph/builder.h"
#include "model/ir/tensor_type.h"
#include "proto/mapd/v1/graph.pb.h"

namespace mapd {

v1::InitRule ZerosInit();
v1::InitRule OnesInit();
v1::InitRule NormalInit(double std);
v1::InitRule UniformInit(double low, double high);
v1::InitRule KaimingUniformInit(int64_t fan_in);
// PyTorch's default nn.Linear/Conv bias: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
v1::InitRule FanInBiasInit(int64_t fan_in);

// A pre-LN transformer block: x + attn(ln_1(x)), then + mlp(ln_2(x)). GPT-2 and torchvision's
// ViT differ only in module names, the GELU form, eps and causality.
struct PreLnBlockSpec {
  struct Names {
    std::string ln_1, attn;
    // The fused q|k|v projection: a Linear module of this name (GPT-2 "c_attn"), or when empty,
    // parameters in_proj_weight / in_proj_bias of the attention module itself
    // (nn.MultiheadAttention, as torchvision's ViT has it).
    std::string qkv;
    std::string attn_out;  // Linear under attn
    std::string ln_2, mlp;
    std::string fc_in, fc_out;  // Linears under mlp
  } names;
  std::string gelu_approximate;  // "tanh" or "none"
  double eps;
  bool causal;
  int64_t heads;
  int64_t ffn;
  v1::InitRule init;      // projection weights
  v1::InitRule out_init;  // weights of attn_out and fc_out, which feed the residual stream
};

class Layers {
 public:
  // `dtype` is the parameter and activation dtype of the model.
  Layers(GraphBuilder& b, DType dtype) : b_(b), dtype_(dtype) {}

  GraphBuilder& b() { return b_; }
  DType dtype() const { return dtype_; }
  bool ok() const { return b_.status().ok(); }
  // Shape of a defined value; empty after an error.
  Shape ShapeOf(const std::string& value) const;

  // A trainable parameter / a non-trainable buffer named "<scope>.<local>".
  std::string Param(const std::string& local, const Shape& shape, const v1::InitRule& init);
  std::string Buffer(const std::string& local, const Shape& shape, const v1::InitRule& init);

  // Integer inputs (token ids, labels) of the given shape.
  std::string IndexInput(const std::string& name, const Shape& shape, const std::string& role);

  // ---- modules (each under scope `module`) ----
  // y = x w^T (+ b) with w [out, in], `in` taken from x's last dimension.
  std::string Linear(const std::string& module, const std::string& x, int64_t out, bool bias,
                     const v1::InitRule& w_init, const v1::InitRule& b_init = ZerosInit());
  std::string Embedding(const std::string& module, const std::string& ids, int64_t rows, int64_t dim,
                        const v1::InitRule& init);
  // Over the last dimension, with weight (ones) and bias (zeros).
  std::string LayerNorm(const std::string& module, const std::string& x, double eps);
  // Over the last dimension, weight only.
  std::string RmsNorm(const std::string& module, const std::string& x, double eps);
  // Square kernel; weight [out, in, k, k] (Kaiming uniform), optional bias.
  std::string Conv2d(const std::string& module, const std::string& x, int64_t out, int64_t kernel,
                     int64_t stride, int64_t padding, bool bias);

  // ---- functional pieces (nodes in the current scope) ----
  std::string Add(const std::string& a, const std::string& b) { return b_.Op("add", {a, b}); }
  std::string Mul(const std::string& a, const std::string& b) { return b_.Op("mul", {a, b}); }
  // [B, T, heads*d] -> [B, heads, T, d].
  std::string SplitHeads(const std::string& x, int64_t heads);
  // [B, heads, T, d] -> [B, T, heads*d].
  std::string MergeHeads(const std::string& x);
  // Per-head q [B,H,T,d], k/v [B,KV,T,d] (KV divides H: grouped-query) -> [B,T,H*d].
  std::string Attention(const std::string& q, const std::string& k, const std::string& v, bool causal);
  // From one fused projection [B, T, 3*hidden] laid out as (q | k | v) -> [B, T, hidden].
  std::string FusedQkvAttention(const std::string& qkv, int64_t heads, bool causal);

  // The whole block, in the current scope (push the block's path, e.g. "h.3", first).
  std::string PreLnBlock(const std::string& x, const PreLnBlockSpec& spec);

  // ---- losses (in scope "loss"; the result is also made the graph output) ----
  // cross_entropy(logits [N, C], labels [N]) in f32 whatever the model dtype.
  std::string ClassificationLoss(const std::string& logits, const std::string& labels);
  // Next-token loss: logits [B, T, V] against targets [B, T].
  std::string LanguageModelLoss(const std::string& logits, const std::string& targets);

 private:
  std::string Name(const std::string& local) const;

  GraphBuilder& b_;
  DType dtype_;
};

}  // namespace mapd

#endif  // MAPD_MODEL_ZOO_LAYERS_H_

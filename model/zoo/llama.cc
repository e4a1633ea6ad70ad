// LLaMA 2 / 3: RMSNorm pre-norm blocks, rotary positions, grouped-query attention (k/v with
// kv_heads heads), a SwiGLU feed-forward and an untied output projection.
#include "absl/strings/str_cat.h"
#include "model/zoo/family.h"
#include "model/zoo/layers.h"

namespace mapd {
namespace {

struct LlamaConfig : TransformerSizes {
  int64_t kv_heads, vocab, seq;
  double rope_theta;
};

constexpr double kNormEps = 1e-5;  // LLaMA 2 and 3 both use 1e-5

// The RoPE tables are buffers computed from theta at init, shared by every layer.
v1::InitRule RopeInit(v1::InitRule::Kind kind, double theta) {
  v1::InitRule r;
  r.set_kind(kind);
  r.set_theta(theta);
  return r;
}

// x * cos + rotate_half(x) * sin on [B, heads, T, head_dim], where
// rotate_half(x) = cat(-x[..., d/2:], x[..., :d/2]) (the Hugging Face layout of the pairs).
std::string ApplyRope(Layers& L, const std::string& x, const std::string& cos, const std::string& sin) {
  if (!L.ok()) return "";
  GraphBuilder& b = L.b();
  const int64_t d = L.ShapeOf(x).back();
  const std::string lo = b.Op("slice", {x}, Attrs().Int("dim", -1).Int("start", 0).Int("end", d / 2));
  const std::string hi = b.Op("slice", {x}, Attrs().Int("dim", -1).Int("start", d / 2).Int("end", d));
  const std::string rotated = b.Op("cat", {b.Op("neg", {hi}), lo}, Attrs().Int("dim", -1));
  // Named steps, not nested calls: argument evaluation order is unspecified in C++, and the
  // node order (and so node names) must not depend on the compiler.
  const std::string x_cos = L.Mul(x, cos);
  return L.Add(x_cos, L.Mul(rotated, sin));
}

std::string LlamaBlock(Layers& L, const LlamaConfig& c, const std::string& x, const std::string& cos,
                       const std::string& sin) {
  GraphBuilder& b = L.b();
  const v1::InitRule init = NormalInit(0.02);
  const int64_t hd = c.head_dim();
  std::string h = L.RmsNorm("attention_norm", x, kNormEps);
  {
    ScopeGuard attn(b, "attention");
    const std::string q = L.SplitHeads(L.Linear("wq", h, c.heads * hd, false, init), c.heads);
    const std::string k = L.SplitHeads(L.Linear("wk", h, c.kv_heads * hd, false, init), c.kv_heads);
    const std::string v = L.SplitHeads(L.Linear("wv", h, c.kv_heads * hd, false, init), c.kv_heads);
    // Fewer k/v heads than q heads is grouped-query attention; sdpa shares each k/v head.
    const std::string q_rot = ApplyRope(L, q, cos, sin);
    const std::string k_rot = ApplyRope(L, k, cos, sin);
    const std::string ctx = L.Attention(q_rot, k_rot, v, true);
    h = L.Linear("wo", ctx, c.hidden, false, init);
  }
  const std::string mid = L.Add(x, h);
  h = L.RmsNorm("ffn_norm", mid, kNormEps);
  {
    ScopeGuard ff(b, "feed_forward");
    const std::string gate = b.Op("silu", {L.Linear("w1", h, c.ffn, false, init)});
    const std::string up = L.Linear("w3", h, c.ffn, false, init);
    h = L.Linear("w2", L.Mul(gate, up), c.hidden, false, init);
  }
  return L.Add(mid, h);
}

absl::Status BuildLlama(ModelOptions& o, GraphBuilder& b) {
  LlamaConfig c;
  static_cast<TransformerSizes&>(c) = ReadTransformerSizes(o);
  c.kv_heads = o.Size("kv_heads");
  c.vocab = o.Size("vocab");
  c.seq = o.Size("seq");
  c.rope_theta = o.PositiveFloat("rope_theta");
  o.Require(c.heads % c.kv_heads == 0, "heads=", c.heads, " is not divisible by kv_heads=", c.kv_heads);
  o.Require(c.head_dim() % 2 == 0, "head size hidden/heads=", c.head_dim(), " must be even for rotary embeddings");
  if (!o.status().ok()) return o.status();

  Layers L(b, c.dtype);
  const std::string tokens = L.IndexInput("tokens", {c.batch, c.seq}, "tokens");
  const std::string targets = L.IndexInput("targets", {c.batch, c.seq}, "targets");
  std::string cos, sin;
  {
    ScopeGuard rope(b, "rope");
    cos = L.Buffer("cos", {c.seq, c.head_dim()}, RopeInit(v1::InitRule::ROPE_COS, c.rope_theta));
    sin = L.Buffer("sin", {c.seq, c.head_dim()}, RopeInit(v1::InitRule::ROPE_SIN, c.rope_theta));
  }
  std::string x = L.Embedding("tok_embeddings", tokens, c.vocab, c.hidden, NormalInit(0.02));
  for (int64_t i = 0; i < c.layers; ++i) {
    ScopeGuard scope(b, absl::StrCat("layers.", i));
    x = LlamaBlock(L, c, x, cos, sin);
  }
  x = L.RmsNorm("norm", x, kNormEps);
  L.LanguageModelLoss(L.Linear("output", x, c.vocab, false, NormalInit(0.02)), targets);
  return absl::OkStatus();
}

ZooEntry Llama(const char* name, const char* description, int64_t published, int64_t layers, int64_t hidden,
               int64_t heads, int64_t kv_heads, int64_t ffn, int64_t vocab, int64_t seq, const char* theta) {
  std::vector<ZooOption> o = {
      BatchOption(),
      {"layers", std::to_string(layers), "transformer blocks"},
      {"hidden", std::to_string(hidden), "model width"},
      {"heads", std::to_string(heads), "query heads (must divide hidden)"},
      {"kv_heads", std::to_string(kv_heads), "key/value heads (must divide heads; fewer = grouped-query)"},
      {"ffn", std::to_string(ffn), "SwiGLU intermediate size"},
      {"vocab", std::to_string(vocab), "vocabulary size"},
      {"seq", std::to_string(seq), "sequence length (rows of the RoPE tables)"},
      {"rope_theta", theta, "RoPE base"},
      DTypeOption(),
  };
  return {{name, "llama", description, published, std::move(o)}, BuildLlama};
}

}  // namespace

std::vector<ZooEntry> LlamaModels() {
  return {
      Llama("llama2-7b", "Llama 2 7B (Touvron et al. 2023)", 6738415616, 32, 4096, 32, 32, 11008, 32000, 4096, "10000"),
      Llama("llama2-13b", "Llama 2 13B", 13015864320, 40, 5120, 40, 40, 13824, 32000, 4096, "10000"),
      Llama("llama2-70b", "Llama 2 70B (grouped-query attention, 8 kv heads)", 68976648192, 80, 8192, 64, 8, 28672,
            32000, 4096, "10000"),
      Llama("llama3-8b", "Llama 3 8B (128K vocabulary, GQA)", 8030261248, 32, 4096, 32, 8, 14336, 128256, 8192,
            "500000"),
      Llama("llama3-70b", "Llama 3 70B", 70553706496, 80, 8192, 64, 8, 28672, 128256, 8192, "500000"),
  };
}

}  // namespace mapd

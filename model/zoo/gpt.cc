// GPT-2 / GPT-3: learned positions, pre-LN blocks with a fused qkv projection, and an LM head
// tied to the token embedding (so wte is one parameter used twice, counted once).
#include <cmath>

#include "absl/strings/str_cat.h"
#include "model/zoo/family.h"
#include "model/zoo/layers.h"

namespace mapd {
namespace {

absl::Status BuildGpt(ModelOptions& o, GraphBuilder& b) {
  const TransformerSizes t = ReadTransformerSizes(o);
  const int64_t vocab = o.Size("vocab"), seq = o.Size("seq");
  if (!o.status().ok()) return o.status();

  Layers L(b, t.dtype);
  const int64_t hidden = t.hidden;
  const std::string tokens = L.IndexInput("tokens", {t.batch, seq}, "tokens");
  const std::string targets = L.IndexInput("targets", {t.batch, seq}, "targets");
  const v1::InitRule init = NormalInit(0.02);
  std::string x = L.Embedding("wte", tokens, vocab, hidden, init);
  {
    // The graph's sequence is the full context, so all of wpe's rows are used in order and
    // the position lookup is a broadcast add of the table.
    ScopeGuard wpe(b, "wpe");
    x = L.Add(x, L.Param("weight", {seq, hidden}, init));
  }
  // GPT-2 scales the residual projections by 1/sqrt(2*layers) to keep the stream's variance.
  const PreLnBlockSpec block{{"ln_1", "attn", "c_attn", "c_proj", "ln_2", "mlp", "c_fc", "c_proj"},
                             "tanh", 1e-5, /*causal=*/true, t.heads, t.ffn, init,
                             NormalInit(0.02 / std::sqrt(2.0 * t.layers))};
  for (int64_t i = 0; i < t.layers; ++i) {
    ScopeGuard scope(b, absl::StrCat("h.", i));
    x = L.PreLnBlock(x, block);
  }
  x = L.LayerNorm("ln_f", x, 1e-5);
  std::string logits;
  {
    ScopeGuard head(b, "lm_head");
    logits = b.Op("linear", {x, "wte.weight"});  // tied: no parameter of its own, no bias
  }
  b.AddParameterAlias("wte.weight", "lm_head.weight");  // the name Hugging Face's state_dict uses
  L.LanguageModelLoss(logits, targets);
  return absl::OkStatus();
}

std::vector<ZooOption> GptOptions(int64_t layers, int64_t hidden, int64_t heads, int64_t seq) {
  std::vector<ZooOption> o = TransformerOptions(layers, hidden, heads);
  o.push_back({"vocab", "50257", "vocabulary size"});
  o.push_back({"seq", std::to_string(seq), "sequence length (also the number of position embeddings)"});
  o.push_back(DTypeOption());
  return o;
}

ZooEntry Gpt(const char* name, const char* description, int64_t published, int64_t layers, int64_t hidden,
             int64_t heads, int64_t seq) {
  return {{name, "gpt", description, published, GptOptions(layers, hidden, heads, seq)}, BuildGpt};
}

}  // namespace

std::vector<ZooEntry> GptModels() {
  return {
      Gpt("gpt2", "GPT-2 small (124M), OpenAI 2019", 124439808, 12, 768, 12, 1024),
      Gpt("gpt2-medium", "GPT-2 medium (355M)", 354823168, 24, 1024, 16, 1024),
      Gpt("gpt2-large", "GPT-2 large (774M)", 774030080, 36, 1280, 20, 1024),
      Gpt("gpt2-xl", "GPT-2 XL (1.5B)", 1557611200, 48, 1600, 25, 1024),
      Gpt("gpt3-175b", "GPT-3 175B (Brown et al. 2020), dense attention", 174600000000, 96, 12288, 96, 2048),
  };
}

}  // namespace mapd

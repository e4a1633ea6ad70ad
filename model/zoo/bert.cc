// BERT for sequence classification (Hugging Face BertForSequenceClassification names):
// word + position + token-type embeddings, post-LN encoder layers, a tanh pooler on the first
// token and a linear classifier.
#include "absl/strings/str_cat.h"
#include "model/zoo/family.h"
#include "model/zoo/layers.h"

namespace mapd {
namespace {

constexpr double kEps = 1e-12;
constexpr int64_t kTokenTypes = 2;

// BERT's "output" sub-modules: dense projection, then LayerNorm(residual + projection).
std::string DenseAddNorm(Layers& L, const std::string& x, const std::string& residual, int64_t width) {
  ScopeGuard out(L.b(), "output");
  const std::string h = L.Linear("dense", x, width, true, NormalInit(0.02));
  return L.LayerNorm("LayerNorm", L.Add(residual, h), kEps);
}

std::string BertLayer(Layers& L, const std::string& x, int64_t heads, int64_t ffn) {
  GraphBuilder& b = L.b();
  const v1::InitRule init = NormalInit(0.02);
  const int64_t hidden = L.ShapeOf(x).back();
  std::string h;
  {
    ScopeGuard attn(b, "attention");
    std::string ctx;
    {
      ScopeGuard self(b, "self");
      const std::string q = L.SplitHeads(L.Linear("query", x, hidden, true, init), heads);
      const std::string k = L.SplitHeads(L.Linear("key", x, hidden, true, init), heads);
      const std::string v = L.SplitHeads(L.Linear("value", x, hidden, true, init), heads);
      ctx = L.Attention(q, k, v, false);  // every token is real: no padding mask
    }
    h = DenseAddNorm(L, ctx, x, hidden);
  }
  std::string inner;
  {
    ScopeGuard inter(b, "intermediate");
    inner = b.Op("gelu", {L.Linear("dense", h, ffn, true, init)});
  }
  return DenseAddNorm(L, inner, h, hidden);
}

absl::Status BuildBert(ModelOptions& o, GraphBuilder& b) {
  const TransformerSizes t = ReadTransformerSizes(o);
  const int64_t vocab = o.Size("vocab"), seq = o.Size("seq"), classes = o.Size("classes");
  if (!o.status().ok()) return o.status();

  Layers L(b, t.dtype);
  const int64_t batch = t.batch, hidden = t.hidden;
  const v1::InitRule init = NormalInit(0.02);
  const std::string tokens = L.IndexInput("tokens", {batch, seq}, "tokens");
  const std::string segments = L.IndexInput("segments", {batch, seq}, "segments");
  const std::string labels = L.IndexInput("labels", {batch}, "labels");
  std::string pooled;
  {
    ScopeGuard bert(b, "bert");
    std::string x;
    {
      ScopeGuard emb(b, "embeddings");
      x = L.Embedding("word_embeddings", tokens, vocab, hidden, init);
      {
        ScopeGuard pos(b, "position_embeddings");  // all seq rows, in order: a broadcast add
        x = L.Add(x, L.Param("weight", {seq, hidden}, init));
      }
      x = L.Add(x, L.Embedding("token_type_embeddings", segments, kTokenTypes, hidden, init));
      x = L.LayerNorm("LayerNorm", x, kEps);
    }
    for (int64_t i = 0; i < t.layers; ++i) {
      ScopeGuard scope(b, absl::StrCat("encoder.layer.", i));
      x = BertLayer(L, x, t.heads, t.ffn);
    }
    ScopeGuard pool(b, "pooler");
    const std::string first = b.Op("select", {x}, Attrs().Int("dim", 1).Int("index", 0));
    pooled = b.Op("tanh", {L.Linear("dense", first, hidden, true, init)});
  }
  L.ClassificationLoss(L.Linear("classifier", pooled, classes, true, init), labels);
  return absl::OkStatus();
}

}  // namespace

std::vector<ZooEntry> BertModels() {
  std::vector<ZooOption> o = TransformerOptions(24, 1024, 16);
  o.push_back({"vocab", "30522", "vocabulary size"});
  o.push_back({"seq", "512", "sequence length (also the number of position embeddings)"});
  o.push_back({"classes", "2", "classifier outputs"});
  o.push_back(DTypeOption());
  return {{{"bert-large", "bert", "BERT-Large uncased (Devlin et al. 2018) with a sequence classifier", 335143938,
            std::move(o)},
           BuildBert}};
}

}  // namespace mapd

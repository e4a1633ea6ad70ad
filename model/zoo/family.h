// What each model family (gpt.cc, llama.cc, ...) gives the zoo table in zoo.cc.
#ifndef MAPD_MODEL_ZOO_FAMILY_H_
#define MAPD_MODEL_ZOO_FAMILY_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "model/graph/builder.h"
#include "model/zoo/model_spec.h"
#include "model/zoo/zoo.h"

namespace mapd {

// Reads the family's options, then adds the whole model to the builder (inputs, parameters,
// nodes, the loss output). Returns an option error; graph errors stay sticky in the builder.
using ZooBuildFn = absl::Status (*)(ModelOptions& options, GraphBuilder& b);

struct ZooEntry {
  ZooModelInfo info;
  ZooBuildFn build;
};

std::vector<ZooEntry> GptModels();
std::vector<ZooEntry> LlamaModels();
std::vector<ZooEntry> BertModels();
std::vector<ZooEntry> VitModels();
std::vector<ZooEntry> ResnetModels();
std::vector<ZooEntry> MlpModels();

// Options every model has; families put them first so that listings line up.
inline ZooOption BatchOption() { return {"batch", "1", "samples per step"}; }
inline ZooOption DTypeOption() { return {"dtype", "f32", "parameter and activation dtype (f32, bf16)"}; }
// Transformer sizes shared by the GPT, BERT and ViT tables.
inline std::vector<ZooOption> TransformerOptions(int64_t layers, int64_t hidden, int64_t heads) {
  return {BatchOption(),
          {"layers", std::to_string(layers), "transformer blocks"},
          {"hidden", std::to_string(hidden), "model width"},
          {"heads", std::to_string(heads), "attention heads (must divide hidden)"},
          {"ffn", "auto", "MLP intermediate size; auto = 4*hidden"}};
}

struct TransformerSizes {
  int64_t batch, layers, hidden, heads, ffn;
  DType dtype;
  int64_t head_dim() const { return hidden / heads; }
};

// Reads the TransformerOptions keys and dtype, and checks that heads divides hidden.
inline TransformerSizes ReadTransformerSizes(ModelOptions& o) {
  TransformerSizes s;
  s.batch = o.Size("batch");
  s.layers = o.Layers("layers");
  s.hidden = o.Size("hidden");
  s.heads = o.Size("heads");
  s.ffn = o.SizeOr("ffn", 4 * s.hidden);
  s.dtype = o.FloatDType("dtype");
  o.Require(s.hidden % s.heads == 0, "hidden=", s.hidden, " is not divisible by heads=", s.heads);
  return s;
}

}  // namespace mapd

#endif  // MAPD_MODEL_ZOO_FAMILY_H_

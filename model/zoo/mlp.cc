// A plain multi-layer perceptron (Linear+ReLU stack, nn.Sequential names "net.0", "net.2", ...):
// the smallest zoo model, for tests and quick end-to-end runs.
#include "absl/strings/str_cat.h"
#include "model/zoo/family.h"
#include "model/zoo/layers.h"

namespace mapd {
namespace {

absl::Status BuildMlp(ModelOptions& o, GraphBuilder& b) {
  const int64_t batch = o.Size("batch"), in = o.Size("in"), hidden = o.Size("hidden");
  const int64_t layers = o.Layers("layers"), out = o.Size("out");
  const DType dtype = o.FloatDType("dtype");
  if (!o.status().ok()) return o.status();

  Layers L(b, dtype);
  std::string x = b.Input("features", TensorType{dtype, {batch, in}}, "features");
  const std::string labels = L.IndexInput("labels", {batch}, "labels");
  int64_t width = in;
  // PyTorch's default nn.Linear init, since this is the model people train from scratch.
  for (int64_t i = 0; i < layers; ++i) {
    x = L.Linear(absl::StrCat("net.", 2 * i), x, hidden, true, KaimingUniformInit(width), FanInBiasInit(width));
    ScopeGuard relu(b, absl::StrCat("net.", 2 * i + 1));
    x = b.Op("relu", {x});
    width = hidden;
  }
  x = L.Linear(absl::StrCat("net.", 2 * layers), x, out, true, KaimingUniformInit(width), FanInBiasInit(width));
  L.ClassificationLoss(x, labels);
  return absl::OkStatus();
}

}  // namespace

std::vector<ZooEntry> MlpModels() {
  std::vector<ZooOption> o = {
      BatchOption(),
      {"in", "784", "input features"},
      {"hidden", "1024", "width of each hidden layer"},
      {"layers", "3", "hidden layers (Linear+ReLU)"},
      {"out", "10", "classes"},
      DTypeOption(),
  };
  return {{{"mlp", "mlp", "Linear+ReLU classifier (MNIST-sized by default)", 0, std::move(o)}, BuildMlp}};
}

}  // namespace mapd

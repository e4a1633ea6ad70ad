#include "model/graph/loss.h"

#include "absl/strings/str_cat.h"
#include "model/graph/builder.h"
#include "model/ir/tensor_type.h"

namespace mapd {

absl::StatusOr<LossKind> ParseLossKind(const std::string& name) {
  if (name == "auto") return LossKind::kAuto;
  if (name == "output") return LossKind::kOutput;
  if (name == "cross_entropy" || name == "ce") return LossKind::kCrossEntropy;
  if (name == "mse") return LossKind::kMse;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown loss '", name, "': use auto, output, cross_entropy or mse"));
}

namespace {

TensorType OutputType(const v1::Graph& g, const std::string& name) {
  for (const auto& v : g.values()) {
    if (v.name() == name) return TensorType::FromProto(v.type());
  }
  for (const auto& in : g.inputs()) {
    if (in.name() == name) return TensorType::FromProto(in.type());
  }
  return {};
}

int FirstScalarLoss(const v1::Graph& g) {
  for (int i = 0; i < g.outputs_size(); ++i) {
    const TensorType t = OutputType(g, g.outputs(i));
    if (t.rank() == 0 && IsFloating(t.dtype)) return i;
  }
  return -1;
}

std::string UniqueInputName(const v1::Graph& g, const std::string& base) {
  std::string name = base;
  for (int k = 1;; ++k) {
    bool taken = false;
    for (const auto& in : g.inputs()) taken |= in.name() == name;
    for (const auto& v : g.values()) taken |= v.name() == name;
    for (const auto& p : g.parameters()) taken |= p.name() == name;
    if (!taken) return name;
    name = absl::StrCat(base, "_", k);
  }
}

}  // namespace

absl::StatusOr<v1::Graph> WithTrainingLoss(v1::Graph graph, LossKind kind, int output) {
  if (graph.outputs_size() == 0) return absl::InvalidArgumentError("the graph has no outputs to train on");
  const int scalar = FirstScalarLoss(graph);
  if (kind == LossKind::kOutput || (kind == LossKind::kAuto && scalar >= 0 && output < 0)) {
    const int pick = output >= 0 ? output : scalar;
    if (pick < 0 || pick >= graph.outputs_size()) {
      return absl::InvalidArgumentError("--loss output: the model returns no floating-point scalar to use as the loss");
    }
    const TensorType t = OutputType(graph, graph.outputs(pick));
    if (t.rank() != 0 || !IsFloating(t.dtype)) {
      return absl::InvalidArgumentError(absl::StrCat("output ", pick, " ('", graph.outputs(pick), "') is ", t.ToString(),
                                                     ", not a floating-point scalar loss"));
    }
    const std::string loss = graph.outputs(pick);
    graph.clear_outputs();
    graph.add_outputs(loss);
    return graph;
  }
  int pick = output;
  if (pick < 0) {
    for (int i = 0; i < graph.outputs_size() && pick < 0; ++i) {
      const TensorType t = OutputType(graph, graph.outputs(i));
      if (IsFloating(t.dtype) && t.rank() >= 1) pick = i;
    }
  }
  if (pick < 0 || pick >= graph.outputs_size()) {
    return absl::InvalidArgumentError("the model returns no floating-point tensor to attach a loss to");
  }
  const std::string pred = graph.outputs(pick);
  const TensorType t = OutputType(graph, pred);
  const std::string targets_name = UniqueInputName(graph, "targets");
  GraphBuilder b = GraphBuilder::Extend(std::move(graph));
  b.ClearOutputs();
  ScopeGuard scope(b, "loss");
  std::string loss;
  if (kind == LossKind::kMse) {
    const std::string targets = b.Input(targets_name, t, "targets");
    loss = b.Op("mse_loss", {pred, targets});
  } else {
    if (t.rank() < 1) return absl::InvalidArgumentError(absl::StrCat("output '", pred, "' is a scalar; cross_entropy needs logits"));
    const int64_t classes = t.shape.back();
    Shape target_shape(t.shape.begin(), t.shape.end() - 1);
    const std::string targets = b.Input(targets_name, {v1::INT64, target_shape}, "targets");
    std::string logits = pred, flat_targets = targets;
    if (t.rank() > 2) {  // [B, T, C] → [B*T, C]: class-last logits, as language models give
      logits = b.Op("reshape", {pred}, Attrs().Ints("shape", {-1, classes}));
      flat_targets = b.Op("reshape", {targets}, Attrs().Ints("shape", {-1}));
    }
    loss = b.Op("cross_entropy", {logits, flat_targets});
  }
  b.Output(loss);
  return b.Build();
}

}  // namespace mapd

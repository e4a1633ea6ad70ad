// Pipeline stages as graphs (DESIGN §6b): a training graph seen as a sequence of layers, and
// the graph of one stage — a contiguous range of those layers — that the planner costs, and the
// lowering and runtime execute, as they do a whole model.
//
// The sequence: the graph's repeated layers ("h.0" … "h.95", by their node scopes) in order.
// Nodes outside any layer go with the stage of the latest layer they read from, so what comes
// before the first layer (the embedding, the prologue) is in stage 0 and what comes after the
// last (the final norm, the LM head and the loss, the epilogue) in the last stage.
//
// A stage graph holds its nodes in the original order and names, and:
//   inputs      the values it reads from earlier stages (the residual stream; role "activation"
//               when it needs a gradient, which the stage's backward returns to the sender),
//               then the original graph inputs it reads (tokens, targets)
//   parameters  every parameter it reads — a weight tied between the first and the last stage
//               (the embedding and the LM head) is in both, its gradient summed between them
//   outputs     the values later stages read (the next stage's inputs, in definition order);
//               the last stage's are the graph's own (the loss first)
// Values that depend on no parameter and no layer — only graph inputs and constants (a causal
// mask, rotary tables, the targets flattened) — are made again in every stage that reads them
// rather than sent: the nodes that make them are copied, and the inputs they read fed there.
#ifndef MAPD_PLANNER_PLAN_STAGES_H_
#define MAPD_PLANNER_PLAN_STAGES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/ir/graph.h"

namespace mapd {

// The role of a stage graph's input that an earlier stage sends and whose gradient goes back.
inline constexpr char kActivationRole[] = "activation";

struct LayerSequence {
  std::vector<std::string> layers;   // the repeated layers, in graph order
  // Per graph node: the layer (index into `layers`) whose stage holds it.
  std::vector<int> layer_of;
  // Per node: it depends on no parameter and no layer, only on graph inputs and constants (made
  // again in every stage that needs it).
  std::vector<bool> replicable;
  // Per layer: a key equal for layers whose nodes are alike (same ops, attributes and types in
  // the same order, names without layer indices) — stages of alike layers cost alike.
  std::vector<std::string> layer_kind;
  // The values that need a gradient (from trainable parameters forward).
  std::vector<bool> node_needs_grad;  // per node: any of its inputs does
  int num_layers() const { return static_cast<int>(layers.size()); }
};

// FAILED_PRECONDITION when the graph has no repeated layers (nothing to cut), or a layer reads a
// value of a later layer (the scopes are not a sequence), naming the node.
absl::StatusOr<LayerSequence> FindLayerSequence(const Graph& graph);

// The graph of the stage holding layers [first_layer, end_layer), verified through the
// registry. INVALID_ARGUMENT for an empty or out-of-range layer range.
absl::StatusOr<Graph> StageGraph(const Graph& graph, const LayerSequence& sequence, int first_layer, int end_layer);

// The names of the parameters both stages read (tied weights split across stages).
std::vector<std::string> SharedParameters(const Graph& a, const Graph& b);

}  // namespace mapd

#endif  // MAPD_PLANNER_PLAN_STAGES_H_

// The cost graph of a plan: for every node its strategies (from the registry's sharding rules)
// with the seconds and bytes each costs on the cluster, and for every producer→consumer edge the
// seconds of resharding between their choices — as a SolverRequest for the strategy ILP.
//
// One decision per node, which FoldRepeatedLayers then shares across repeated layers; memory per
// strategy is the node's parameters with their gradients and optimizer states (ZeRO-sharded
// over the parameter's data-parallel axes when asked) plus what autograd keeps for it, all as
// sharded — summed over nodes, the profiler's peak at the start of backward.
//
// Building is memoised: nodes with the same op, attributes, input types and gradient/parameter
// roles (every layer of a transformer) share one strategy list and one cost row, and edges
// between such nodes share one resharding matrix, so a 80-layer model costs about as much to
// build as one layer.
#ifndef MAPD_PLANNER_PLAN_COST_GRAPH_H_
#define MAPD_PLANNER_PLAN_COST_GRAPH_H_

#include <array>
#include <functional>
#include <map>
#include <tuple>
#include <unordered_map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/ir/graph.h"
#include "planner/profile/layers.h"
#include "planner/profile/profile_options.h"
#include "planner/sharding/cluster.h"
#include "planner/sharding/collectives.h"
#include "planner/sharding/strategies.h"
#include "proto/mapd/v1/solver.pb.h"

namespace mapd {

struct CostGraphOptions {
  // ZeRO stage over each parameter's data-parallel axes — the axes on which a strategy holds
  // the parameter replicated while splitting its work. 0: nothing sharded; 1: optimizer states
  // sharded over those axes; 2: also gradients (reduce-scatter + all-gather cost what the
  // all-reduce did); 3: also the parameters, gathered before use in forward and again in
  // backward (1.5× the all-reduce traffic), with the two largest gathered parameters live at
  // once (charged as fixed memory).
  int zero_stage = 0;
  // Micro-batches per step (DESIGN §6a): the graph costed is one micro-batch's (micro_batch.h),
  // run `micro_batches` times a step. Its compute, its activations' collectives and every
  // resharding edge count once per micro-batch; parameter gradients are accumulated and reduced
  // once a step — ZeRO 0 one all-reduce, ZeRO 1 one reduce-scatter and one all-gather of the
  // updated shards. ZeRO 2 keeps gradients sharded, so each micro-batch's are reduce-scattered
  // into the shard (m reduce-scatters, one all-gather); ZeRO 3 also gathers the parameters for
  // each micro-batch's forward and backward (2m all-gathers). Keeping ZeRO-3's parameters
  // gathered across the micro-batches costs what ZeRO 1 does (one gather, one reduce-scatter;
  // whole parameters and gradients live), so it is ZeRO 1 in the search. Memory: one
  // micro-batch's activations; parameters, gradients and states as the stage keeps them.
  int64_t micro_batches = 1;
  // Micro-batches whose activations are alive at once: 1 when each pass's backward follows its
  // forward; a pipeline stage i of p under 1F1B keeps min(p − i, m) (DESIGN §6b). Activation
  // bytes (and what recomputing a layer saves) count this many times; a layer made again in
  // backward is one micro-batch's.
  int64_t activations_in_flight = 1;

  absl::Status Validate() const;
};

// Bytes per device of `t` held with placement `p` (the whole tensor for an empty placement).
int64_t LocalBytes(const TensorType& t, const Placement& p, const Cluster& cluster);

// What one node costs under one strategy, split for reports.
struct StrategyCost {
  double compute_seconds = 0;  // roofline on local shapes, forward + backward
  double forward_seconds = 0;  // its forward part (what recomputation runs again)
  double comm_seconds = 0;     // the node's own collectives (gradient all-reduce, ZeRO gathers)
  std::array<double, 4> comm_bytes{};  // by CollectiveKind, bytes each device sends/receives (B)
  // The part of comm_seconds paid once a step, not once per micro-batch: the parameter
  // gradients' reduction after the last backward (a pipeline overlaps the rest with its passes).
  double once_seconds = 0;
  double parameter_bytes = 0, gradient_bytes = 0, optimizer_bytes = 0, activation_bytes = 0;

  double seconds() const { return compute_seconds + comm_seconds; }
  double memory() const { return parameter_bytes + gradient_bytes + optimizer_bytes + activation_bytes; }
};

// Where a solver edge comes from: output `output` of node `src` read as input `input` of `dst`.
struct EdgePort {
  int src = 0, output = 0, dst = 0, input = 0;
  bool needs_grad = false;  // the gradient flows back (resharded the other way)
};

// A read-only list that nodes costing alike share (copying it copies a pointer): a model's
// repeated layers hold one strategy list and one cost row per kind of node.
template <typename T>
class SharedList {
 public:
  SharedList() = default;
  explicit SharedList(std::vector<T> items) : items_(std::make_shared<const std::vector<T>>(std::move(items))) {}
  const T& operator[](size_t i) const { return (*items_)[i]; }
  size_t size() const { return items_ ? items_->size() : 0; }
  bool empty() const { return size() == 0; }
  // Lists copied from one another share this (nullptr for an empty one).
  const void* id() const { return items_.get(); }
  typename std::vector<T>::const_iterator begin() const { return items_ ? items_->begin() : Empty().begin(); }
  typename std::vector<T>::const_iterator end() const { return items_ ? items_->end() : Empty().end(); }

 private:
  static const std::vector<T>& Empty() {
    static const std::vector<T> empty;
    return empty;
  }
  std::shared_ptr<const std::vector<T>> items_;
};

struct FoldedCostGraph;

struct CostGraph {
  // Per graph node its strategies and their cost rows (`costs`, at `zero_stage`), and per edge
  // between nodes its ports and resharding seconds (edges between alike nodes share one matrix).
  // Nothing is copied per node: a cost graph is built per mesh shape, micro-batch count and ZeRO
  // stage, and the search folds it (FoldRepeatedLayers) before solving. SolverRequest() is the
  // whole, unfolded problem — what tests solve.
  std::vector<SharedList<double>> edge_costs;     // per edge: [i * k_dst + j]
  std::vector<SharedList<Strategy>> strategies;   // per graph node
  std::vector<SharedList<StrategyCost>> costs;    // per graph node, per strategy
  std::vector<EdgePort> edge_ports;               // per edge: its ends (node v is graph node v)
  int64_t micro_batches = 1;                      // passes per step (CostGraphOptions)
  int64_t activations_in_flight = 1;              // CostGraphOptions
  // Per graph node, its name without layer indices (FoldRepeatedLayers' key), shared by the cost
  // graphs of one graph.
  std::shared_ptr<const std::vector<std::string>> layer_keys;
  // The graph's repeated layers and each node's (IndexLayers), shared by the cost graphs of one
  // graph; null: the recompute groups make it when they need it.
  std::shared_ptr<const LayerIndex> layer_index;
  // Per graph node, its costs under each ZeRO stage 0–3 (`costs` is the built stage's), so that
  // a choice can be priced, and the cost graph rebuilt, at another stage without costing the
  // strategies and edges again (PriceAtStage, AtZeroStage). Empty in restricted cost graphs.
  std::vector<std::array<SharedList<StrategyCost>, 4>> costs_at_stage;
  // memory_fixed under each ZeRO stage (stage 3's gathered parameters).
  std::array<double, 4> fixed_at_stage{};
  int zero_stage = 0;  // the stage `costs` and `memory_fixed` are for
  double memory_fixed = 0;  // bytes on every device whatever the choice (ZeRO-3's gathered parameters)
  // FoldRepeatedLayers' answer, made once (FoldedOf).
  mutable std::shared_ptr<const FoldedCostGraph> folded;

  // The whole solver problem, unfolded: a node per graph node, an edge per edge, with their costs.
  v1::SolverRequest SolverRequest() const;
};

// What BuildCostGraph computes per kind of node and of edge, kept between the cost graphs of one
// mesh and micro-batch count that are built from different graphs of alike nodes (the pipeline
// search's stage graphs: the same layers in other ranges, at other depths): a node signature's
// strategies with their costs at every ZeRO stage (per micro-batches in flight), and an edge
// kind's resharding seconds. The caller keeps one memo per (cluster, options, micro-batches).
struct CostGraphMemo {
  struct NodeEntry {
    SharedList<Strategy> strategies;
    std::array<SharedList<StrategyCost>, 4> costs;  // per ZeRO stage
  };
  std::unordered_map<std::string, NodeEntry> nodes;  // signature "#" in flight
  // (producer signature, output, consumer signature, input, gradient flows back)
  std::map<std::tuple<std::string, int, std::string, int, bool>, SharedList<double>> edges;
};

struct PreparedNode;
// What BuildCostGraph computes for one kind of node: its strategies on the cluster's mesh and
// their costs at every ZeRO stage (`cost_options`' stage aside), from `memo` when known there and
// kept in it. With `only_stage` ≥ 0, only that stage's costs (the others empty), not kept.
absl::StatusOr<CostGraphMemo::NodeEntry> CostNodeKind(const PreparedNode& node, const Cluster& cluster,
                                                      const ProfileOptions& options, const CostGraphOptions& cost_options,
                                                      CostGraphMemo* memo = nullptr, int only_stage = -1);
// And for one kind of edge (`port` of a value of `type` from `src` to `dst`): its resharding
// seconds per (producer strategy, consumer strategy), `passes` times a step.
SharedList<double> CostEdgeKind(const TensorType& type, const EdgePort& port, const PreparedNode& src,
                                const SharedList<Strategy>& src_strategies, const PreparedNode& dst,
                                const SharedList<Strategy>& dst_strategies, const Cluster& cluster, double passes,
                                CostGraphMemo* memo = nullptr);

// The graph's edges between nodes, in node and input order: each with its value's type and
// whether a gradient flows back (the producer's output needs one).
struct NodeEdge {
  EdgePort port;
  const TensorType* type = nullptr;  // the graph's
};
std::vector<NodeEdge> NodeEdges(const Graph& graph, const std::vector<std::unique_ptr<PreparedNode>>& prepared);

// The bytes every device holds whatever the choice, per ZeRO stage: ZeRO-3 gathers a parameter
// before use and frees it after; with the next one prefetched, two gathered parameters are live
// at once (the largest two bound it).
std::array<double, 4> FixedBytesAtStage(const std::vector<std::unique_ptr<PreparedNode>>& prepared);

// A folded solver node's cost and memory rows from its strategies' costs.
void AddCostRows(const SharedList<StrategyCost>& costs, v1::SolverNode* node);
// An edge both of whose ends are one folded node (they share a decision): only the diagonal of
// its `seconds` (same strategy at both ends) can occur, folded into the node's costs, `share`
// times (the edge's multiplicity over the node's).
void FoldDiagonalIntoNode(const SharedList<double>& seconds, double share, v1::SolverNode* node);

// The layer-free names of a graph's nodes (LayerFreeName), for BuildCostGraph to share.
std::shared_ptr<const std::vector<std::string>> LayerKeys(const Graph& graph);

// Repeated layers share decisions: nodes whose names differ only in layer indices
// ("layers.3.attention/linear" and "layers.7.attention/linear") and whose strategies and costs
// are identical become one solver node with a multiplicity, and their edges fold likewise —
// a 80-layer model solves as one layer.
struct FoldedCostGraph {
  v1::SolverRequest request;     // the folded problem
  std::vector<int> class_of;     // per graph node: its solver node in `request`
  std::vector<int> edge_of;      // per cost-graph edge: its folded edge (-1: folded into a node)
  // The per-node choice that a folded choice stands for.
  std::vector<int> Expand(const std::vector<int>& folded_choice) const;
};
FoldedCostGraph FoldRepeatedLayers(const Graph& graph, const CostGraph& cost_graph);
// The same, folded on first use and kept with the cost graph (which must not change after).
const FoldedCostGraph& FoldedOf(const Graph& graph, const CostGraph& cost_graph);

// Costs seconds of compute on local shapes (roofline, the cluster's device), the gradient
// all-reduce of every input a strategy computes differently per rank while holding it
// replicated (data parallelism is this rule applied to parameters), and resharding on edges
// (forward, and the gradient's way back).
absl::StatusOr<CostGraph> BuildCostGraph(const Graph& graph, const Cluster& cluster, const ProfileOptions& options,
                                         const CostGraphOptions& cost_options = {});
// The same from the graph's prepared nodes (prepared_graph.h), which callers building many cost
// graphs of one graph (meshes, ZeRO stages) prepare once.
struct PreparedNode;
absl::StatusOr<CostGraph> BuildCostGraph(const Graph& graph, const std::vector<std::unique_ptr<PreparedNode>>& prepared,
                                         const Cluster& cluster, const ProfileOptions& options,
                                         const CostGraphOptions& cost_options = {},
                                         std::shared_ptr<const std::vector<std::string>> layer_keys = nullptr,
                                         CostGraphMemo* memo = nullptr);

// Which of node n's strategies a restricted cost graph keeps (a baseline's family).
using StrategyFilter = std::function<std::vector<bool>(int node, const SharedList<Strategy>& strategies)>;
// RestrictStrategies(BuildCostGraph(...), allow's masks), built without costing what the filter
// drops: only the kept strategies' edges are costed (a baseline's family keeps a few of a 2-D
// mesh's tens). `memo` serves and keeps the nodes' whole kinds only.
absl::StatusOr<CostGraph> BuildRestrictedCostGraph(const Graph& graph, const std::vector<std::unique_ptr<PreparedNode>>& prepared,
                                                   const Cluster& cluster, const ProfileOptions& options,
                                                   const CostGraphOptions& cost_options,
                                                   std::shared_ptr<const std::vector<std::string>> layer_keys,
                                                   CostGraphMemo* memo, const StrategyFilter& allow);

// Keeps, per node, only the strategies `allowed[node][k]` marks (a node with none allowed is
// FAILED_PRECONDITION naming it); edges keep the matching rows and columns.
absl::StatusOr<CostGraph> RestrictStrategies(const CostGraph& cost_graph, const Graph& graph,
                                             const std::vector<std::vector<bool>>& allowed);

// A whole choice (one strategy per graph node) costed for reports.
struct ChoiceCost {
  double step_seconds = 0;     // the ILP's objective for the choice
  double compute_seconds = 0;
  double comm_seconds = 0;     // node collectives + resharding
  double once_seconds = 0;     // of which paid once a step (StrategyCost::once_seconds)
  std::array<double, 4> comm_bytes{};  // by CollectiveKind, per device
  double parameter_bytes = 0, gradient_bytes = 0, optimizer_bytes = 0, activation_bytes = 0;
  double fixed_bytes = 0;      // the request's fixed part (ZeRO-3's gathered parameters)
  // Activation checkpointing: the forward run again (in step_seconds) and the bytes it changes
  // (negative: saved) — the activations no longer kept, less the checkpoints, plus one layer's
  // activations made again during its backward.
  double recompute_seconds = 0, recompute_bytes = 0;
  double peak_bytes() const {
    return parameter_bytes + gradient_bytes + optimizer_bytes + activation_bytes + fixed_bytes + recompute_bytes;
  }
};
// The objective (seconds) and memory (bytes, fixed part included) of a choice as if the cost
// graph had been built at ZeRO `stage` (StrategyCost::seconds_at_stage).
struct StagePrice {
  double seconds = 0, memory = 0;
};
StagePrice PriceAtStage(const CostGraph& cost_graph, const std::vector<int>& choice, int stage);
// The same cost graph at another ZeRO stage (strategies and edges shared, node costs and the
// fixed memory of that stage). FAILED_PRECONDITION for a restricted cost graph.
absl::StatusOr<CostGraph> AtZeroStage(const CostGraph& cost_graph, int stage);
// A lower bound on the memory of every choice at ZeRO `stage`, whatever is recomputed: every
// node's parameters, gradients and optimizer states at their smallest, plus the fixed part.
double LeastStateMemory(const CostGraph& cost_graph, int stage);

absl::StatusOr<ChoiceCost> CostChoice(const Graph& graph, const Cluster& cluster, const CostGraph& cost_graph,
                                      const std::vector<int>& choice);

}  // namespace mapd

#endif  // MAPD_PLANNER_PLAN_COST_GRAPH_H_

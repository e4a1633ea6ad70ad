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
#include <vector>

#include "absl/status/statusor.h"
#include "planner/ir/graph.h"
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

  absl::Status Validate() const;
};

// The type a tensor is trained in: under bf16 mixed precision floating tensors (weights,
// activations, gradients) are bf16; fp32 master weights and optimizer states are counted apart.
TensorType TrainedType(const TensorType& t, Precision precision);
// Bytes per device of `t` held with placement `p` (the whole tensor for an empty placement).
int64_t LocalBytes(const TensorType& t, const Placement& p, const Cluster& cluster);

// What one node costs under one strategy, split for reports.
struct StrategyCost {
  double compute_seconds = 0;  // roofline on local shapes, forward + backward
  double forward_seconds = 0;  // its forward part (what recomputation runs again)
  double comm_seconds = 0;     // the node's own collectives (gradient all-reduce, ZeRO gathers)
  std::array<double, 4> comm_bytes{};  // by CollectiveKind, bytes each device sends/receives (B)
  double parameter_bytes = 0, gradient_bytes = 0, optimizer_bytes = 0, activation_bytes = 0;

  double seconds() const { return compute_seconds + comm_seconds; }
  double memory() const { return parameter_bytes + gradient_bytes + optimizer_bytes + activation_bytes; }
};

// Where a solver edge comes from: output `output` of node `src` read as input `input` of `dst`.
struct EdgePort {
  int src = 0, output = 0, dst = 0, input = 0;
  bool needs_grad = false;  // the gradient flows back (resharded the other way)
};

struct CostGraph {
  v1::SolverRequest request;                      // node v of the request is graph node v
  std::vector<std::vector<Strategy>> strategies;  // per graph node
  std::vector<std::vector<StrategyCost>> costs;   // per graph node, per strategy
  std::vector<EdgePort> edge_ports;               // per request edge
};

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

// Costs seconds of compute on local shapes (roofline, the cluster's device), the gradient
// all-reduce of every input a strategy computes differently per rank while holding it
// replicated (data parallelism is this rule applied to parameters), and resharding on edges
// (forward, and the gradient's way back).
absl::StatusOr<CostGraph> BuildCostGraph(const Graph& graph, const Cluster& cluster, const ProfileOptions& options,
                                         const CostGraphOptions& cost_options = {});

// Keeps, per node, only the strategies `allowed[node][k]` marks (a node with none allowed is
// FAILED_PRECONDITION naming it); edges keep the matching rows and columns.
absl::StatusOr<CostGraph> RestrictStrategies(const CostGraph& cost_graph, const Graph& graph,
                                             const std::vector<std::vector<bool>>& allowed);

// A whole choice (one strategy per graph node) costed for reports.
struct ChoiceCost {
  double step_seconds = 0;     // the ILP's objective for the choice
  double compute_seconds = 0;
  double comm_seconds = 0;     // node collectives + resharding
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
absl::StatusOr<ChoiceCost> CostChoice(const Graph& graph, const Cluster& cluster, const CostGraph& cost_graph,
                                      const std::vector<int>& choice);

}  // namespace mapd

#endif  // MAPD_PLANNER_PLAN_COST_GRAPH_H_

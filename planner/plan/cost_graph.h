// The cost graph of a plan: for every node its strategies (from the registry's sharding rules)
// with the seconds and bytes each costs on the cluster, and for every producer→consumer edge the
// seconds of resharding between their choices — as a SolverRequest for the strategy ILP.
//
// First cut (not yet the whole of DESIGN §6): one decision per node, which FoldRepeatedLayers
// then shares across repeated layers (followers are not merged into producers yet); memory per
// strategy is the node's
// parameters with their gradients and optimizer states plus what autograd keeps for it, all as
// sharded — summed over nodes, the profiler's peak at the start of backward.
#ifndef MAPD_PLANNER_PLAN_COST_GRAPH_H_
#define MAPD_PLANNER_PLAN_COST_GRAPH_H_

#include <vector>

#include "absl/status/statusor.h"
#include "planner/ir/graph.h"
#include "planner/profile/profile_options.h"
#include "planner/sharding/cluster.h"
#include "planner/sharding/strategies.h"
#include "proto/mapd/v1/solver.pb.h"

namespace mapd {

struct CostGraph {
  v1::SolverRequest request;                 // node v of the request is graph node v
  std::vector<std::vector<Strategy>> strategies;  // per graph node
};

// Repeated layers share decisions: nodes whose names differ only in layer indices
// ("layers.3.attention/linear" and "layers.7.attention/linear") and whose strategies and costs
// are identical become one solver node with a multiplicity, and their edges fold likewise —
// a 80-layer model solves as one layer.
struct FoldedCostGraph {
  v1::SolverRequest request;     // the folded problem
  std::vector<int> class_of;     // per graph node: its solver node in `request`
  // The per-node choice that a folded choice stands for.
  std::vector<int> Expand(const std::vector<int>& folded_choice) const;
};
FoldedCostGraph FoldRepeatedLayers(const Graph& graph, const CostGraph& cost_graph);

// Costs seconds of compute on local shapes (roofline, the cluster's device), the gradient
// all-reduce of every input a strategy computes differently per rank while holding it
// replicated (data parallelism is this rule applied to parameters), and resharding on edges
// (forward, and the gradient's way back).
absl::StatusOr<CostGraph> BuildCostGraph(const Graph& graph, const Cluster& cluster, const ProfileOptions& options);

}  // namespace mapd

#endif  // MAPD_PLANNER_PLAN_COST_GRAPH_H_

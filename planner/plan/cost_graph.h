// The cost graph of a plan: for every node its strategies (from the registry's sharding rules)
// with the seconds and bytes each costs on the cluster, and for every producer→consumer edge the
// seconds of resharding between their choices — as a SolverRequest for the strategy ILP.
//
// First cut (not yet the whole of DESIGN §6): one decision per node (followers are not merged
// into producers, repeated layers do not share decisions yet); memory per strategy is the node's
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

// Costs seconds of compute on local shapes (roofline, the cluster's device), the gradient
// all-reduce of every input a strategy computes differently per rank while holding it
// replicated (data parallelism is this rule applied to parameters), and resharding on edges
// (forward, and the gradient's way back).
absl::StatusOr<CostGraph> BuildCostGraph(const Graph& graph, const Cluster& cluster, const ProfileOptions& options);

}  // namespace mapd

#endif  // MAPD_PLANNER_PLAN_COST_GRAPH_H_

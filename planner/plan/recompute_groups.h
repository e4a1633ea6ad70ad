// Activation checkpointing as the strategy ILP sees it (strategy_solver.h, (C5)-(C9)): for each
// family of repeated layers ("transformer.h.0" … "transformer.h.47") whose nodes folded into
// classes of their own, one recompute group — per member class and strategy, what recomputing
// one layer saves (the activations its nodes keep, less the layer's output that the next
// checkpoint holds), what it costs (the forward again, with its forward resharding inside the
// layer) and what is made again while its backward runs. The solver then picks, with the
// strategies, how many of the family's layers recompute; the first ones in graph order do.
#ifndef MAPD_PLANNER_PLAN_RECOMPUTE_GROUPS_H_
#define MAPD_PLANNER_PLAN_RECOMPUTE_GROUPS_H_

#include <string>
#include <vector>

#include "model/ir/graph.h"
#include "planner/plan/cost_graph.h"
#include "planner/sharding/cluster.h"

namespace mapd {

// Adds a group to `folded->request` per layer family that folded cleanly (every node of its
// layers in a class of its own, the same number per layer); returns, per group added, its
// layers in graph order. Families that did not fold (layers that differ) get no group.
std::vector<std::vector<std::string>> AddRecomputeGroups(const Graph& graph, const Cluster& cluster,
                                                         const CostGraph& cost_graph,
                                                         FoldedCostGraph* folded);

// Per output of `node`: read by no node, or by a node of another layer (`layer_of`: IndexLayers'
// of_node) — what the checkpoint of a recomputed layer holds of it.
std::vector<bool> BoundaryOutputs(const Graph& graph, int node, const std::vector<int>& layer_of);
// The bytes per device of those outputs of `node` under `strategy`.
double BoundaryBytes(const Graph& graph, int node, const std::vector<bool>& boundary, const Strategy& strategy, const Cluster& cluster);

// The layers that recompute: the first `recomputed[g]` of each group's layers.
std::vector<std::string> RecomputedLayers(const std::vector<std::vector<std::string>>& group_layers,
                                          const std::vector<int64_t>& recomputed);

}  // namespace mapd

#endif  // MAPD_PLANNER_PLAN_RECOMPUTE_GROUPS_H_

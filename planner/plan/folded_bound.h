// A search's bound for one (mesh, micro-batch count) from the graph's kinds alone, without its
// cost graph (DESIGN §6, "the search's bounds"): a model of L repeated layers has a few dozen
// kinds of node and of edge, and its folded problem (FoldRepeatedLayers) is over those, so the
// bound phase costs one layer per pair where a cost graph costs every node.
//
// The skeleton is the folded shape of a graph, the same on every mesh and ZeRO stage: its nodes
// grouped into classes by layer-free name and kind (equal signatures cost equally), its edges
// grouped by the classes they join and their kind. FoldRepeatedLayers folds a built cost graph
// the same way, except that it also merges classes of one name whose costs happen to be equal,
// which ties their choices: the skeleton's problem is that one with those ties relaxed, so its
// unconstrained optimum is at most the cost graph's — a lower bound, which is what the search
// prunes with. Its least state memory is the cost graph's exactly (a sum over nodes).
#ifndef MAPD_PLANNER_PLAN_FOLDED_BOUND_H_
#define MAPD_PLANNER_PLAN_FOLDED_BOUND_H_

#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/ir/graph.h"
#include "planner/plan/cost_graph.h"
#include "planner/plan/prepared_graph.h"
#include "proto/mapd/v1/solver.pb.h"

namespace mapd {

struct FoldSkeleton {
  struct Class {
    std::string name;            // the nodes' layer-free name
    int node = 0;                // one node of the class: its kind's costs are the class's
    int64_t multiplicity = 0;    // nodes in the class
    bool repeated = false;       // its nodes are in repeated layers (they may recompute)
    // Of a repeated class, per output of `node`: what a recomputed layer's checkpoint holds
    // (BoundaryOutputs, recompute_groups.h).
    std::vector<bool> boundary;
  };
  struct Edge {
    int src_class = 0, dst_class = 0;
    EdgePort port;               // one edge of the group
    TensorType type;             // its value's
    int64_t multiplicity = 0;    // edges in the group
  };
  std::vector<Class> classes;
  std::vector<Edge> edges;
  std::array<double, 4> fixed_at_stage{};  // FixedBytesAtStage (cost_graph.h)
};

// The skeleton of `graph` from its prepared nodes, layer-free names (LayerKeys) and layers
// (IndexLayers).
FoldSkeleton MakeFoldSkeleton(const Graph& graph, const std::vector<std::unique_ptr<PreparedNode>>& prepared,
                              const std::vector<std::string>& layer_keys, const LayerIndex& layers);

// A skeleton costed on one cluster at one micro-batch count: per class its kind's strategies and
// costs at every ZeRO stage, per edge group its resharding seconds.
// `stages`: the ZeRO stages costed (all four, or the one CostSkeleton was asked for).
struct SkeletonCosts {
  std::vector<CostGraphMemo::NodeEntry> classes;
  // Per class, per strategy: the bytes of its boundary outputs (what a checkpoint keeps of it per
  // micro-batch in flight; empty for a class outside the repeated layers); and the micro-batches
  // in flight the costs are for.
  std::vector<std::vector<double>> boundary_bytes;
  int64_t in_flight = 1;
  std::vector<SharedList<double>> edges;
  std::array<double, 4> fixed_at_stage{};
  std::array<bool, 4> stages{};
};
// `memo` (optional) is read and, when every stage is costed (`only_stage` -1), added to.
absl::StatusOr<SkeletonCosts> CostSkeleton(const Graph& graph, const std::vector<std::unique_ptr<PreparedNode>>& prepared,
                                           const FoldSkeleton& skeleton, const Cluster& cluster, const ProfileOptions& options,
                                           const CostGraphOptions& cost_options, CostGraphMemo* memo, int only_stage = -1);

// LeastStateMemory (cost_graph.h) of the cost graph the skeleton stands for, at ZeRO `stage`.
double LeastStateMemory(const FoldSkeleton& skeleton, const SkeletonCosts& costs, int stage);

// The memory of a choice of the folded problem (one strategy per class) at ZeRO `stage` (a stage
// costed).
double ChoiceMemory(const FoldSkeleton& skeleton, const SkeletonCosts& costs, const std::vector<int>& choice, int stage);

// The folded problem at ZeRO `stage`, without a budget: a node per class, an edge per group
// joining two classes, and a group within one class folded into its node's costs.
v1::SolverRequest FoldedRequest(const FoldSkeleton& skeleton, const SkeletonCosts& costs, int stage);

// A lower bound on the fastest choice at ZeRO `stage` whose memory fits `budget` bytes per
// device, recomputation allowed — the Lagrangian relaxation of the budget ((C4) in
// strategy_solver.h). For λ ≥ 0 every choice x within the budget costs at least
//
//   L(λ) = min_x [ T(x) + λ·(M(x) − (budget − F)) ],
//
// and the minimum is taken over a larger problem still: every node of a repeated layer may
// recompute on its own (a recomputed layer's nodes decide together, and run their resharding
// again), saving its activations less the checkpoint of its boundary outputs and taking them
// again (one layer's, once) while its backward runs. Each L(λ) is the folded problem with node
// costs c + λ·m + min(0, f − λ·a + λ·q / L) where a node may recompute (per copy: f its forward,
// a what recomputing saves, q what it takes again, L the layers), solved without a budget; its objective is
// proven (OPTIMAL) within `gap` of its optimum, so it is divided by 1 + gap. L is concave: λ is raised until the
// choice fits, then Kelley's cutting planes close in on the maximum. The search stops once the
// bound reaches `target` (what prunes) or cannot; whatever it returns is a lower bound — the
// unconstrained optimum's where that choice fits.
double BudgetedBound(const FoldSkeleton& skeleton, const SkeletonCosts& costs, int stage, double budget, double gap,
                     double target = std::numeric_limits<double>::infinity());

}  // namespace mapd

#endif  // MAPD_PLANNER_PLAN_FOLDED_BOUND_H_

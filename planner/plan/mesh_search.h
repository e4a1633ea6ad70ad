// One mesh's solves: the ILP of a cost graph posed and answered (strategies, and activation
// checkpointing of repeated layers under a budget), a candidate filled from the answer, and MAP's
// best plan on one mesh at one micro-batch count. Private to the planner's search (planner.cc),
// its baselines (baselines.cc) and the pipeline's stage solver (stage_solver.cc); the public
// entry is SearchPlan (planner.h).
//
// The memory budget is one field: the options' `cluster.memory_per_device`, resolved from the
// device profile (MakeCluster) by whoever starts a search, and read here through BudgetOf. Only
// the ILP request a solve poses carries it on (0 there: no limit).
#ifndef MAPD_PLANNER_PLAN_MESH_SEARCH_H_
#define MAPD_PLANNER_PLAN_MESH_SEARCH_H_

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/ir/graph.h"
#include "planner/plan/cost_graph.h"
#include "planner/plan/cost_graph_cache.h"
#include "planner/plan/folded_bound.h"
#include "planner/plan/planner.h"
#include "planner/sharding/cluster.h"
#include "proto/mapd/v1/solver.pb.h"

namespace mapd {

// The options' budget in bytes per device, once resolved (ResolveBudget).
inline double BudgetOf(const PlannerOptions& options) { return static_cast<double>(options.cluster.memory_per_device); }

// `options` with the budget the device profile gives when the options leave it 0 (the cluster
// `MakeCluster` made of them: `base`).
PlannerOptions ResolveBudget(const PlannerOptions& options, const Cluster& base);

// A solved cost graph: the choice per graph node, and what the solver said.
struct Solved {
  std::vector<int> choice;  // per graph node; empty when infeasible
  v1::SolverResponse response;
  std::shared_ptr<const v1::SolverRequest> request;  // folded, as posed (shared with the candidates filled from it)
  int decisions = 0;
  // Activation checkpointing chosen with the strategies: the layers, and what they add.
  std::vector<std::string> recomputed_layers;
  double recompute_seconds = 0, recompute_bytes = 0;
};

// Solves a cost graph with repeated layers sharing decisions; budget 0 = no memory limit. With
// `recompute_on` (a cluster), under a budget the solver may also checkpoint repeated layers
// (`recompute_all`: every one of them, the baselines' full recomputation). `cutoff` > 0: the
// solver may stop at any plan no faster than it.
absl::StatusOr<Solved> SolveCostGraph(const Graph& graph, const CostGraph& cg, double budget, const PlannerOptions& options,
                                      const Cluster* recompute_on = nullptr, double cutoff = 0, bool recompute_all = false);

// The least memory any plan of a cost graph needs: every node at its smallest strategy and,
// with `recompute_on`, every repeated layer recomputed.
double MinMemory(const Graph& graph, const CostGraph& cg, const Cluster* recompute_on);

// `c` costed as `s` chose, on `cluster`; `fits` against the options' budget.
absl::Status Fill(PlanCandidate& c, const Graph& graph, const Cluster& cluster, const CostGraph& cg, const Solved& s,
                  const PlannerOptions& options);

// The unconstrained optimum on a mesh with ZeRO `stage` (0 unless pinned): a lower bound on
// the step time of every plan on that mesh, since higher stages only add seconds.
absl::StatusOr<Solved> SolveFree(const PlannerOptions& options, CostGraphCache& cache, const std::vector<int64_t>& mesh,
                                 int64_t m);

// The unconstrained optimum of a (mesh, micro-batch count) at ZeRO `stage` from its kinds alone
// (folded_bound.h, costed by CostGraphCache::KindCosts): at most SolveFree's objective there, with
// no cost graph built. `once_seconds`: the part of it paid once a step; `memory`: its choice's
// bytes per device at each ZeRO stage costed (infinity at the others).
struct KindsOptimum {
  double objective = 0, once_seconds = 0;
  std::array<double, 4> memory{};
};
absl::StatusOr<KindsOptimum> SolveKindsFree(const PlannerOptions& options, const FoldSkeleton& skeleton,
                                            const SkeletonCosts& costs, int stage);

// The highest ZeRO stage the options allow: the pinned one, or max_zero_stage.
inline int HighestZeroStage(const PlannerOptions& options) {
  return options.zero_stage >= 0 ? options.zero_stage : options.max_zero_stage;
}

// The highest ZeRO stage that costs ZeRO 0's seconds (the pinned stage when one is): 1, and 2
// with one micro-batch — with more, ZeRO 2 reduce-scatters every pass's gradients.
int SameSecondsStage(const PlannerOptions& options, int64_t m);

// BudgetedBound (folded_bound.h) over the ZeRO stages a plan with `m` micro-batches may take from
// `lowest` up to the highest the options allow: below the stage with ZeRO 0's seconds a stage
// costs as much time and more memory, so its bound is no lower, and the stages from there up
// bound them all. `budget_at(z)` is the budget BudgetedBound is given at stage z. Each stage is
// searched only as far as `target` needs: 0 (no bound) once one stage's falls below it, or when a
// stage was not costed.
double BudgetedBoundOverStages(const PlannerOptions& options, int64_t m, int lowest, const FoldSkeleton& skeleton,
                               const SkeletonCosts& costs, const std::function<double(int)>& budget_at, double target);

// MAP's best plan on one mesh with `m` micro-batches under the options' budget, given its
// unconstrained optimum `free` (planner.h, SearchPlan, for the order of solves): the
// unconstrained plan when it fits at a stage with ZeRO 0's seconds; else the fastest of the
// budgeted solves at the stages allowed from `min_stage` up, each cut off at `best_so_far`;
// else (nothing fits) the unconstrained plan at the most sharded stage, `fits` false.
absl::StatusOr<PlanCandidate> SearchMesh(const PlannerOptions& options, CostGraphCache& cache, const std::vector<int64_t>& mesh,
                                         int64_t m, const Solved& free, double best_so_far, int min_stage);

// The cache a search uses: the caller's (of the same graph), or one of its own in `own`; set to
// the options' pipeline depth.
absl::StatusOr<CostGraphCache*> CacheFor(const Graph& graph, const PlannerOptions& options, CostGraphCache* shared,
                                         std::unique_ptr<CostGraphCache>& own);

}  // namespace mapd

#endif  // MAPD_PLANNER_PLAN_MESH_SEARCH_H_

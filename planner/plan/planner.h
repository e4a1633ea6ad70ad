// The planner's search (DESIGN §6): for a training graph, a number of devices and a memory
// budget, the sharding plan that trains fastest and fits — over every mesh shape of the
// devices (or the one pinned), ZeRO stages 0–3 over the data-parallel axes, and one strategy
// per operator chosen by the strategy ILP — together with the hand-written baselines (data
// parallel, ZeRO-3, Megatron TP × DP for every degree) costed by the same model.
//
// The search first solves, on every mesh shape, the ILP with no memory limit and ZeRO off (or
// the pinned stage): its optimum is a lower bound on every plan of that mesh, because ZeRO
// stages only add seconds (1–2 none, 3 the parameter gathers). Mesh shapes are then taken from
// the lowest bound up. If a mesh's unconstrained plan fits at ZeRO 0, 1 or 2 it is the mesh's
// best (the lowest such stage is used); otherwise the ILP is solved under the budget with ZeRO 2
// (ZeRO 0's seconds, the least memory at those seconds) and ZeRO 3 — each also deciding how many
// repeated layers recompute their activations — and the faster kept. A mesh
// whose bound is no better than the best plan that fits so far is not solved further (pruned).
#ifndef MAPD_PLANNER_PLAN_PLANNER_H_
#define MAPD_PLANNER_PLAN_PLANNER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "planner/ir/graph.h"
#include "planner/plan/cost_graph.h"
#include "planner/profile/profile_options.h"
#include "planner/sharding/cluster.h"
#include "proto/mapd/v1/plan.pb.h"
#include "proto/mapd/v1/solver.pb.h"

namespace mapd {

struct PlannerOptions {
  // Devices, mesh, device type, memory budget, links. An empty mesh means: search every 1-D
  // and 2-D mesh shape of `cluster.devices` (up to `max_mesh_axes` axes); a mesh pins it.
  ClusterOptions cluster;
  // Optimizer and precision (the device comes from `cluster`).
  ProfileOptions profile;
  // -1: any ZeRO stage the search finds best (up to max_zero_stage); 0–3: only that stage.
  int zero_stage = -1;
  // The highest stage the search may use (0–3).
  int max_zero_stage = 3;
  // Under the budget, the solver may also recompute repeated layers' activations in backward
  // (activation checkpointing, recompute_groups.h) — chosen with the strategies.
  bool recompute = true;
  // The most axes a searched mesh has (1 or 2; a pinned mesh may have more).
  int max_mesh_axes = 2;
  // CBC's limit per ILP, in seconds.
  double time_limit_seconds = 10;
  // The accepted optimality gap: a budgeted ILP's choice within this fraction of its lower
  // bound (Lagrangian, or CBC's) is taken, and mesh shapes, micro-batch counts and recompute
  // counts whose lower bound is within it of the best plan found are not searched — so the plan
  // is within this fraction of the cost model's optimum. 0: every optimum proven exactly.
  double relative_gap = 0.01;
  // Also cost the baselines (they are always reported by `mapctl plan`).
  bool baselines = true;
  // Micro-batches per step (DESIGN §6a, micro_batch.h): 0 lets the search choose among the
  // divisors of the global batch; N ≥ 1 pins it (1: the whole batch in one pass). A graph that
  // cannot be micro-batched (a batch norm) is searched at 1 on auto; pinning N > 1 for it is an
  // error. 1 by default (what `mapctl run` and jobs ask for unless told); `mapctl plan` passes
  // auto.
  int64_t micro_batches = 1;

  absl::Status Validate() const;
};

// One costed configuration: MAP's best on one mesh shape, or a baseline.
struct PlanCandidate {
  std::string name;            // "MAP", "data parallel", "ZeRO-3", "Megatron TP=8 x DP=8"
  std::vector<int64_t> mesh;
  int zero_stage = 0;
  int64_t micro_batches = 1;   // passes per step; each of global_batch / micro_batches samples
  bool applicable = true;      // false: this family has no plan here; `note` says why
  std::string note;
  bool fits = false;           // predicted peak ≤ the budget
  ChoiceCost cost;             // step time, communication, memory breakdown
  std::vector<Strategy> strategies;  // per graph node, the chosen strategy
  std::vector<std::string> recomputed_layers;  // activation checkpointing: these layers recompute
  v1::SolverResponse::Status solver_status = v1::SolverResponse::STATUS_UNSPECIFIED;
  int decisions = 0;           // ILP decisions after repeated layers shared theirs
  double solve_seconds = 0;    // CBC's time for this candidate
  v1::SolverRequest request;   // the (folded) ILP whose answer this is, for dumping and replay
};

struct PlanResult {
  Cluster cluster;                        // the winning mesh (links included)
  PlanCandidate plan;                     // the fastest MAP plan that fits (if `fits`)
  bool fits = false;
  std::vector<PlanCandidate> alternatives;  // MAP's best per mesh shape searched, fastest first
  // Mesh shapes not searched under the budget: `cost.step_seconds` is their bound (the
  // unconstrained optimum), no less than the plan's step time; `applicable` is false.
  std::vector<PlanCandidate> pruned;
  std::vector<PlanCandidate> baselines;
  // When nothing fits: the least memory per device any plan searched needs (every node at its
  // smallest strategy, plus the fixed part), minimised over mesh shapes and ZeRO stages.
  double min_memory_bytes = 0;
  int64_t global_batch = 0;                 // samples per step (0: the graph has no batch)
  std::vector<int64_t> micro_batch_counts;  // the counts searched
  std::string micro_batch_note;             // why only 1 was searched, when micro-batching is impossible
  // Non-empty when a fitting baseline (a plan of the same space) was faster than the search's
  // own best — possible within the accepted gap — and became the plan: what happened.
  std::string adopted_note;
  double search_seconds = 0;              // wall time of the whole search
  // (mesh shape, micro-batch count) pairs searched under the budget; skipped by their bound.
  int meshes_solved = 0, meshes_pruned = 0;
};

// The mesh shapes searched for `devices`: {N}, then {a, N/a} for every divisor 1 < a < N
// (outer axis first), when `max_axes` ≥ 2.
std::vector<std::vector<int64_t>> MeshShapes(int64_t devices, int max_axes);

// The plan as saved by `mapctl plan --save`: the graph, the mesh and every node's placements.
v1::Plan ToPlanProto(const Graph& graph, const PlanResult& result, const PlannerOptions& options);

// Errors: the options' validation; a graph the cost model cannot cost (unknown op, an op
// without a sharding rule). A plan that does not fit is not an error: `fits` is false.
absl::StatusOr<PlanResult> SearchPlan(const Graph& graph, const PlannerOptions& options);

}  // namespace mapd

#endif  // MAPD_PLANNER_PLAN_PLANNER_H_

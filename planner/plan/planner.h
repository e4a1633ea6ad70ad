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

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/ir/graph.h"
#include "planner/plan/cost_graph.h"
#include "planner/plan/pins.h"
#include "planner/profile/profile_options.h"
#include "planner/sharding/cluster.h"
#include "proto/mapd/v1/plan.pb.h"
#include "proto/mapd/v1/solver.pb.h"

namespace mapd {

class CostGraphCache;

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
  // Also cost the baselines (they are always reported by `mapctl plan`). Without them the
  // Megatron pipelines are still solved where the pins ask for the interleaved schedule (only
  // they keep it).
  bool baselines = true;
  // Megatron pipelines whose lower bound reaches the fastest fitting Megatron plan found are not
  // solved (listed as pruned, pipeline_search.h); false solves every one (for tests).
  bool prune_pipeline_baselines = true;
  // Micro-batches per step (DESIGN §6a, micro_batch.h): 0 lets the search choose among the
  // divisors of the global batch; N ≥ 1 pins it (1: the whole batch in one pass). A graph that
  // cannot be micro-batched (a batch norm) is searched at 1 on auto; pinning N > 1 for it is an
  // error. 1 by default (what `mapctl run` and jobs ask for unless told); `mapctl plan` passes
  // auto.
  int64_t micro_batches = 1;
  // Pipeline stages (DESIGN §6b, pipeline_search.h): 1 plans the whole model on every device
  // (what `mapctl run` and jobs execute today); N ≥ 2 cuts its layers into N stages of
  // devices/N devices each; 0 (auto, `mapctl plan`'s default) searches 1 and every N that
  // divides the devices and is at most the number of layers.
  int pipeline_stages = 1;
  // Set by the pipeline search for one stage's plan: stage i of p keeps the activations of
  // min(p − i, m) micro-batches under 1F1B; this is p − i (1: not a pipeline stage).
  int64_t pipeline_depth = 1;
  // With MAPD_TRACE set: a line per ILP and per phase of the search on stderr (docs/planner.md).
  // The pipeline search turns it off in its stages' own searches.
  bool trace = true;
  // 0: none. Otherwise only plans faster than this many seconds a step are wanted (the pipeline
  // search's best so far, for its stages): when none fits, the result does not fit.
  double objective_cutoff = 0;
  // When nothing fits, also find the least memory any plan searched needs (for the error that
  // says how much to give); the pipeline search's stages do without.
  bool least_memory = true;
  // Threads the search may use, 1 or 2: with 2 (and a second core), the pipeline search's
  // bounds and exploration run beside the search without stages (pipeline_search.h); the plan is
  // the same either way.
  int threads = 2;
  // Parts of the configuration the user fixed (pins.h, `mapctl plan --pin`): the search's space
  // and the baselines are cut to them. SearchPlan applies the degrees, micro-batch size, ZeRO
  // stage and `recompute=off` to the fields above once; a pipeline stage's own search keeps only
  // `recompute`.
  PlanPins pins;

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
  std::shared_ptr<const v1::SolverRequest> request;  // the (folded) ILP whose answer this is, for dumping and replay
};

// One pipeline stage of a pipeline plan (DESIGN §6b, pipeline_search.h).
struct StagePlan {
  int first_layer = 0, end_layer = 0;   // the layers [first, end) of the graph's sequence
  std::string first_name, last_name;    // "h.0", "h.11"
  int64_t in_flight = 1;                // micro-batches of activations it keeps (1F1B: min(p − i, m))
  std::shared_ptr<const Graph> graph;   // the stage's graph (stages.h); `plan.strategies` are its nodes'
  PlanCandidate plan;                   // its intra-op plan on its submesh: mesh, ZeRO, strategies, recompute, cost
  double pass_seconds = 0;   // one micro-batch's forward and backward here, the sends to the next stage included
  double once_seconds = 0;   // once a step: its gradient reduction, and a tied weight's sum with the other end
  double send_seconds = 0;   // per micro-batch: its activations to the next stage and their gradients back
  std::string LayerRange() const;  // "h.0-h.11", or "h.3" for one layer
};

// A plan that cuts the layers into stages, each on its own devices, streaming micro-batches.
struct PipelinePlan {
  std::string name = "MAP";            // or "Megatron TP=8 x PP=8 x DP=16"
  int64_t tensor_parallel = 0;         // a Megatron pipeline's TP degree (0: MAP's search)
  bool applicable = true;
  std::string note;                    // why not applicable
  int stages = 1;
  std::vector<int64_t> stage_mesh;     // every stage's intra-op mesh
  int64_t micro_batches = 1;
  // Chunks of layers per device (DESIGN §6b): 1 for 1F1B; V ≥ 2 for interleaved 1F1B, where
  // `stage_plans` holds p·V chunks and chunk c runs on the devices of stage c mod p.
  int64_t virtual_stages = 1;
  std::string schedule = "1F1B";
  std::vector<StagePlan> stage_plans;
  // With u_d the passes of device stage d's chunks summed and g_d their once-a-step parts:
  // Σ_d u_d / V + (m − 1/V) · max u_d + max g_d (DESIGN §6b; V = 1: 1F1B's Σ u + (m − 1) max u).
  double step_seconds = 0;
  // The share of the stages' time idle in the fill and drain: 1 − m·Σ pass / (p · pipeline time).
  double bubble_fraction = 0;
  double peak_bytes = 0;               // the largest predicted peak per device (a device's chunks summed)
  bool fits = false;                   // every stage fits its budget
  // A Megatron pipeline not solved: its lower bound (`step_seconds`) already reaches the fastest
  // fitting Megatron plan found (`note` says which), so it cannot be the fastest.
  bool pruned = false;
  int64_t devices() const;
  std::string MeshString() const;      // "8 stages x 16x8"
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
  // With pipeline stages searched (PlannerOptions::pipeline_stages ≠ 1): MAP's best pipeline
  // per stage count (fitting first, fastest first) and the Megatron TP × PP × DP baselines.
  std::vector<PipelinePlan> pipelines;
  std::vector<PipelinePlan> pipeline_baselines;
  // Set when a pipeline plan fits and is faster than `plan`: it is then MAP's plan, and `plan`
  // stays the best without stages.
  std::optional<PipelinePlan> pipeline;
  std::string pipeline_note;               // why no stages were searched, when asked for auto
  // With pins (PlannerOptions::pins): the name of the pinned configuration — the fastest baseline
  // or pipeline baseline that keeps every pin (fitting first) — empty when no baseline does.
  std::string pinned_name;
  int pipeline_configs_solved = 0, pipeline_configs_pruned = 0;
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
// `cache` (optional): the graph's cost graphs, kept between searches of one graph (the
// pipeline search's stages); without it the search builds its own.
absl::StatusOr<PlanResult> SearchPlan(const Graph& graph, const PlannerOptions& options, CostGraphCache* cache = nullptr);

}  // namespace mapd

#endif  // MAPD_PLANNER_PLAN_PLANNER_H_

// The planning pipeline (DESIGN §6–7): from a training graph to a plan ranks can run — searched,
// lowered to one program per rank, each program profiled and, under a memory budget, checked
// against it — in one place, for `mapctl run --ranks N` and for the coordinator's jobs.
//
//   search (SearchPlan) → pick (MAP's plan, or a baseline) → lower every rank and profile its
//   program (LowerAndPredict) → under a budget, a program over it: search again under the budget
//   lowered by what it missed (a few times) → RunnablePlan
//
// The planner's memory is its start-of-backward model; a rank program's profile is the finer one
// (about 10% higher for checkpointed plans), hence the check.
#ifndef MAPD_PLANNER_RUNNABLE_RUNNABLE_PLAN_H_
#define MAPD_PLANNER_RUNNABLE_RUNNABLE_PLAN_H_

#include <memory>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/graph/step_items.h"
#include "model/ir/graph.h"
#include "planner/lower/lowered_plan.h"
#include "planner/plan/planner.h"
#include "planner/runnable/plan_request.h"
#include "proto/mapd/v1/plan.pb.h"

namespace mapd {

// A plan lowered to rank programs that fit: everything ranks need to start.
struct RunnablePlan {
  v1::Graph graph;                     // the training graph (bf16 plans: the mixed-precision graph)
  Precision precision = Precision::kFp32;
  std::vector<int64_t> mesh;           // with pipeline stages: every stage's mesh
  // > 1: the layers cut into this many stages, each on its own `mesh` of ranks, micro-batches
  // streamed through them by 1F1B (DESIGN §6b); `lowered` holds the stages' programs in global
  // rank order (stage-major) and `strategies` is empty (each stage has its own).
  int pipeline_stages = 1;
  // Chunks of layers a stage's ranks hold: 1 under 1F1B, V ≥ 2 under interleaved 1F1B (each
  // rank's program carries its later chunks' programs).
  int64_t virtual_stages = 1;
  std::string schedule = "1F1B";       // or "interleaved 1F1B, 2 chunks a device"
  double bubble_fraction = 0;          // the pipeline's predicted idle share
  std::vector<std::string> stages;     // per stage: "h.0-h.1" (its layers; interleaved "h.0, h.2", its chunks')
  std::vector<Strategy> strategies;    // per graph node
  int zero_stage = 0;
  int64_t micro_batches = 1;           // passes per step
  std::vector<std::string> recompute;  // the layers recomputed in backward
  LoweredPlan lowered;                 // one program per rank, each profiled
  std::string name;                    // "MAP's plan", "data parallel", "saved plan p.pb"
  // "mesh 2x2, ZeRO-2, 2 layer(s) recomputed, bf16, 12.3 ms/step predicted on cpu": the one line
  // every output and log describes the plan with. Its step time is the slowest rank program's
  // (the number each rank is measured against; the search's own estimate, a coarser model of the
  // same plan, is `mapctl plan`'s), a pipeline's the schedule's; and it names the device profile
  // the plan was costed on.
  std::string summary;
  std::string device_type;             // the device profile it was costed on (a name, or a file's path)
  double predicted_step_seconds = 0;   // the summary's step time
  // What a checkpoint of this plan records, and resuming checks: the mesh, ZeRO stage and
  // precision, and a fingerprint of every node's placements ("mesh 4, ZeRO-2, layout
  // 5f0c8e1a2b3d4c6e"): two plans with the same one lay out every tensor the same way.
  std::string checkpoint_plan;
  int64_t predicted_peak_bytes = 0;    // the worst rank's, from its program
  double planner_peak_bytes = 0;       // the planner's own estimate for the plan
  StepItems items;                     // per step, for throughput
  double model_flops_per_step = 0;     // forward + backward of the whole model
  double device_peak_flops = 0;        // one device's (the device type's), for MFU
  int world() const;  // every rank of every stage
};

// Plans `graph` for ranks. FAILED_PRECONDITION when no plan fits the budget (NothingFitsError)
// or the chosen baseline does not apply.
absl::StatusOr<RunnablePlan> PlanToRun(const Graph& graph, const PlanRequest& request);

// A pipeline plan (MAP's, or a Megatron TP × PP × DP baseline of PlanResult) made runnable:
// every stage lowered for every rank of its mesh (pipeline_lowering.h) and profiled; under a
// budget, FAILED_PRECONDITION when a rank's program needs more.
absl::StatusOr<RunnablePlan> PipelineToRun(const Graph& graph, const PlanRequest& request, const PipelinePlan& plan);

// A saved plan (`mapctl plan --save`) made runnable: its graph, mesh and strategies lowered and
// profiled on `request.planner`'s device type with its optimizer; `request.recompute` as above
// (auto: the saved plan's layers). `name` names it in the summary ("saved plan p.pb").
absl::StatusOr<RunnablePlan> SavedPlanToRun(const v1::Plan& plan, const PlanRequest& request, const std::string& name);

// "mesh 2x2, ZeRO-2, 2 layer(s) recomputed, 2 micro-batches, bf16, 12.3 ms/step predicted".
std::string PlanSummary(const PlanCandidate& plan, Precision precision);

// The least memory per device any plan of `graph` on `options`' devices needs, by the planner's
// model: over every 1-D and 2-D mesh shape, ZeRO stage and micro-batch count, with recomputation
// (no pipeline stages) — whatever narrower space `options` searched — so that `mapctl plan`,
// `mapctl run` and a job's plan name one figure for one model, batch and device count.
// The figure is the rank programs' peak (profiled) of the plan the search makes just above the
// planner's own least; `plan` is that plan, lowered (null when none could be made there).
struct FittingPlan;
struct LeastMemoryPlan {
  double bytes = 0;
  std::shared_ptr<const FittingPlan> plan;
};
absl::StatusOr<LeastMemoryPlan> LeastMemoryAnywhere(const Graph& graph, PlannerOptions options);

// FAILED_PRECONDITION for `options`' search of `graph`, which found nothing under its budget:
// the budget, LeastMemoryAnywhere (and the budget that holds it with `margin` kept free,
// memory_margin.h), what of the space `options` left out, and what to change.
absl::Status NothingFitsError(const Graph& graph, const PlannerOptions& options, double margin);

}  // namespace mapd

#endif  // MAPD_PLANNER_RUNNABLE_RUNNABLE_PLAN_H_

// From what a user chooses about planning to the planner's options, in one place for every way
// a plan is asked for: `mapctl plan` and `mapctl run --ranks N` (their flags), and a job's spec
// (`mapctl submit`, a job file, `mapclient`; the coordinator's admission, dispatch and planner
// service). Each caller says what it was given (PlanningChoices); the strings are parsed, the
// precision resolved and the options assembled and checked here, so the three agree on what the
// same choice means.
#ifndef MAPD_PLANNER_RUNNABLE_PLAN_REQUEST_H_
#define MAPD_PLANNER_RUNNABLE_PLAN_REQUEST_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/ir/graph.h"
#include "planner/plan/planner.h"
#include "planner/profile/profile_options.h"
#include "planner/runnable/memory_margin.h"
#include "proto/mapd/v1/jobs.pb.h"

namespace mapd {

// What the planning pipeline (runnable_plan.h) is asked for.
struct PlanRequest {
  // Devices, mesh, device type, budget, optimizer, precision, ZeRO stage, micro-batches. Its
  // `recompute` is set from `recompute` below.
  PlannerOptions planner;
  // map: MAP's plan, checked rank program by rank program against the budget; dp: the data
  // parallel baseline (with planner.zero_stage 3: the FSDP one; 1 or 2 is refused); tp:
  // Megatron tensor parallelism over every device (1-D mesh; no ZeRO).
  std::string strategy = "map";
  // The layers recomputed in backward (LayersToRecompute): auto (the plan's; the search may
  // choose them under the budget), off, all, or LAYER,LAYER...
  std::string recompute = "auto";
  // Under a budget, the fraction of it kept free beyond every rank program's profiled peak
  // (memory_margin.h: what the profiles have missed by); 0 to 0.5.
  double memory_margin = kDefaultMemoryMargin;
  absl::Status Validate() const;
};

// The most pipeline stages a command line may ask for (the planner refuses more stages than
// devices or layers with a message of its own).
inline constexpr int kMaxPipelineStagesChoice = 1 << 20;

// Planning choices as given, before they are checked.
struct PlanningChoices {
  int64_t devices = 1;              // 0: a mesh's devices
  std::vector<int64_t> mesh;        // empty: the search tries the mesh shapes
  std::string device_type = "cpu";  // the cost model's device (catalogue name or calibrated JSON)
  int64_t memory_per_device = 0;    // the budget in bytes; 0: the device's memory
  std::string optimizer = "adamw";  // sgd | momentum | adamw
  std::string precision = "auto";   // auto | fp32 | bf16
  std::string zero = "auto";        // auto | 0 | 1 | 2 | 3
  std::string recompute = "auto";   // auto (the search may choose) | off | all | LAYER,LAYER...
  std::string micro_batches = "1";  // auto | N
  std::string pipeline_stages = "1";  // auto | N (1: none)
  int max_pipeline_stages = kMaxPipelineStagesChoice;
  std::string strategy = "map";     // map | dp | tp (PlanRequest::strategy)
  // Pins (planner/plan/pins.h): "tp=8,pp=16,mbs=1,recompute=full,schedule=interleaved:2"; empty: none.
  std::string pin;
  // How messages name a choice: as mapctl's flag ("--zero") or as the job spec's field ("zero").
  bool named_as_flags = true;
};

// The choices of devices as a command line writes them: `mesh` "2x4" (empty: searched) and
// `memory_per_device` "40GiB" (empty: the device's); the rest at their defaults, named as flags.
// INVALID_ARGUMENT naming --mesh or --memory-per-device.
absl::StatusOr<PlanningChoices> ChoicesFromFlags(int64_t devices, const std::string& mesh, const std::string& device_type,
                                                 const std::string& memory_per_device);

// The choices a job's spec makes (its `training` with its defaults): the ranks are the devices,
// and at most as many pipeline stages as ranks.
PlanningChoices ChoicesOf(const v1::JobSpec& spec);

// The planning request for `choices`: the planner's options (devices, mesh, device type, budget,
// optimizer, precision, ZeRO stage, micro-batches, pipeline stages, recomputation allowed when
// `recompute` is auto) with the strategy and recomputation that run it. A pipeline streams at least
// as many micro-batches as it has stages: one pass a step with stages means the planner's choice.
// INVALID_ARGUMENT naming the flag or field for a choice that is not one. What runs the request
// checks the choices together (PlanRequest::Validate, in PlanToRun): `mapctl plan` searches no
// stages on a pinned mesh where `run` refuses the two.
absl::StatusOr<PlanRequest> PlanRequestOf(const PlanningChoices& choices);

// The graph a plan is made for and the ranks train, from a training graph (output 0 its loss):
// with batch_norm "local", its batch norms per group of the batch (`batch_norm_groups` groups,
// model/graph/batch_norm_groups.h); verified; at `precision` (bf16: the mixed-precision graph).
// One path for `mapctl plan`, `mapctl run --ranks N` and a job. Errors name the step: "batch
// norm local: ...", "the training graph does not verify: ...".
absl::StatusOr<Graph> TrainingGraphOf(v1::Graph trainable, const std::string& batch_norm, int batch_norm_groups,
                                      Precision precision);

}  // namespace mapd

#endif  // MAPD_PLANNER_RUNNABLE_PLAN_REQUEST_H_

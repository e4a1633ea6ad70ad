// Planning a job (DESIGN §9): its training graph built and verified, the planner's options from
// its spec, and — when the dispatcher starts it — the plan searched, lowered to one program per
// rank and checked against the budget (fitting_plan.h). Admission uses the first parts to refuse
// a job that could never run before it is queued.
#ifndef MAPD_SERVER_JOBS_JOB_PLANNER_H_
#define MAPD_SERVER_JOBS_JOB_PLANNER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "planner/graph/step_items.h"
#include "planner/ir/graph.h"
#include "planner/lower/fitting_plan.h"
#include "planner/plan/planner.h"
#include "proto/mapd/v1/jobs.pb.h"

namespace mapd {

// The graph the job trains: a zoo model with its loss, or the submitted graph (which has one),
// verified. INVALID_ARGUMENT naming what is wrong (an unknown model or op, a graph that does not
// verify).
absl::StatusOr<Graph> BuildJobGraph(const v1::JobSpec& spec);

// The planner's options for the spec (with its defaults): devices, mesh, device type, budget,
// optimizer, ZeRO stage, recompute.
absl::StatusOr<PlannerOptions> JobPlannerOptions(const v1::JobSpec& spec);

// FAILED_PRECONDITION saying what the least plan needs and what to change.
absl::Status NothingFitsError(const PlanResult& result, const v1::JobSpec& spec);

// "mesh 2x2, ZeRO-2, 2 layer(s) recomputed, bf16, 12.3 ms/step predicted".
std::string PlanSummary(const PlanCandidate& plan, Precision precision);

// A job ready to start on ranks.
struct JobPlan {
  v1::Graph graph;                     // the training graph
  std::vector<int64_t> mesh;
  LoweredPlan lowered;                 // one program per rank, each profiled
  std::string summary;                 // PlanSummary
  int64_t predicted_peak_bytes = 0;    // the worst rank's, from its program
  StepItems items;                     // per step, for throughput
  double model_flops_per_step = 0;     // forward + backward of the whole model
  double device_peak_flops = 0;        // of the spec's device type, for MFU
};

// Plans the job for its ranks: FAILED_PRECONDITION when no plan fits the budget.
absl::StatusOr<JobPlan> PlanJob(const v1::JobSpec& spec);

}  // namespace mapd

#endif  // MAPD_SERVER_JOBS_JOB_PLANNER_H_

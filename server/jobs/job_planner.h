// Planning a job (DESIGN §9): its training graph built and verified and the planning request
// made from its spec; when the dispatcher starts it, the plan made runnable by the planning
// pipeline (planner/runnable/runnable_plan.h), which `mapctl run` uses too. Admission uses the
// first parts to refuse a job that could never run before it is queued.
#ifndef MAPD_SERVER_JOBS_JOB_PLANNER_H_
#define MAPD_SERVER_JOBS_JOB_PLANNER_H_

#include "absl/status/statusor.h"
#include "model/ir/graph.h"
#include "planner/runnable/runnable_plan.h"
#include "planner/plan/planner.h"
#include "proto/mapd/v1/jobs.pb.h"

namespace mapd {

// The graph the job trains: a zoo model with its loss, or the submitted graph (which has one),
// verified. INVALID_ARGUMENT naming what is wrong (an unknown model or op, a graph that does not
// verify).
absl::StatusOr<Graph> BuildJobGraph(const v1::JobSpec& spec);

// The planning request for the spec (with its defaults; planner/runnable/plan_request.h, as
// mapctl's): devices, mesh, device type, budget, optimizer, precision, ZeRO stage, micro-batches,
// pipeline stages, recompute; MAP's plan, no baselines.
absl::StatusOr<PlanRequest> JobPlanRequest(const v1::JobSpec& spec);

// A fitting plan whose predicted peak per rank is below what the model's parameters take on each
// rank — at one byte an element, sharded over every rank — is a planner bug (a wrapped product, a
// lost term), not a plan: INTERNAL naming both figures, so that nothing is admitted on it.
absl::Status CheckPlausiblePeak(const Graph& graph, int64_t ranks, double predicted_peak_bytes);

// Plans the job for its ranks: FAILED_PRECONDITION when no plan fits the budget.
absl::StatusOr<RunnablePlan> PlanJob(const v1::JobSpec& spec);

}  // namespace mapd

#endif  // MAPD_SERVER_JOBS_JOB_PLANNER_H_

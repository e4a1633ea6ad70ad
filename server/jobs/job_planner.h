// Planning a job (DESIGN §9): its training graph built and verified and the planning request
// made from its spec; when the dispatcher starts it, the plan made runnable by the planning
// pipeline (planner/runnable/runnable_plan.h), which `mapctl run` uses too. Admission uses the
// first parts to refuse a job that could never run before it is queued.
#ifndef MAPD_SERVER_JOBS_JOB_PLANNER_H_
#define MAPD_SERVER_JOBS_JOB_PLANNER_H_

#include "absl/status/statusor.h"
#include "model/ir/graph.h"
#include "server/jobs/job_graph.h"
#include "planner/runnable/runnable_plan.h"
#include "planner/plan/planner.h"
#include "proto/mapd/v1/jobs.pb.h"

namespace mapd {

// A fitting plan whose predicted peak per rank is below what the model's parameters take on each
// rank — at one byte an element, sharded over every rank — is a planner bug (a wrapped product, a
// lost term), not a plan: INTERNAL naming both figures, so that nothing is admitted on it.
absl::Status CheckPlausiblePeak(const Graph& graph, int64_t ranks, double predicted_peak_bytes);

// Plans the job for its ranks: FAILED_PRECONDITION when no plan fits the budget.
absl::StatusOr<RunnablePlan> PlanJob(const v1::JobSpec& spec);

}  // namespace mapd

#endif  // MAPD_SERVER_JOBS_JOB_PLANNER_H_

// Admission: before a job is queued the coordinator builds its training graph and plans it whole
// — searched, lowered to one program per rank, each checked against the budget (PlanJob) — so a
// job that could never run is refused at submission with what to do: INVALID_ARGUMENT for a
// model that does not build or verify (bad graph, unknown op), FAILED_PRECONDITION for a budget
// no plan fits; other jobs are not touched. The plan goes with the job (admitted_plans.h): the
// dispatcher starts it on this plan instead of searching again.
#ifndef MAPD_SERVER_JOBS_ADMISSION_H_
#define MAPD_SERVER_JOBS_ADMISSION_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "planner/runnable/runnable_plan.h"
#include "proto/mapd/v1/jobs.pb.h"

namespace mapd {

struct Admission {
  std::string plan_summary;        // "mesh 2x2, ZeRO-2, 2 layers recomputed, 12.3 ms/step predicted"
  int64_t predicted_peak_bytes = 0;
  double predicted_step_seconds = 0;
  std::shared_ptr<const RunnablePlan> plan;  // what the dispatcher starts the job on
};

// The spec must be valid (ValidateJobSpec) and have its defaults (WithDefaults).
absl::StatusOr<Admission> AdmitJob(const v1::JobSpec& spec);

}  // namespace mapd

#endif  // MAPD_SERVER_JOBS_ADMISSION_H_

#include "server/jobs/admission.h"

#include "server/jobs/job_planner.h"

namespace mapd {

absl::StatusOr<Admission> AdmitJob(const v1::JobSpec& spec) {
  auto plan = PlanJob(spec);
  if (!plan.ok()) return plan.status();
  Admission a;
  a.plan_summary = plan->summary;
  a.predicted_peak_bytes = plan->predicted_peak_bytes;
  a.predicted_step_seconds = plan->predicted_step_seconds;
  a.plan = std::make_shared<const RunnablePlan>(*std::move(plan));
  return a;
}

}  // namespace mapd

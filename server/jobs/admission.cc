#include "server/jobs/admission.h"

#include "absl/strings/str_cat.h"
#include "server/jobs/job_planner.h"

namespace mapd {

absl::StatusOr<Admission> AdmitJob(const v1::JobSpec& spec) {
  auto graph = BuildJobGraph(spec);
  if (!graph.ok()) return graph.status();
  auto request = JobPlanRequest(spec);
  if (!request.ok()) return request.status();
  // The planner's search only: lowering and checking each rank's program waits for dispatch.
  auto result = SearchPlan(*graph, request->planner);
  if (!result.ok()) return absl::Status(result.status().code(), absl::StrCat("planning: ", result.status().message()));
  if (!result->fits) return NothingFitsError(*result, spec.ranks());
  if (auto st = CheckPlausiblePeak(*graph, spec.ranks(), result->plan.cost.peak_bytes()); !st.ok()) return st;
  Admission a;
  a.plan_summary = PlanSummary(result->plan, request->planner.profile.precision);
  a.predicted_peak_bytes = static_cast<int64_t>(result->plan.cost.peak_bytes());
  return a;
}

}  // namespace mapd

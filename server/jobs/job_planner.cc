#include "server/jobs/job_planner.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace mapd {

absl::Status CheckPlausiblePeak(const Graph& graph, int64_t ranks, double predicted_peak_bytes) {
  const double floor = static_cast<double>(graph.NumParameterElements()) / static_cast<double>(std::max<int64_t>(ranks, 1));
  if (predicted_peak_bytes >= floor) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("planner bug: the plan predicts ", predicted_peak_bytes, " bytes per rank, under the ",
                                          floor, " the model's parameters take on each of ", ranks,
                                          " ranks at one byte an element; nothing was admitted on it — please report it"));
}

absl::StatusOr<RunnablePlan> PlanJob(const v1::JobSpec& spec) {
  auto graph = BuildJobGraph(spec);
  if (!graph.ok()) return graph.status();
  auto request = JobPlanRequest(spec);
  if (!request.ok()) return request.status();
  auto plan = PlanToRun(*graph, *request);
  if (!plan.ok()) return plan.status();
  if (auto st = CheckPlausiblePeak(*graph, spec.ranks(), static_cast<double>(plan->predicted_peak_bytes)); !st.ok()) return st;
  return plan;
}

}  // namespace mapd

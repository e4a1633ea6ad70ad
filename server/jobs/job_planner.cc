#include "server/jobs/job_planner.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "model/graph/batch_norm_groups.h"
#include "model/graph/loss.h"
#include "model/graph/verifier.h"
#include "planner/profile/profiler.h"
#include "model/zoo/zoo.h"
#include "common/training_config.h"
#include "planner/runnable/plan_request.h"

namespace mapd {

namespace {
absl::Status Named(const absl::Status& st, const std::string& what) {
  return absl::Status(st.code(), absl::StrCat(what, ": ", st.message()));
}
}  // namespace

absl::StatusOr<Graph> BuildJobGraph(const v1::JobSpec& spec) {
  v1::Graph proto;
  if (!spec.model().empty()) {
    auto built = BuildZooModel(spec.model());
    if (!built.ok()) return Named(built.status(), "model");
    auto trainable = WithTrainingLoss(*std::move(built), LossKind::kAuto);
    if (!trainable.ok()) return Named(trainable.status(), "model");
    proto = *std::move(trainable);
  } else {
    proto = spec.graph();
  }
  if (spec.batch_norm() == "local") {  // the groups are the model's (model/graph/batch_norm_groups.h)
    auto grouped = GroupBatchNorms(std::move(proto), std::max(1, spec.batch_norm_groups()));
    if (!grouped.ok()) return Named(grouped.status(), "batch_norm local");
    proto = *std::move(grouped);
  }
  auto graph = MakeVerifiedGraph(std::move(proto));
  if (!graph.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("the job's graph does not verify: ", graph.status().message()));
  }
  // The graph the job trains: bf16 mixed precision plans and runs its bf16 form.
  auto precision = ResolvePrecision(spec.training().precision(), spec.device_type());
  if (!precision.ok()) return Named(precision.status(), "precision");
  return GraphAtPrecision(*graph, *precision);
}

absl::StatusOr<PlanRequest> JobPlanRequest(const v1::JobSpec& spec) {
  auto request = PlanRequestOf(ChoicesOf(spec));
  if (!request.ok()) return request.status();
  request->planner.baselines = false;
  return request;
}

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

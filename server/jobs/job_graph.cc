#include "server/jobs/job_graph.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/training_config.h"
#include "model/graph/loss.h"
#include "model/zoo/zoo.h"
#include "planner/profile/profile_options.h"
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
  auto precision = ResolvePrecision(WithTrainingDefaults(spec.training()).precision(), spec.device_type().empty() ? "cpu" : spec.device_type());
  if (!precision.ok()) return Named(precision.status(), "precision");
  return TrainingGraphOf(std::move(proto), spec.batch_norm(), spec.batch_norm_groups(), *precision);
}

absl::StatusOr<PlanRequest> JobPlanRequest(const v1::JobSpec& spec) {
  auto request = PlanRequestOf(ChoicesOf(spec));
  if (!request.ok()) return request.status();
  request->planner.baselines = false;
  return request;
}

}  // namespace mapd

#include "server/jobs/job_planner.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "planner/graph/batch_norm_groups.h"
#include "planner/graph/loss.h"
#include "planner/graph/verifier.h"
#include "planner/profile/profiler.h"
#include "planner/zoo/zoo.h"
#include "common/plan_choices.h"
#include "common/training_config.h"

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
  if (spec.batch_norm() == "local") {  // the groups are the model's (planner/graph/batch_norm_groups.h)
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
  PlanRequest request;
  PlannerOptions& o = request.planner;
  o.cluster.devices = spec.ranks();
  o.cluster.mesh.assign(spec.mesh().begin(), spec.mesh().end());
  o.cluster.device_type = spec.device_type();
  o.cluster.memory_per_device = spec.memory_per_device();
  auto opt = ParseOptimizer(spec.training().optimizer());
  if (!opt.ok()) return opt.status();
  o.profile.optimizer = *opt;
  auto precision = ResolvePrecision(spec.training().precision(), spec.device_type());
  if (!precision.ok()) return precision.status();
  o.profile.precision = *precision;
  auto zero = ParseZeroStage(spec.zero(), 3, "zero");  // -1: auto
  if (!zero.ok()) return zero.status();
  o.zero_stage = *zero;
  request.recompute = spec.recompute().empty() ? "auto" : spec.recompute();
  o.recompute = request.recompute == "auto";
  auto micro = MicroBatchesOf(spec.training());  // 0: auto
  if (!micro.ok()) return micro.status();
  o.micro_batches = *micro;
  auto stages = ParsePipelineStages(spec.pipeline_stages(), std::max(1, spec.ranks()), "pipeline_stages");  // 0: auto
  if (!stages.ok()) return stages.status();
  o.pipeline_stages = *stages;
  // A pipeline streams at least as many micro-batches as it has stages: one pass a step then
  // means the planner's choice.
  if (o.pipeline_stages != 1 && o.micro_batches == 1) o.micro_batches = 0;
  o.baselines = false;
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

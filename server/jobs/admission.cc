#include "server/jobs/admission.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "planner/graph/loss.h"
#include "planner/graph/verifier.h"
#include "planner/plan/planner.h"
#include "planner/profile/timeline_svg.h"  // FormatBytes
#include "planner/zoo/zoo.h"

namespace mapd {

namespace {
absl::Status Named(const absl::Status& st, const std::string& what) {
  return absl::Status(st.code(), absl::StrCat(what, ": ", st.message()));
}
}  // namespace

absl::StatusOr<Admission> AdmitJob(const v1::JobSpec& spec) {
  // The training graph: a zoo model with its loss, or the submitted graph (which has one).
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
  auto graph = MakeVerifiedGraph(std::move(proto));
  if (!graph.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("the job's graph does not verify: ", graph.status().message()));
  }
  PlannerOptions o;
  o.cluster.devices = spec.ranks();
  o.cluster.mesh.assign(spec.mesh().begin(), spec.mesh().end());
  o.cluster.device_type = spec.device_type();
  o.cluster.memory_per_device = spec.memory_per_device();
  auto opt = ParseOptimizer(spec.optimizer());
  if (!opt.ok()) return opt.status();
  o.profile.optimizer = *opt;
  if (spec.zero() != "auto") o.zero_stage = spec.zero()[0] - '0';
  o.recompute = spec.recompute() == "auto";
  o.baselines = false;
  auto result = SearchPlan(*graph, o);
  if (!result.ok()) return Named(result.status(), "planning");
  if (!result->fits) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "no plan fits %s per device on %d device(s); the least any plan needs is %s — give more memory per device, "
        "more ranks, or a smaller batch",
        FormatBytes(result->cluster.memory_per_device), spec.ranks(), FormatBytes(static_cast<int64_t>(result->min_memory_bytes))));
  }
  const PlanCandidate& p = result->plan;
  Admission a;
  a.plan_summary = absl::StrCat("mesh ", absl::StrJoin(p.mesh, "x"), p.zero_stage > 0 ? absl::StrCat(", ZeRO-", p.zero_stage) : "",
                                p.recomputed_layers.empty() ? "" : absl::StrCat(", ", p.recomputed_layers.size(), " layer(s) recomputed"),
                                absl::StrFormat(", %.1f ms/step predicted", p.cost.step_seconds * 1e3));
  a.predicted_peak_bytes = static_cast<int64_t>(p.cost.peak_bytes());
  return a;
}

}  // namespace mapd

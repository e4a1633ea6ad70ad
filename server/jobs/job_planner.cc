#include "server/jobs/job_planner.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/bytes.h"
#include "planner/graph/loss.h"
#include "planner/graph/verifier.h"
#include "planner/profile/profiler.h"
#include "planner/zoo/zoo.h"

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
  auto graph = MakeVerifiedGraph(std::move(proto));
  if (!graph.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("the job's graph does not verify: ", graph.status().message()));
  }
  // The graph the job trains: bf16 mixed precision plans and runs its bf16 form.
  auto precision = ResolvePrecision(spec.precision(), spec.device_type());
  if (!precision.ok()) return Named(precision.status(), "precision");
  return GraphAtPrecision(*graph, *precision);
}

absl::StatusOr<PlannerOptions> JobPlannerOptions(const v1::JobSpec& spec) {
  PlannerOptions o;
  o.cluster.devices = spec.ranks();
  o.cluster.mesh.assign(spec.mesh().begin(), spec.mesh().end());
  o.cluster.device_type = spec.device_type();
  o.cluster.memory_per_device = spec.memory_per_device();
  auto opt = ParseOptimizer(spec.optimizer());
  if (!opt.ok()) return opt.status();
  o.profile.optimizer = *opt;
  auto precision = ResolvePrecision(spec.precision(), spec.device_type());
  if (!precision.ok()) return precision.status();
  o.profile.precision = *precision;
  if (spec.zero() != "auto") o.zero_stage = spec.zero()[0] - '0';
  o.recompute = spec.recompute() == "auto";
  // ValidateJobSpec checked it: auto, or a count.
  if (spec.micro_batches() == "auto") {
    o.micro_batches = 0;
  } else if (!spec.micro_batches().empty() && !absl::SimpleAtoi(spec.micro_batches(), &o.micro_batches)) {
    return absl::InvalidArgumentError(absl::StrCat("micro_batches '", spec.micro_batches(), "' is not auto or a count"));
  }
  o.baselines = false;
  return o;
}

absl::Status NothingFitsError(const PlanResult& result, const v1::JobSpec& spec) {
  return absl::FailedPreconditionError(absl::StrFormat(
      "no plan fits %s per device on %d device(s); the least any plan needs is %s — give more memory per device, "
      "more ranks, or a smaller batch",
      FormatBytes(result.cluster.memory_per_device), spec.ranks(), FormatBytes(static_cast<int64_t>(result.min_memory_bytes))));
}

std::string PlanSummary(const PlanCandidate& p, Precision precision) {
  return absl::StrCat("mesh ", absl::StrJoin(p.mesh, "x"), p.zero_stage > 0 ? absl::StrCat(", ZeRO-", p.zero_stage) : "",
                      p.recomputed_layers.empty() ? "" : absl::StrCat(", ", p.recomputed_layers.size(), " layer(s) recomputed"),
                      p.micro_batches > 1 ? absl::StrCat(", ", p.micro_batches, " micro-batches") : "",
                      precision == Precision::kBf16Mixed ? ", bf16" : "", absl::StrFormat(", %.1f ms/step predicted", p.cost.step_seconds * 1e3));
}

absl::StatusOr<JobPlan> PlanJob(const v1::JobSpec& spec) {
  auto graph = BuildJobGraph(spec);
  if (!graph.ok()) return graph.status();
  auto options = JobPlannerOptions(spec);
  if (!options.ok()) return options.status();
  auto fitting = SearchFittingPlan(*graph, *options, spec.recompute());
  if (!fitting.ok()) return Named(fitting.status(), "planning");
  const PlanResult& r = fitting->result;
  if (!r.fits) return NothingFitsError(r, spec);
  JobPlan out;
  out.graph = graph->proto();
  out.mesh = r.plan.mesh;
  out.summary = PlanSummary(r.plan, options->profile.precision);
  if (fitting->lowered) {
    out.lowered = *std::move(fitting->lowered);
  } else {
    auto lowered = LowerAndPredict(*graph, r.plan.mesh, r.plan.strategies, r.plan.zero_stage, fitting->recompute,
                                   options->cluster.device_type, options->profile, r.plan.micro_batches);
    if (!lowered.ok()) return Named(lowered.status(), "lowering");
    out.lowered = *std::move(lowered);
  }
  out.predicted_peak_bytes = out.lowered.WorstPeak();
  out.items = ItemsPerStep(out.graph);
  ProfileOptions po = options->profile;
  po.device = r.cluster.device;
  po.timeline = false;
  auto profile = ProfileTrainingStep(*graph, po);
  if (!profile.ok()) return Named(profile.status(), "profiling");
  out.model_flops_per_step = profile->training_flops();
  out.device_peak_flops = r.cluster.device.fp32_flops;
  return out;
}

}  // namespace mapd

#include "planner/runnable/plan_request.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/bytes.h"
#include "common/plan_choices.h"
#include "common/training_config.h"
#include "model/graph/batch_norm_groups.h"
#include "model/graph/verifier.h"
#include "planner/plan/pins.h"
#include "planner/profile/profile_options.h"
#include "planner/profile/profiler.h"
#include "planner/sharding/cluster.h"

namespace mapd {

namespace {
// "pipeline_stages" as the flag (--pipeline-stages) or the field it is.
std::string NameOf(const PlanningChoices& c, const std::string& field) {
  return c.named_as_flags ? absl::StrCat("--", absl::StrReplaceAll(field, {{"_", "-"}})) : field;
}
}  // namespace

absl::Status PlanRequest::Validate() const {
  if (planner.pipeline_stages != 1 && !planner.cluster.mesh.empty()) {
    return absl::InvalidArgumentError("--mesh with --pipeline-stages: a pipeline's stages choose their own mesh; drop one of them");
  }
  if (strategy != "map" && planner.pipeline_stages != 1) {
    return absl::InvalidArgumentError(absl::StrCat("--pipeline-stages with --strategy ", strategy,
                                                   ": pipeline stages come with MAP's plan (--strategy map)"));
  }
  if (strategy != "map" && strategy != "dp" && strategy != "tp") {
    return absl::InvalidArgumentError(absl::StrCat("--strategy ", strategy, ": use map, dp or tp"));
  }
  if (!(memory_margin >= 0 && memory_margin <= 0.5)) {
    return absl::InvalidArgumentError(absl::StrCat("the memory margin is a fraction of the budget in [0, 0.5], not ", memory_margin));
  }
  // A baseline runs as people run it: data parallelism plain (ZeRO-0) or fully sharded (FSDP,
  // ZeRO-3); tensor parallelism over every device has no data axis to shard states over.
  const int zero = planner.zero_stage;
  if ((strategy == "dp" && (zero == 1 || zero == 2)) || (strategy == "tp" && zero > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--strategy ", strategy, " with --zero ", zero, ": ",
        strategy == "dp" ? "the data-parallel baselines are ZeRO-0 (plain) and ZeRO-3 (FSDP: --zero 3)"
                         : "tensor parallelism over every device has no data axis to shard optimizer states over",
        "; for ZeRO-", zero, " run MAP's plan under it (--strategy map --zero ", zero, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<PlanningChoices> ChoicesFromFlags(int64_t devices, const std::string& mesh, const std::string& device_type,
                                                 const std::string& memory_per_device) {
  PlanningChoices c;
  c.devices = devices;
  if (!mesh.empty()) {
    auto dims = ParseMesh(mesh);
    if (!dims.ok()) return dims.status();
    c.mesh = *dims;
  }
  c.device_type = device_type;
  if (!memory_per_device.empty()) {
    auto bytes = ParseBytes(memory_per_device);
    if (!bytes.ok()) return bytes.status();
    c.memory_per_device = *bytes;
  }
  return c;
}

PlanningChoices ChoicesOf(const v1::JobSpec& spec) {
  const v1::TrainingConfig training = WithTrainingDefaults(spec.training());
  PlanningChoices c;
  c.devices = spec.ranks();
  c.mesh.assign(spec.mesh().begin(), spec.mesh().end());
  // Empty: the workers' measured profile, which the coordinator names before planning
  // (Dispatcher::CostedSpec); a spec planned without it is costed on the catalogue's cpu.
  c.device_type = spec.device_type().empty() ? "cpu" : spec.device_type();
  c.memory_per_device = spec.memory_per_device();
  c.optimizer = training.optimizer();
  c.precision = training.precision();
  c.zero = spec.zero();
  c.recompute = spec.recompute().empty() ? "auto" : spec.recompute();
  c.micro_batches = training.micro_batches();
  c.pipeline_stages = spec.pipeline_stages();
  c.max_pipeline_stages = static_cast<int>(std::clamp<int64_t>(spec.ranks(), 1, kMaxPipelineStagesChoice));
  c.pin = spec.pin();
  c.named_as_flags = false;
  return c;
}

absl::StatusOr<PlanRequest> PlanRequestOf(const PlanningChoices& c) {
  PlanRequest request;
  request.strategy = c.strategy;
  request.recompute = c.recompute.empty() ? "auto" : c.recompute;
  PlannerOptions& o = request.planner;
  o.cluster.devices = c.devices;
  o.cluster.mesh = c.mesh;
  o.cluster.device_type = c.device_type;
  o.cluster.memory_per_device = c.memory_per_device;
  auto optimizer = ParseOptimizer(c.optimizer);
  if (!optimizer.ok()) return optimizer.status();
  o.profile.optimizer = *optimizer;
  auto precision = ResolvePrecision(c.precision, c.device_type);
  if (!precision.ok()) return precision.status();
  o.profile.precision = *precision;
  o.max_zero_stage = 3;
  auto zero = ParseZeroStage(c.zero, o.max_zero_stage, NameOf(c, "zero"));  // -1: auto
  if (!zero.ok()) return zero.status();
  o.zero_stage = *zero;
  // An explicit choice is the user's, not the search's (PlanToRun says the same).
  o.recompute = request.recompute == "auto";
  auto micro = ParseMicroBatches(c.micro_batches, NameOf(c, "micro_batches"));  // 0: auto
  if (!micro.ok()) return micro.status();
  auto stages = ParsePipelineStages(c.pipeline_stages, c.max_pipeline_stages, NameOf(c, "pipeline_stages"));  // 0: auto
  if (!stages.ok()) return stages.status();
  o.pipeline_stages = *stages;
  o.micro_batches = *stages != 1 && *micro == 1 ? 0 : *micro;
  auto pins = ParsePins(c.pin);
  if (!pins.ok()) {
    return pins.status();  // (it names the pin: "pin tp=3: ...")
  }
  o.pins = *pins;
  // Pinned stages stream at least as many micro-batches as stages: one pass a step means the search's choice.
  if (pins->pp >= 2 && *micro == 1) o.micro_batches = 0;
  // (The search applies the pins, recompute=full included: SearchPlan's ApplyPins.)
  if (pins->recompute == PlanPins::Recompute::kFull && request.recompute == "off") {
    return absl::InvalidArgumentError(absl::StrCat(NameOf(c, "recompute"), " off and the pin recompute=full disagree; give one"));
  }
  return request;
}

absl::StatusOr<Graph> TrainingGraphOf(v1::Graph trainable, const std::string& batch_norm, int batch_norm_groups,
                                      Precision precision) {
  if (batch_norm == "local") {
    auto grouped = GroupBatchNorms(std::move(trainable), std::max(1, batch_norm_groups));
    if (!grouped.ok()) {
      return absl::Status(grouped.status().code(), absl::StrCat("batch norm local: ", grouped.status().message()));
    }
    trainable = *std::move(grouped);
  }
  auto graph = MakeVerifiedGraph(std::move(trainable));
  if (!graph.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("the training graph does not verify: ", graph.status().message()));
  }
  return GraphAtPrecision(*graph, precision);
}

}  // namespace mapd

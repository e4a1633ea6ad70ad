#include "server/jobs/job_spec.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/data_spec.h"
#include "common/plan_choices.h"
#include "common/training_config.h"
#include "planner/plan/pins.h"
#include "planner/profile/device_profile.h"

namespace mapd {

namespace {


// text:FILE, tokens:FILE and npy:INPUTS[,TARGETS] name files under the workers' --data-root:
// relative, without '..' and bounded (ParseDataSpec), so that a job cannot read what the
// operator did not put there.
absl::Status CheckDataFiles(const std::string& data) {
  auto spec = ParseDataSpec(data.empty() ? "synthetic" : data);
  if (!spec.ok()) return spec.status();
  for (const std::string& file : spec->files) {
    bool parent = false;
    for (absl::string_view part : absl::StrSplit(file, '/')) parent = parent || part == "..";
    if (file[0] == '/' || parent) {
      return absl::InvalidArgumentError(absl::StrCat("data '", spec->kind, ":", file.substr(0, 200),
                                                     "': give a file relative to the workers' --data-root, without '..'"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SpecLimits::Validate() const {
  if (max_name_chars < 1 || max_model_spec_chars < 1 || max_steps < 1 || max_ranks < 1 || max_graph_nodes < 1) {
    return absl::InvalidArgumentError(absl::StrCat("job limits: --max-name-chars ", max_name_chars, ", --max-model-spec-chars ",
                                                   max_model_spec_chars, ", --max-steps ", max_steps, ", --max-ranks ", max_ranks,
                                                   ", --max-graph-nodes ", max_graph_nodes, ": give at least 1 of each"));
  }
  if (max_ranks > (int64_t{1} << 31) - 1) {
    return absl::InvalidArgumentError(absl::StrCat("--max-ranks ", max_ranks, ": give at most 2^31-1 (a job's ranks is an int32)"));
  }
  return absl::OkStatus();
}

namespace {

// The degrees a spec's `pin` fixes on its ranks (pins.h): INVALID_ARGUMENT naming the field for
// pins that do not parse or hold together, or that an elastic job cannot keep.
absl::StatusOr<PlanPins::Degrees> PinnedDegrees(const v1::JobSpec& s) {
  constexpr size_t kMaxPinChars = 256;
  if (s.pin().size() > kMaxPinChars) {
    return absl::InvalidArgumentError(absl::StrCat("pin is ", s.pin().size(), " characters; the pins (tp, pp, dp, mbs, "
                                                   "recompute, schedule, zero) take at most ", kMaxPinChars));
  }
  auto pins = ParsePins(s.pin());
  if (!pins.ok()) return pins.status();  // INVALID_ARGUMENT naming the pin
  if (s.has_elastic() && pins->dp > 0) {
    return absl::InvalidArgumentError(absl::StrCat("pin ", s.pin(), " fixes the data-parallel degree, which an elastic job's "
                                                   "devices change: pin tp and pp only"));
  }
  auto degrees = pins->Resolve(std::max(1, s.ranks()));
  if (!degrees.ok()) return degrees.status();
  return *degrees;
}

}  // namespace

absl::Status ValidateJobSpec(const v1::JobSpec& s, const SpecLimits& limits) {
  auto bad = [](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (s.model().empty() == !s.has_graph()) {
    return bad("give the model as a zoo spec (model) or as a graph, not ", s.model().empty() ? "neither" : "both");
  }
  if (static_cast<int64_t>(s.name().size()) > limits.max_name_chars) {
    return bad("the job's name has ", s.name().size(), " characters; give at most ", limits.max_name_chars);
  }
  if (static_cast<int64_t>(s.model().size()) > limits.max_model_spec_chars) {
    return bad("the model spec has ", s.model().size(), " characters; give at most ", limits.max_model_spec_chars);
  }
  if (s.has_graph()) {
    const v1::Graph& g = s.graph();
    for (const auto& [what, count] : {std::pair<const char*, int>{"nodes", g.nodes_size()}, {"parameters", g.parameters_size()},
                                      {"inputs", g.inputs_size()}}) {
      if (count > limits.max_graph_nodes) {
        return bad("the graph has ", count, " ", what, "; this coordinator takes at most ", limits.max_graph_nodes,
                   " (mapd --max-graph-nodes)");
      }
    }
  }
  if (s.ranks() <= 0 || s.ranks() > limits.max_ranks) {
    return bad("ranks is ", s.ranks(), "; give how many devices to train on, from 1 to ", limits.max_ranks);
  }
  if (s.mesh_size() > 0) {
    if (s.mesh_size() > 8) return bad("mesh has ", s.mesh_size(), " axes; give at most 8");
    int64_t devices = 1;
    for (int64_t d : s.mesh()) {
      if (d < 1) return bad("mesh ", absl::StrJoin(s.mesh(), "x"), " has an axis of size ", d);
      // The product is at most ranks at every step: it cannot wrap around.
      if (d > s.ranks() || devices > s.ranks() / d) {
        return bad("mesh ", absl::StrJoin(s.mesh(), "x"), " has more devices than ranks (", s.ranks(),
                   "); make them agree or drop the mesh");
      }
      devices *= d;
    }
    if (devices != s.ranks()) {
      return bad("mesh ", absl::StrJoin(s.mesh(), "x"), " has ", devices, " devices but ranks is ", s.ranks(),
                 "; make them agree or drop the mesh");
    }
  }
  if (!s.batch_norm().empty() && s.batch_norm() != "sync" && s.batch_norm() != "local") {
    return bad("batch_norm '", s.batch_norm().substr(0, 64), "' is not sync or local");
  }
  if (s.batch_norm_groups() != 0 && (s.batch_norm() != "local" || s.batch_norm_groups() < 0 || s.batch_norm_groups() > limits.max_ranks)) {
    return bad("batch_norm_groups is ", s.batch_norm_groups(), "; give it with batch_norm local, from 1 to ", limits.max_ranks,
               " (0: ranks)");
  }
  if (s.has_elastic()) {
    const v1::ElasticPolicy& e = s.elastic();
    if (e.min_devices() < 0 || e.min_devices() > s.ranks()) {
      return bad("elastic.min_devices is ", e.min_devices(), "; give the fewest devices the job goes on with, from 1 to ranks (",
                 s.ranks(), ")");
    }
    if (e.max_devices() != 0 && (e.max_devices() < s.ranks() || e.max_devices() > limits.max_ranks)) {
      return bad("elastic.max_devices is ", e.max_devices(), "; give the most devices the job grows to, from ranks (", s.ranks(),
                 ") to ", limits.max_ranks, ", or 0 for ranks");
    }
    // An elastic job changes its devices only at a committed checkpoint.
    if (s.training().checkpoint_every() <= 0) {
      return bad("elastic jobs resume and grow at checkpoints: give checkpoint_every (steps between checkpoints, > 0)");
    }
    if (s.mesh_size() > 0) {
      return bad("elastic jobs are planned anew for the devices they have: drop the mesh (", absl::StrJoin(s.mesh(), "x"), ")");
    }
  }
  if (s.memory_per_device() < 0) return bad("memory_per_device is ", s.memory_per_device(), "; give bytes (> 0) or 0 for the device's");
  const v1::TrainingConfig training = WithTrainingDefaults(s.training());
  if (auto st = ValidateTrainingConfig(training, limits.max_steps); !st.ok()) return st;
  if (auto zero = ParseZeroStage(s.zero(), 3, "zero"); !zero.ok()) return zero.status();
  auto stages = ParsePipelineStages(s.pipeline_stages(), std::max(1, s.ranks()), "pipeline_stages");
  if (!stages.ok()) return stages.status();
  auto pinned = PinnedDegrees(s);
  if (!pinned.ok()) return pinned.status();
  if (pinned->pp > 1) *stages = static_cast<int>(pinned->pp);
  if (const int p = *stages; p > 1) {  // (auto: the planner's choice, checked by it)
    if (s.mesh_size() > 0) return bad("a mesh and pipeline_stages ", p, ": a pipeline's stages choose their own mesh; drop one");
    if (s.device() == "cuda") {
      return bad("pipeline_stages ", p, " on device cuda: NCCL point-to-point transfers are not built yet; use device cpu");
    }
  }
  if (auto st = CheckDataFiles(training.data()); !st.ok()) return st;
  if (auto st = CheckDataFiles(training.eval_data()); !st.ok()) return absl::InvalidArgumentError(absl::StrCat("eval_data: ", st.message()));
  if (training.eval_every() > 0 && ((s.pipeline_stages() != "" && s.pipeline_stages() != "1") || pinned->pp > 1)) {
    return absl::UnimplementedError(absl::StrCat("eval_every with ", pinned->pp > 1 ? absl::StrCat("the pin pp=", pinned->pp)
                                                                                   : absl::StrCat("pipeline_stages ", s.pipeline_stages()),
                                                 ": evaluation under pipeline stages is not built yet; drop one"));
  }
  if (!s.device_type().empty() && FindDeviceProfile(s.device_type()) == nullptr) {
    std::vector<std::string> names;
    for (const DeviceProfile& p : KnownDeviceProfiles()) names.push_back(p.name);
    return bad("device_type '", s.device_type().substr(0, 64), "' is not one of this coordinator's: ", absl::StrJoin(names, ", "),
               " (a calibrated profile file is for mapctl on your own machine, or for the operator's mapd "
               "--device-profile-dir)");
  }
  if (s.has_graph()) {
    for (const v1::Parameter& p : s.graph().parameters()) {
      if (p.has_data() && !p.data().source().empty()) {
        return bad("parameter '", p.name().substr(0, 200), "' of the submitted graph reads its values from a file: a graph "
                   "sent to the coordinator names no files (its parameters are initialised by rule or carry their data)");
      }
    }
  }
  if (!s.device().empty() && s.device() != "cpu" && s.device() != "cuda") {
    return bad("device '", s.device(), "' is not cpu or cuda (the devices workers offer)");
  }
  return absl::OkStatus();
}

v1::JobSpec WithDefaults(v1::JobSpec s) {
  if (s.name().empty()) s.set_name(s.model().empty() ? s.graph().name() : s.model());
  if (s.device().empty()) s.set_device("cpu");
  if (s.zero().empty()) s.set_zero("auto");
  if (s.recompute().empty()) s.set_recompute("auto");
  if (s.pipeline_stages().empty()) s.set_pipeline_stages("1");
  *s.mutable_training() = WithTrainingDefaults(s.training());
  if (s.batch_norm().empty()) s.set_batch_norm("sync");
  if (s.batch_norm() == "local" && s.batch_norm_groups() == 0) s.set_batch_norm_groups(s.ranks());
  if (s.has_elastic()) {
    if (s.elastic().min_devices() == 0) s.mutable_elastic()->set_min_devices(1);
    if (s.elastic().max_devices() == 0) s.mutable_elastic()->set_max_devices(s.ranks());
  }
  return s;
}

}  // namespace mapd

// mapctl-torch's side of the seam (torch_commands.h): the functions that need LibTorch.
#include "client/mapctl/torch_commands.h"

#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "model/graph/verifier.h"
#include "model/import/input_spec.h"
#include "model/import/torchscript_importer.h"
#include "planner/profile/device_profile.h"
#include "worker/calibrate/calibrate.h"
#include "worker/calibrate/calibration_cache.h"
#include "worker/local/local_training.h"
#include "worker/runtime/state_dict_file.h"

namespace mapd::cli {

void RememberCommandLine(int, char**) {}  // (nothing to hand on: this is the program that has it all)

absl::StatusOr<v1::Graph> ImportTorchScriptModel(const std::string& path, const std::vector<std::string>& input_specs) {
  if (!LooksLikeTorchScript(path)) {
    return absl::InvalidArgumentError(absl::StrCat("cannot tell what '", path, "' is: use a .pt TorchScript archive or a .pb/.json MAP graph"));
  }
  ImportOptions options;
  for (const auto& s : input_specs) {
    MAPD_ASSIGN_OR_RETURN(InputSpec spec, ParseInputSpec(s));
    options.inputs.push_back(std::move(spec));
  }
  return ImportTorchScript(path, options);
}

absl::Status InitFrom(const std::string& path, v1::Graph& graph) {
  if (path.empty()) return absl::OkStatus();
  MAPD_ASSIGN_OR_RETURN(std::vector<v1::TensorData> state, ReadStateDict(path));
  return SetInitialWeights(state, graph);
}

absl::Status InlineParameterData(v1::Graph& graph) {
  ArchiveScope archives;  // each archive loaded once
  for (v1::Parameter& p : *graph.mutable_parameters()) {
    if (!p.has_data() || p.data().source().empty()) continue;
    auto data = LoadParameterData(p);
    if (!data.ok()) return data.status();
    v1::DataRef* ref = p.mutable_data();
    ref->set_inline_data(std::string(data->bytes.begin(), data->bytes.end()));
    ref->clear_source();
    if (data->bytes.empty()) ref->set_key("constant:inline");  // no bytes: still read inline
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<AtenOpPath>> AtenOpPathList() { return AtenOpPaths(); }

absl::StatusOr<std::string> ResolveDeviceType(const std::string& device_type) {
  if (device_type != "auto") return device_type;
  if (auto set = AutoDeviceTypeWithoutCache()) return *set;
  const std::string dir = DefaultCalibrationCacheDir();
  bool told = false;
  auto cached = LoadOrCalibrate(dir, ThisHostKey(), [&] {
    std::cerr << "mapctl: measuring this host for the cost model (once per host and build; kept in " << dir
              << "; --device-type cpu for the catalogue's figures)..." << std::endl;
    told = true;
    return CalibrateCpu(HostCalibrateOptions());
  });
  if (!cached.ok()) {
    return absl::Status(cached.status().code(), absl::StrCat("--device-type auto: ", cached.status().message(),
                                                             " (or give --device-type cpu, a catalogue name or a profile file)"));
  }
  if (told) std::cerr << absl::StrFormat("mapctl: measured in %.1f s (%s)", cached->seconds, cached->why) << std::endl;
  return RegisterMeasuredProfile(cached->profile);
}

absl::StatusOr<MeasureResult> MeasureSteps(const v1::Graph& graph, int steps, const std::string& optimizer) {
  LocalTrainingOptions m;
  m.training.set_steps(steps);
  m.training.set_optimizer(optimizer == "adam" ? "adamw" : optimizer);
  return MeasureTraining(graph, m);
}

}  // namespace mapd::cli

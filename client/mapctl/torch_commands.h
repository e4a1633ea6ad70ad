// What mapctl does with LibTorch, behind one seam, so that the control-plane commands (jobs, get,
// watch, logs, submit of a zoo model or graph file, workers, ...) start in milliseconds:
//
//   mapctl        links no LibTorch. Where a command needs it — run, calibrate, export,
//                 profile --measure, ops --aten, a .pt model, --init-from — the functions below
//                 replace this process with `mapctl-torch` and the same command line (exec),
//                 before the command has done anything.
//   mapctl-torch  the same commands with the real functions (torch_commands.cc): everything.
//
// RunTraining, RunCalibrate and RunExport (commands.h) are on the same seam.
#ifndef MAPD_CLIENT_MAPCTL_TORCH_COMMANDS_H_
#define MAPD_CLIENT_MAPCTL_TORCH_COMMANDS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/import/torchscript_importer.h"  // AtenOpPath (torch-free header)
#include "proto/mapd/v1/graph.pb.h"
#include "worker/measure/measure.h"

namespace mapd::cli {

// The command line main was given: what mapctl hands to mapctl-torch.
void RememberCommandLine(int argc, char** argv);

// A TorchScript archive imported (input specs NAME:DTYPE[D0,...]).
absl::StatusOr<v1::Graph> ImportTorchScriptModel(const std::string& path, const std::vector<std::string>& input_specs);

// --init-from FILE: the graph's parameters and buffers start from a PyTorch state dict (a
// torch.save file), names and shapes checked (worker/runtime/state_dict_file.h); nothing for an
// empty `path`.
absl::Status InitFrom(const std::string& path, v1::Graph& graph);

// The values of every parameter the graph reads from a TorchScript archive, carried in the graph
// instead (DataRef.inline_data): what is sent to a coordinator names no files on this machine.
// Nothing to do (and no LibTorch needed) for a graph whose parameters read no archive.
absl::Status InlineParameterData(v1::Graph& graph);

// Every ATen operator and how the importer takes it: a hand-written entry or the generic path
// (`mapctl ops --aten`).
absl::StatusOr<std::vector<AtenOpPath>> AtenOpPathList();

// `steps` real training steps of `graph` on this CPU, memory counted (`mapctl profile --measure`).
absl::StatusOr<MeasureResult> MeasureSteps(const v1::Graph& graph, int steps, const std::string& optimizer);

// `--device-type auto` (mapctl run's default, and profile --measure's): this host's calibration,
// read from its cache, measured there first when missing or made on another host or build
// (calibration_cache.h; saying so on stderr, ~12 s on 2 cores) — the name of that profile,
// registered in this process ("measured-this-host-1f2e3d4c"); with $MAPD_CALIBRATION off the
// catalogue's cpu, with it a file that file. Any other value is returned as it is.
absl::StatusOr<std::string> ResolveDeviceType(const std::string& device_type);

}  // namespace mapd::cli

#endif  // MAPD_CLIENT_MAPCTL_TORCH_COMMANDS_H_

// mapctl's side of the seam (torch_commands.h): this program links no LibTorch, so what needs it
// runs the same command line in mapctl-torch instead — exec, before the command has done
// anything, so its output, exit code and signals are mapctl-torch's.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/mapctl/commands.h"
#include "client/mapctl/torch_commands.h"
#include "common/file_io.h"
#include "worker/calibrate/calibration_cache.h"

namespace mapd::cli {

namespace {

std::vector<std::string>& CommandLine() {
  static std::vector<std::string> argv;
  return argv;
}

// mapctl-torch beside this program (an install, the build tree), else on PATH.
absl::StatusOr<std::string> FindTorchBinary() {
  auto found = FindExecutable("mapctl-torch", {"."}, "this command needs LibTorch, which mapctl runs in mapctl-torch; install it "
                                                     "beside mapctl or put it on PATH");
  if (!found.ok()) return absl::FailedPreconditionError(found.status().message());
  return found;
}

// Runs this command line in mapctl-torch; returns only when that cannot start.
absl::Status ExecTorch() {
  auto binary = FindTorchBinary();
  if (!binary.ok()) return binary.status();
  std::vector<std::string>& args = CommandLine();
  std::vector<char*> argv;
  argv.push_back(binary->data());
  for (size_t i = 1; i < args.size(); ++i) argv.push_back(args[i].data());
  argv.push_back(nullptr);
  std::cout.flush();
  std::cerr.flush();
  execv(binary->c_str(), argv.data());
  return absl::InternalError(absl::StrCat("cannot run ", *binary, ": ", std::strerror(errno)));
}

int ExecTorchOrFail() { return ReportError(ExecTorch()); }

}  // namespace

void RememberCommandLine(int argc, char** argv) { CommandLine().assign(argv, argv + argc); }

absl::StatusOr<v1::Graph> ImportTorchScriptModel(const std::string&, const std::vector<std::string>&) { return ExecTorch(); }

absl::Status InitFrom(const std::string& path, v1::Graph&) { return path.empty() ? absl::OkStatus() : ExecTorch(); }

absl::Status InlineParameterData(v1::Graph& graph) {
  for (const v1::Parameter& p : graph.parameters()) {
    if (p.has_data() && !p.data().source().empty()) return ExecTorch();
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<AtenOpPath>> AtenOpPathList() { return ExecTorch(); }

absl::StatusOr<MeasureResult> MeasureSteps(const v1::Graph&, int, const std::string&) { return ExecTorch(); }

absl::StatusOr<std::string> ResolveDeviceType(const std::string& device_type) {
  if (device_type != "auto") return device_type;
  if (auto set = AutoDeviceTypeWithoutCache()) return *set;
  return ExecTorch();  // this host's calibration: mapctl-torch reads or makes it
}

// The commands that are LibTorch through and through.
int RunTraining(const RunArgs&) { return ExecTorchOrFail(); }
int RunExport(const ExportArgs&) { return ExecTorchOrFail(); }
int RunCalibrate(const std::string&, const std::string&, bool, const std::vector<int64_t>&, int) { return ExecTorchOrFail(); }

}  // namespace mapd::cli

#include "worker/daemon/host_profile.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_io.h"
#include "worker/calibrate/calibration_cache.h"

namespace mapd {

absl::Status HostProfileOptions::Validate() const {
  if (calibration.empty()) return absl::InvalidArgumentError("--calibration: give auto, off or a profile's JSON file");
  if (!(timeout_seconds > 0)) return absl::InvalidArgumentError("the calibration's timeout must be positive");
  return absl::OkStatus();
}

namespace {

// Runs `rank_program --calibrate-host out` to completion (its stdout and stderr into this
// process's stderr), killing it past `timeout_seconds`; then reads the profile it wrote.
absl::StatusOr<DeviceProfile> MeasureInAProcess(const std::string& rank_program, const std::string& out, double timeout_seconds) {
  const pid_t pid = fork();
  if (pid < 0) return absl::UnavailableError("cannot start the calibration process (fork failed)");
  if (pid == 0) {
    dup2(STDERR_FILENO, STDOUT_FILENO);
    setenv("OMP_NUM_THREADS", "1", 1);  // the threads the worker's ranks run with (job_runner.cc)
    execl(rank_program.c_str(), rank_program.c_str(), "--calibrate-host", out.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return absl::DeadlineExceededError(absl::StrFormat("calibrating this host took over %.0f s; start with --calibration off", timeout_seconds));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(absl::StrCat(rank_program, " --calibrate-host failed (its error is above); start with --calibration off ",
                                            "to register without a measured profile"));
  }
  auto text = ReadFileToString(out);
  if (!text.ok()) return text.status();
  std::remove(out.c_str());
  return DeviceProfile::FromJson(*text);
}

}  // namespace

absl::StatusOr<HostProfile> HostProfileAtStart(const HostProfileOptions& options) {
  if (auto st = options.Validate(); !st.ok()) return st;
  HostProfile out;
  if (options.calibration == "off") {
    out.note = "no measured profile (--calibration off): jobs here are costed on the catalogue's";
    return out;
  }
  if (options.calibration != "auto") {
    auto text = ReadFileToString(options.calibration);
    if (!text.ok()) return text.status();
    auto profile = DeviceProfile::FromJson(*text);
    if (!profile.ok()) return absl::InvalidArgumentError(absl::StrCat("--calibration ", options.calibration, ": ", profile.status().message()));
    out.profile = *std::move(profile);
    out.note = absl::StrCat("the profile in ", options.calibration, " (", out.profile->name, ")");
    return out;
  }
  const std::string dir = options.cache_dir.empty() ? DefaultCalibrationCacheDir() : options.cache_dir;
  auto cached = LoadOrCalibrate(dir, ThisHostKey(), [&]() -> absl::StatusOr<DeviceProfile> {
    return MeasureInAProcess(options.rank_program, dir + "/host-calibration.measuring.json", options.timeout_seconds);
  });
  if (!cached.ok()) return cached.status();
  out.profile = cached->profile;
  out.note = cached->measured_now ? absl::StrFormat("measured this host in %.1f s (%s); kept in %s", cached->seconds, cached->why, cached->path)
                                  : absl::StrFormat("this host's calibration from %s (%.3f s)", cached->path, cached->seconds);
  return out;
}

}  // namespace mapd

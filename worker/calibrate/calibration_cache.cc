#include "worker/calibrate/calibration_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "common/file_io.h"
#include "common/file_lock.h"
#include "common/version.h"

namespace mapd {

std::string CalibrationKey::ToString() const { return absl::StrCat("host: ", host, "; software: ", software); }

namespace {

// /proc/cpuinfo's first "model name" (empty where there is none).
std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon != std::string::npos) return std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
  }
  return "";
}

// The processes runnable now besides this one: /proc/loadavg's fourth field ("3/412": runnable /
// all), sampled 5 times over 0.1 s; 0 where it cannot be read. $MAPD_FAKE_RUNNABLE stands in for
// it (the environment seam: an end-to-end test run beside others says its host is quiet).
double OtherRunnable() {
  if (const char* fake = std::getenv("MAPD_FAKE_RUNNABLE"); fake != nullptr && *fake != '\0') return std::atof(fake);
  double sum = 0;
  for (int i = 0; i < 5; ++i) {
    std::ifstream in("/proc/loadavg");
    double one = 0, five = 0, fifteen = 0;
    std::string runnable;
    if (!(in >> one >> five >> fifteen >> runnable)) return 0;
    sum += std::max(0.0, std::atof(runnable.c_str()) - 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return sum / 5;
}

}  // namespace

CalibrationKey ThisHostKey() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  CalibrationKey key;
  key.host = absl::StrCat(host, ", ", CpuModel().empty() ? "unknown CPU" : CpuModel(), ", ", std::thread::hardware_concurrency(),
                          " hardware threads, ", static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE), " bytes of memory");
  key.software = absl::StrCat("MAP ", MapdVersion(), " (revision ", MapdRevision(), "), LibTorch ", MapdTorchVersion(),
                              ", calibration procedure ", kCalibrationProcedure);
  return key;
}

std::string DefaultCalibrationCacheDir() {
  auto set = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v != nullptr ? v : "";
  };
  if (!set("MAPD_CACHE_DIR").empty()) return set("MAPD_CACHE_DIR");
  if (!set("XDG_CACHE_HOME").empty()) return set("XDG_CACHE_HOME") + "/mapd";
  if (!set("HOME").empty()) return set("HOME") + "/.cache/mapd";
  return "";
}

std::string DefaultCalibrationSetting() {
  const char* v = std::getenv("MAPD_CALIBRATION");
  return v != nullptr && *v != '\0' ? v : "auto";
}

std::string MemoryRecordDir() { return DefaultCalibrationSetting() == "auto" ? DefaultCalibrationCacheDir() : ""; }

std::optional<std::string> AutoDeviceTypeWithoutCache() {
  const std::string setting = DefaultCalibrationSetting();
  if (setting == "auto") return std::nullopt;
  return setting == "off" ? "cpu" : setting;
}

absl::StatusOr<CachedCalibration> LoadOrCalibrate(const std::string& dir, const CalibrationKey& key, const MeasureHostFn& measure,
                                                  double load) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  if (dir.empty()) {
    return absl::FailedPreconditionError("no directory to cache this host's calibration in: set MAPD_CACHE_DIR (or HOME)");
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot make the calibration cache directory ", dir, ": ", ec.message()));
  chmod(dir.c_str(), 0700);
  auto lock = FileLock::Acquire(dir + "/host-calibration.lock", "the calibration lock");
  if (!lock.ok()) return lock.status();
  CachedCalibration out;
  out.path = dir + "/host-calibration.json";
  const std::string want = key.ToString();
  // Whether the host is busy, sampled (0.1 s) only where it matters: a cached measurement made on
  // a busy host, and a measurement about to be made — not every start that reads the cache.
  const double threads = std::max(1u, std::thread::hardware_concurrency());
  std::optional<bool> busy_now;
  auto busy = [&] {
    if (!busy_now) {
      if (load < 0) load = OtherRunnable();
      busy_now = load > threads / 2;
    }
    return *busy_now;
  };
  auto text = ReadFileToString(out.path);
  if (text.ok()) {
    auto cached = DeviceProfile::FromJson(*text);
    const bool quiet_now = cached.ok() && cached->measured_busy && !busy();
    if (cached.ok() && cached->calibration_key == want && !quiet_now) {
      out.profile = *std::move(cached);
      out.seconds = std::chrono::duration<double>(Clock::now() - start).count();
      return out;
    }
    if (!cached.ok()) {
      out.why = "the cached calibration does not parse";
    } else if (cached->calibration_key == want) {
      out.why = "it was measured on a busy host, and the host is quiet now";
    } else {
      // Which part changed, for the message.
      const bool same_host = absl::StartsWith(cached->calibration_key, absl::StrCat("host: ", key.host, ";"));
      out.why = same_host ? "this build differs from the one it was measured with" : "the host differs from the one it was measured on";
    }
  } else {
    out.why = "no calibration is cached for this host";
  }
  const bool measuring_busy = busy();
  auto measured = measure();
  if (!measured.ok()) return measured.status();
  measured->calibration_key = want;
  measured->measured_unix_seconds = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  if (auto st = measured->Validate(); !st.ok()) return st;
  measured->measured_busy = measuring_busy;
  if (measuring_busy) {
    absl::StrAppend(&out.why, absl::StrFormat("; the host was busy (%.1f other processes runnable on %.0f hardware threads): measured "
                                              "again at the first start on a quiet host", load, threads));
  }
  if (auto st = WriteStringToFileAtomic(out.path, measured->ToJson() + "\n"); !st.ok()) return st;
  out.profile = *std::move(measured);
  out.measured_now = true;
  out.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return out;
}

}  // namespace mapd

// This host's calibration, measured once and kept (DESIGN §5; docs/coordinator.md "Measured
// profiles"): `mapd-worker` at start and `mapctl run` (its default `--device-type auto`) read the
// profile cached for this host and this build, and measure again only when either changed — a
// calibration takes seconds, a read microseconds. No LibTorch here: the measuring is the
// caller's (a `mapd-rank --calibrate-host` process for the worker, in-process for mapctl).
//
// The cache is one file, DIR/host-calibration.json: the profile as `mapctl calibrate` writes it
// (so `--device-type DIR/host-calibration.json` reads it too), with its calibration_key. Whoever reads
// or measures holds an exclusive lock on DIR/host-calibration.lock, so two workers starting
// together on one host measure once — the second waits and reads — and never side by side, where
// each would measure the other's load.
#ifndef MAPD_WORKER_CALIBRATE_CALIBRATION_CACHE_H_
#define MAPD_WORKER_CALIBRATE_CALIBRATION_CACHE_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "planner/profile/device_profile.h"

namespace mapd {

// What a calibration depends on: the host (its name, CPU model, hardware threads and memory) and
// the software (MAP's version and revision, the LibTorch it links, and the calibration
// procedure's own version, kCalibrationProcedure — raised when what is measured changes).
struct CalibrationKey {
  std::string host;
  std::string software;
  std::string ToString() const;  // "host: ...; software: ..."
};
inline constexpr int kCalibrationProcedure = 1;

// This machine's and this build's key.
CalibrationKey ThisHostKey();

// $MAPD_CACHE_DIR, else $XDG_CACHE_HOME/mapd, else $HOME/.cache/mapd; empty when none is set.
std::string DefaultCalibrationCacheDir();

// Where a measured profile comes from by default: $MAPD_CALIBRATION — auto (this host, cached;
// the default), off (none: the catalogue's cpu), or a profile's JSON file — for mapd-worker's
// --calibration and mapctl's --device-type auto. (Tests set it to off: their plans then do not
// depend on the machine they run on.)
std::string DefaultCalibrationSetting();

// `--device-type auto` as far as it resolves without this host's calibration: "cpu" (the
// catalogue's; $MAPD_CALIBRATION off) or the file $MAPD_CALIBRATION names; nullopt when the
// cached calibration is wanted (auto).
std::optional<std::string> AutoDeviceTypeWithoutCache();

// The directory of this host's memory record (planner/runnable/memory_margin.h): the calibration
// cache's, where this host's calibration is used ($MAPD_CALIBRATION auto); empty otherwise — runs
// costed on the catalogue's figures or a given profile (tests: off) learn nothing from this host
// and keep the default margin.
std::string MemoryRecordDir();

struct CachedCalibration {
  DeviceProfile profile;
  bool measured_now = false;  // measured by this call (the cache was missing, stale or unreadable)
  double seconds = 0;         // this call's time, the wait for the lock included
  std::string path;           // the cache file
  std::string why;            // when measured: "no calibration cached", "the host changed", ...
};

using MeasureHostFn = std::function<absl::StatusOr<DeviceProfile>()>;

// The profile cached in `dir` under `key`, or `measure()`'s — stamped with the key and the time
// and written there — when there is none, it is under another key, or it does not parse. A
// measurement begun while the host was busy (more other processes runnable than half its
// hardware threads, sampled over 0.1 s — another job, a build, a test suite; not the 1-minute load
// average, which stays high for a minute after a build ends) is marked so (DeviceProfile::measured_busy), and
// the first call on a quiet host measures again: a calibration made during a test suite priced
// the demo's plan at 1.6x its step on the quiet host. (A busy host's calls keep using it: there
// is nothing better to measure then.)
// `dir` is made (0700) when missing. Errors name the file: a directory that cannot be made or
// locked, a measurement that failed.
// `load` stands in for the other processes runnable (tests); < 0: sampled from /proc/loadavg.
absl::StatusOr<CachedCalibration> LoadOrCalibrate(const std::string& dir, const CalibrationKey& key, const MeasureHostFn& measure,
                                                  double load = -1);

}  // namespace mapd

#endif  // MAPD_WORKER_CALIBRATE_CALIBRATION_CACHE_H_

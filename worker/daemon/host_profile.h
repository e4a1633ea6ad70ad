// The profile a worker registers with (docs/coordinator.md "Measured profiles"): this host as it
// measured it — read from the host's calibration cache (calibration_cache.h), or measured by a
// `mapd-rank --calibrate-host` process when the cache is missing or was made on another host or
// build — a profile file the operator gives, or none. No LibTorch here.
#ifndef MAPD_WORKER_DAEMON_HOST_PROFILE_H_
#define MAPD_WORKER_DAEMON_HOST_PROFILE_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "planner/profile/device_profile.h"
#include "worker/calibrate/calibration_cache.h"

namespace mapd {

struct HostProfileOptions {
  // auto: the cached calibration, measured when stale; off: none (jobs are costed on the
  // catalogue's profile); else the path of a JSON profile (`mapctl calibrate -o FILE`), sent as is.
  std::string calibration = DefaultCalibrationSetting();
  std::string cache_dir;     // where the calibration is kept (default: DefaultCalibrationCacheDir())
  std::string rank_program;  // the mapd-rank binary that measures
  double timeout_seconds = 300;  // a measurement longer than this fails the start
  absl::Status Validate() const;
};

struct HostProfile {
  std::optional<DeviceProfile> profile;  // none with calibration off
  std::string note;  // one line for the log: "measured this host in 11.8 s (no calibration cached ...); kept in ..."
};

absl::StatusOr<HostProfile> HostProfileAtStart(const HostProfileOptions& options);

}  // namespace mapd

#endif  // MAPD_WORKER_DAEMON_HOST_PROFILE_H_

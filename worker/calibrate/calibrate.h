// Measures the local machine's compute and memory rates with LibTorch and returns them as a
// DeviceProfile for the profiler (`mapctl calibrate`).
#ifndef MAPD_WORKER_CALIBRATE_CALIBRATE_H_
#define MAPD_WORKER_CALIBRATE_CALIBRATE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "planner/profile/device_profile.h"

namespace mapd {

struct CalibrateOptions {
  std::string name = "local-cpu";  // name of the profile written
  int matmul_size = 1024;          // square matmul edge (FLOP rate)
  int64_t copy_bytes = 256LL << 20;  // bytes copied per bandwidth run
  double min_seconds = 0.3;        // time spent per measurement (more = steadier)
  // Every measurement made this many times, round after round; the profile keeps each figure's
  // median (1..9): one slow minute of a shared host does not set the rates.
  int rounds = 3;
  // Also measure Gloo all-reduces among this many ranks at once (processes forked from this one,
  // meeting at a TCPStore it serves, as local ranks do), for each group size listed (each 2..8):
  // the profile's host_collectives — and how fast each of that many processes computes while
  // all of them do (a small training step in each, against one process alone). Empty: none.
  std::vector<int64_t> collective_ranks;

  absl::Status Validate() const;
};

// What a host's calibration at start measures (`mapd-worker`, and `mapctl run`'s `--device-type
// auto`; cached by calibration_cache.h): every figure, in three rounds, at half the time per
// measurement of `mapctl calibrate` (about 12 s on a 2-core host, against 22), and the
// collectives and compute speed of 2, 4, ... rank processes up to twice the hardware threads
// (at most 8): the counts ranks of one host come in, whichever workers start them.
CalibrateOptions HostCalibrateOptions();

// CPU only for now: FAILED_PRECONDITION for other devices. With collective_ranks, also the
// collectives among that many local ranks (a few seconds each).
absl::StatusOr<DeviceProfile> CalibrateCpu(const CalibrateOptions& options);

}  // namespace mapd

#endif  // MAPD_WORKER_CALIBRATE_CALIBRATE_H_

// Device profiles: how fast a device computes and moves memory, for the profiler's roofline
// time model (time of a kernel = max(FLOPs / peak rate, bytes / bandwidth) + launch overhead).
// A catalogue of common accelerators, plus profiles measured on the local machine by
// `mapctl calibrate` and saved as JSON.
#ifndef MAPD_PLANNER_PROFILE_DEVICE_PROFILE_H_
#define MAPD_PLANNER_PROFILE_DEVICE_PROFILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace mapd {

struct DeviceProfile {
  std::string name;            // "h100-80g", or the name given at calibration
  std::string description;
  double fp32_flops = 0;       // dense FP32 matmul rate, FLOP/s (no TF32)
  double bf16_flops = 0;       // dense BF16 matmul rate, FLOP/s
  double memory_bandwidth = 0;  // bytes/s
  double kernel_overhead_seconds = 0;  // fixed cost per kernel launch / dispatch
  int64_t memory_bytes = 0;    // device memory capacity
  std::string source = "catalogue";  // "catalogue" or "measured"
  // A GPU-class accelerator (the catalogue's A100/H100/H200): its default precision is bf16
  // (what people train with there); the CPU's is fp32.
  bool accelerator = false;

  absl::Status Validate() const;
  std::string ToJson() const;
  static absl::StatusOr<DeviceProfile> FromJson(const std::string& json);
};

// The built-in catalogue: cpu, a100-40g, a100-80g, h100-80g, h200-141g.
const std::vector<DeviceProfile>& DeviceCatalogue();

// Profiles an operator adds to the catalogue (mapd --device-profile-dir): every *.json file in
// `dir` (as `mapctl calibrate` writes them), known by its `name`. Called once at startup, before
// any lookup; INVALID_ARGUMENT naming the file for one that does not parse or reuses a name.
absl::Status AddOperatorProfiles(const std::string& dir);
// Every profile a name may select: the catalogue's, then the operator's.
std::vector<DeviceProfile> KnownDeviceProfiles();
// The catalogue's or the operator's profile of that name — a name only, never a path (what a
// coordinator's client may select); nullptr for none.
const DeviceProfile* FindDeviceProfile(const std::string& name);

// A known profile's name, or a path to a JSON profile written by `mapctl calibrate`.
absl::StatusOr<DeviceProfile> LoadDeviceProfile(const std::string& name_or_path);

}  // namespace mapd

#endif  // MAPD_PLANNER_PROFILE_DEVICE_PROFILE_H_

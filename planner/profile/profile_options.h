// Options of the symbolic profiler.
#ifndef MAPD_PLANNER_PROFILE_PROFILE_OPTIONS_H_
#define MAPD_PLANNER_PROFILE_PROFILE_OPTIONS_H_

#include <string>

#include "absl/status/statusor.h"
#include "planner/profile/device_profile.h"

namespace mapd {

enum class Optimizer {
  kSgd,          // p -= lr * g: no state
  kSgdMomentum,  // one fp32 buffer per parameter
  kAdamW,        // two fp32 moments per parameter
};

enum class Precision {
  kFp32,        // everything in the graph's dtypes
  kBf16Mixed,   // bf16 weights, activations and gradients; fp32 master weights and optimizer states
};

struct ProfileOptions {
  // The optimizer whose state and step are simulated.
  Optimizer optimizer = Optimizer::kAdamW;
  // Number formats of weights, activations, gradients and optimizer state.
  Precision precision = Precision::kFp32;
  // Compute and memory rates for the time estimates.
  DeviceProfile device = DeviceCatalogue().front();
  // Record one timeline point per event (forward node, backward node, optimizer); off saves
  // time and memory for huge models when only the peak is wanted.
  bool timeline = true;

  absl::Status Validate() const { return device.Validate(); }
};

absl::StatusOr<Optimizer> ParseOptimizer(const std::string& name);    // sgd | momentum | adamw
absl::StatusOr<Precision> ParsePrecision(const std::string& name);    // fp32 | bf16
const char* OptimizerName(Optimizer o);
const char* PrecisionName(Precision p);

}  // namespace mapd

#endif  // MAPD_PLANNER_PROFILE_PROFILE_OPTIONS_H_

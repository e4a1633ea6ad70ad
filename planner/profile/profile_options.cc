#include "planner/profile/profile_options.h"

#include "absl/strings/str_cat.h"

namespace mapd {

absl::StatusOr<Optimizer> ParseOptimizer(const std::string& name) {
  if (name == "sgd") return Optimizer::kSgd;
  if (name == "momentum" || name == "sgd-momentum") return Optimizer::kSgdMomentum;
  if (name == "adamw" || name == "adam") return Optimizer::kAdamW;
  return absl::InvalidArgumentError(absl::StrCat("unknown optimizer '", name, "': use sgd, momentum or adamw"));
}

absl::StatusOr<Precision> ParsePrecision(const std::string& name) {
  if (name == "fp32" || name == "f32") return Precision::kFp32;
  if (name == "bf16" || name == "bf16-mixed") return Precision::kBf16Mixed;
  return absl::InvalidArgumentError(absl::StrCat("unknown precision '", name,
                                                 "': use fp32, or bf16 (mixed precision with fp32 master weights)"));
}

absl::StatusOr<Precision> ResolvePrecision(const std::string& name, const std::string& device_type) {
  if (name != "auto" && !name.empty()) return ParsePrecision(name);
  auto device = LoadDeviceProfile(device_type.empty() ? "cpu" : device_type);
  if (!device.ok()) return device.status();
  return device->accelerator ? Precision::kBf16Mixed : Precision::kFp32;
}

const char* OptimizerName(Optimizer o) {
  switch (o) {
    case Optimizer::kSgd: return "sgd";
    case Optimizer::kSgdMomentum: return "momentum";
    case Optimizer::kAdamW: return "adamw";
  }
  return "?";
}

const char* PrecisionName(Precision p) { return p == Precision::kFp32 ? "fp32" : "bf16"; }

}  // namespace mapd

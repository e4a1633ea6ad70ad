#include "common/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace mapd {

absl::StatusOr<LrSchedule::Kind> ParseLrScheduleKind(const std::string& name) {
  if (name == "constant") return LrSchedule::Kind::kConstant;
  if (name == "cosine") return LrSchedule::Kind::kCosine;
  if (name == "linear") return LrSchedule::Kind::kLinear;
  return absl::InvalidArgumentError(absl::StrCat("learning-rate schedule '", name, "': use constant, cosine or linear"));
}

const char* LrScheduleKindName(LrSchedule::Kind kind) {
  switch (kind) {
    case LrSchedule::Kind::kCosine: return "cosine";
    case LrSchedule::Kind::kLinear: return "linear";
    case LrSchedule::Kind::kConstant: break;
  }
  return "constant";
}

absl::StatusOr<LrSchedule> MakeLrSchedule(const std::string& kind, int64_t warmup_steps, double min_lr, int64_t total_steps) {
  LrSchedule s;
  if (!kind.empty()) {
    auto parsed = ParseLrScheduleKind(kind);
    if (!parsed.ok()) return parsed.status();
    s.kind = *parsed;
  }
  s.warmup_steps = warmup_steps;
  s.min_lr = min_lr;
  s.total_steps = total_steps;
  return s;
}

absl::Status LrSchedule::Validate(double lr) const {
  if (warmup_steps < 0) return absl::InvalidArgumentError(absl::StrCat("warm-up steps (--warmup-steps) must be >= 0, got ", warmup_steps));
  if (kind == Kind::kConstant) {
    if (min_lr != 0) {
      return absl::InvalidArgumentError(absl::StrCat("--min-lr ", min_lr, " with a constant schedule: give --lr-schedule cosine or linear"));
    }
    return absl::OkStatus();
  }
  if (!(min_lr >= 0 && min_lr <= lr)) {
    return absl::InvalidArgumentError(absl::StrCat("the minimum learning rate (--min-lr) must be in [0, lr = ", lr, "], got ", min_lr));
  }
  if (total_steps <= warmup_steps) {
    return absl::InvalidArgumentError(absl::StrCat("a ", LrScheduleKindName(kind), " schedule decays after the warm-up: the run's ",
                                                   total_steps, " steps leave none after ", warmup_steps,
                                                   " warm-up steps; give more steps or fewer --warmup-steps"));
  }
  return absl::OkStatus();
}

double LearningRateAt(const LrSchedule& s, double lr, int64_t step) {
  const int64_t t = std::max<int64_t>(step, 1);
  if (t <= s.warmup_steps) return lr * static_cast<double>(t) / static_cast<double>(s.warmup_steps);
  if (s.kind == LrSchedule::Kind::kConstant) return lr;
  const double span = static_cast<double>(std::max<int64_t>(1, s.total_steps - s.warmup_steps));
  const double p = std::clamp(static_cast<double>(t - s.warmup_steps) / span, 0.0, 1.0);
  if (s.kind == LrSchedule::Kind::kLinear) return lr - (lr - s.min_lr) * p;
  return s.min_lr + (lr - s.min_lr) * 0.5 * (1.0 + std::cos(M_PI * p));
}

}  // namespace mapd

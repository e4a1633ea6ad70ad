// Learning-rate schedules as nanoGPT and Hugging Face users know them: constant, or a linear
// warm-up followed by a cosine or linear decay to a floor. A pure function of the optimizer's
// step count, so a run resumed from a checkpoint (whose optimizer step count is restored) goes
// on with the schedule where it stopped.
//
// For step t = 1, 2, ... (the optimizer steps taken, this one included), peak rate `lr`, warm-up
// W >= 0 steps and decay over the run's T steps:
//   t <= W:          lr · t / W                (the rate reaches lr at step W)
//   t > W, cosine:   min_lr + (lr − min_lr) · ½ (1 + cos(π p))
//   t > W, linear:   lr − (lr − min_lr) · p
//   constant:        lr after the warm-up
// where p = (t − W) / (T − W), clamped to [0, 1]: the rate is min_lr at step T (and after).
// This is Hugging Face's get_cosine_schedule_with_warmup / get_linear_schedule_with_warmup with
// a floor, shifted by one step so that step 1 trains (there its first optimizer step runs at 0).
#ifndef MAPD_COMMON_LR_SCHEDULE_H_
#define MAPD_COMMON_LR_SCHEDULE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mapd {

struct LrSchedule {
  enum class Kind { kConstant, kCosine, kLinear };
  Kind kind = Kind::kConstant;
  int64_t warmup_steps = 0;  // >= 0: steps of linear warm-up from lr / W to lr (0: none)
  double min_lr = 0;         // cosine and linear: the rate at the end of the decay, in [0, lr]
  int64_t total_steps = 0;   // cosine and linear: the step the decay ends at (the run's steps), > warmup_steps

  // INVALID_ARGUMENT naming the field (and the flag a user sets it with) for peak rate `lr`.
  absl::Status Validate(double lr) const;
};

// "constant", "cosine" or "linear"; INVALID_ARGUMENT naming the choices otherwise.
absl::StatusOr<LrSchedule::Kind> ParseLrScheduleKind(const std::string& name);
const char* LrScheduleKindName(LrSchedule::Kind kind);

// The schedule named `kind` (empty: constant) with those settings, decaying over `total_steps`;
// INVALID_ARGUMENT for an unknown kind (Validate checks the rest).
absl::StatusOr<LrSchedule> MakeLrSchedule(const std::string& kind, int64_t warmup_steps, double min_lr, int64_t total_steps);

// The learning rate of optimizer step `step` (1-based; see above) under `schedule` with peak `lr`.
double LearningRateAt(const LrSchedule& schedule, double lr, int64_t step);

}  // namespace mapd

#endif  // MAPD_COMMON_LR_SCHEDULE_H_

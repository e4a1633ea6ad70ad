#include "common/training_config.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/data_spec.h"
#include "common/plan_choices.h"
#include "common/training_limits.h"

namespace mapd {

v1::TrainingConfig WithTrainingDefaults(v1::TrainingConfig c) {
  if (c.steps() == 0) c.set_steps(100);
  if (c.optimizer().empty()) c.set_optimizer("adamw");
  if (c.lr() == 0) c.set_lr(1e-3);
  if (c.lr_schedule().empty()) c.set_lr_schedule("constant");
  if (c.data().empty()) c.set_data("synthetic");
  if (c.eval_batches() == 0) c.set_eval_batches(1);
  if (c.micro_batches().empty()) c.set_micro_batches("1");
  if (c.precision().empty()) c.set_precision("auto");
  return c;
}

absl::Status ValidateTrainingConfig(const v1::TrainingConfig& c, int64_t max_steps) {
  auto bad = [](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (c.steps() <= 0 || c.steps() > max_steps) return bad("steps is ", c.steps(), "; give a number of steps from 1 to ", max_steps);
  if (c.optimizer() != "sgd" && c.optimizer() != "momentum" && c.optimizer() != "adamw") {
    return bad("optimizer '", c.optimizer().substr(0, 64), "' is not one of sgd, momentum, adamw");
  }
  if (!(c.lr() > 0) || std::isinf(c.lr())) return bad("lr is ", c.lr(), "; give a positive, finite learning rate");
  if (!(c.weight_decay() >= 0) || std::isinf(c.weight_decay())) {
    return bad("weight_decay is ", c.weight_decay(), "; give a finite, non-negative weight decay (0: none)");
  }
  if (!(c.max_grad_norm() >= 0) || std::isinf(c.max_grad_norm())) {
    return bad("max_grad_norm is ", c.max_grad_norm(), "; give the global gradient norm to clip to (> 0), or 0 for none");
  }
  auto schedule = ScheduleOf(c);
  if (!schedule.ok()) return bad("lr_schedule '", c.lr_schedule().substr(0, 64), "' is not one of constant, cosine, linear");
  if (auto st = schedule->Validate(c.lr()); !st.ok()) return st;
  if (auto data = ParseDataSpec(c.data()); !data.ok()) return bad("data: ", data.status().message());
  if (!c.eval_data().empty()) {
    if (auto data = ParseDataSpec(c.eval_data()); !data.ok()) return bad("eval_data: ", data.status().message());
  }
  if (c.eval_every() < 0 || c.eval_every() > max_steps) {
    return bad("eval_every is ", c.eval_every(), "; give 0 (no evaluation) to ", max_steps, " steps");
  }
  if (c.eval_batches() < 1 || c.eval_batches() > kMaxEvalBatches) {
    return bad("eval_batches is ", c.eval_batches(), "; give 1 to ", kMaxEvalBatches);
  }
  if (c.checkpoint_every() < 0) return bad("checkpoint_every is ", c.checkpoint_every(), "; give 0 or a positive number of steps");
  if (auto micro = MicroBatchesOf(c); !micro.ok()) return micro.status();
  if (c.precision() != "auto" && c.precision() != "fp32" && c.precision() != "bf16") {
    return bad("precision '", c.precision().substr(0, 64), "' is not one of auto, fp32, bf16");
  }
  return absl::OkStatus();
}

absl::StatusOr<LrSchedule> ScheduleOf(const v1::TrainingConfig& c) {
  return MakeLrSchedule(c.lr_schedule(), c.warmup_steps(), c.min_lr(), c.steps());
}

bool EvaluatesAfter(const v1::TrainingConfig& c, int64_t step) {
  return c.eval_every() > 0 && (step % c.eval_every() == 0 || step == c.steps());
}

bool CheckpointsAfter(const v1::TrainingConfig& c, int64_t step) {
  return (c.checkpoint_every() > 0 && step % c.checkpoint_every() == 0) || step == c.steps();
}

absl::StatusOr<int64_t> MicroBatchesOf(const v1::TrainingConfig& c) { return ParseMicroBatches(c.micro_batches(), "micro_batches"); }

}  // namespace mapd

// The training configuration (proto/mapd/v1/training.proto) given its defaults and checked in
// one place, for `mapctl run`, the coordinator's check of a job, the worker and every rank.
// Nothing else copies or re-checks its fields.
#ifndef MAPD_COMMON_TRAINING_CONFIG_H_
#define MAPD_COMMON_TRAINING_CONFIG_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/lr_schedule.h"
#include "proto/mapd/v1/training.pb.h"

namespace mapd {

// The defaults of the fields left at zero (proto3's "unset"): 100 steps, adamw, lr 1e-3, a
// constant schedule, synthetic data, one evaluation batch, one micro-batch, precision auto.
v1::TrainingConfig WithTrainingDefaults(v1::TrainingConfig config);

// A config with its defaults, checked: INVALID_ARGUMENT naming the field (as a job file and the
// proto name it: `lr`, `eval_batches`) and what to give instead. `max_steps` bounds `steps` and
// `eval_every` (the coordinator's --max-steps).
absl::Status ValidateTrainingConfig(const v1::TrainingConfig& config, int64_t max_steps = int64_t{1} << 40);

// The learning-rate schedule the config asks for, over its steps (a valid config's: Validate
// reports a bad kind).
absl::StatusOr<LrSchedule> ScheduleOf(const v1::TrainingConfig& config);

// Whether the model is evaluated after `step`: every eval_every steps and after the last.
bool EvaluatesAfter(const v1::TrainingConfig& config, int64_t step);

// Whether a checkpoint is written after `step` (where checkpoints are written at all): every
// checkpoint_every steps, and after the last.
bool CheckpointsAfter(const v1::TrainingConfig& config, int64_t step);

// micro_batches: "auto" → 0 (the planner chooses), else the count (1 .. 2^20); INVALID_ARGUMENT
// naming the field otherwise.
absl::StatusOr<int64_t> MicroBatchesOf(const v1::TrainingConfig& config);

}  // namespace mapd

#endif  // MAPD_COMMON_TRAINING_CONFIG_H_

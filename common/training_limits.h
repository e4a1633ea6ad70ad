// Bounds on what a training run may ask for that the client, the coordinator and the worker all
// check (`mapctl run` flags, a job's spec, the worker's options): written once, here.
#ifndef MAPD_COMMON_TRAINING_LIMITS_H_
#define MAPD_COMMON_TRAINING_LIMITS_H_

#include <cstdint>

namespace mapd {

// Evaluation batches after each evaluated step (--eval-batches, TrainingConfig.eval_batches).
constexpr int64_t kMaxEvalBatches = 100000;

}  // namespace mapd

#endif  // MAPD_COMMON_TRAINING_LIMITS_H_

// Trains a graph for some steps on this machine with the single-device runtime — what
// `mapctl run` does. Deliberately free of LibTorch types, so callers need no torch headers.
#ifndef MAPD_WORKER_LOCAL_LOCAL_TRAINING_H_
#define MAPD_WORKER_LOCAL_LOCAL_TRAINING_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/lr_schedule.h"
#include "proto/mapd/v1/checkpoint.pb.h"
#include "proto/mapd/v1/graph.pb.h"

namespace mapd {

struct LocalTrainingOptions {
  int64_t steps = 100;              // > 0
  std::string optimizer = "adamw";  // sgd | momentum (SGD, momentum 0.9) | adamw
  double lr = 1e-3;                 // > 0: the peak rate under a schedule
  std::string lr_schedule = "constant";  // constant | cosine | linear (common/lr_schedule.h), over `steps`
  int64_t warmup_steps = 0;         // >= 0: linear warm-up steps
  double min_lr = 0;                // cosine and linear: the rate the decay ends at
  double weight_decay = 0.0;        // >= 0
  double max_grad_norm = 0.0;       // > 0: clip the global gradient norm
  uint64_t seed = 0;                // parameters, data, dropout
  std::string data = "synthetic";   // synthetic | text | tokens
  std::string data_path;            // the text file (byte-level), token file (uint16) or npy's INPUTS[,TARGETS]
  std::string device = "cpu";       // cpu | cuda | cuda:N
  int64_t memory_cap = 0;           // > 0: CPU bytes the counting allocator allows (OOM past it)
  // Evaluation: every `eval_every` steps and after the last (0: never), the mean loss over
  // `eval_batches` batches of `eval_data` at `eval_data_path` (kinds as `data`'s; empty: the
  // training data's source, drawn from a seed of its own), forward only: no gradients, dropout
  // off, no running statistics or optimizer state touched. Each evaluation draws the same batches.
  std::string eval_data;
  std::string eval_data_path;
  int64_t eval_every = 0;
  int64_t eval_batches = 1;  // 1 .. kMaxEvalBatches (common/training_limits.h)

  absl::Status Validate() const;
};

// The learning-rate schedule `options` asks for, over its steps; INVALID_ARGUMENT for an unknown kind.
absl::StatusOr<LrSchedule> ScheduleOf(const LocalTrainingOptions& options);

struct LocalStep {
  int64_t step = 0;
  double loss = 0;
  double seconds = 0;
  double lr = 0;  // the learning rate this step's update used
  bool evaluated = false;  // the model was evaluated after this step (LocalTrainingOptions::eval_every)
  double eval_loss = 0;    // then: the mean loss over the evaluation batches
};

// Runs `options.steps` steps of `graph` (output 0 is the scalar loss), calling `on_step` after
// each. Stops at the first error (a non-finite loss is FAILED_PRECONDITION naming the step).
// With `final_parameters`, every parameter and buffer after the last step is added to it (what
// `mapctl run --ranks N --check-reference` compares the ranks' blocks with); with
// `final_second_moments`, AdamW's exp_avg_sq of every trainable parameter that has one, named
// as the parameter (nothing for SGD; reference_check.h tells noise-driven elements by it).
absl::Status TrainLocally(const v1::Graph& graph, const LocalTrainingOptions& options,
                          const std::function<void(const LocalStep&)>& on_step,
                          std::vector<v1::TensorData>* final_parameters = nullptr,
                          std::vector<v1::TensorData>* final_second_moments = nullptr);

}  // namespace mapd

#endif  // MAPD_WORKER_LOCAL_LOCAL_TRAINING_H_

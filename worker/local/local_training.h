// Trains a graph for some steps on this machine with the single-device runtime — what
// `mapctl run` does. Deliberately free of LibTorch types, so callers need no torch headers.
#ifndef MAPD_WORKER_LOCAL_LOCAL_TRAINING_H_
#define MAPD_WORKER_LOCAL_LOCAL_TRAINING_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/training_config.h"
#include "proto/mapd/v1/checkpoint.pb.h"
#include "proto/mapd/v1/graph.pb.h"

namespace mapd {

struct LocalTrainingOptions {
  // How to train (steps, optimizer, schedule, data, evaluation, ...), with its defaults
  // (common/training_config.h): what `mapctl run` was given, or a rank's job.
  v1::TrainingConfig training = WithTrainingDefaults({});
  std::string device = "cpu";       // cpu | cuda | cuda:N
  int64_t memory_cap = 0;           // > 0: CPU bytes the counting allocator allows (OOM past it)

  // The training config checked (ValidateTrainingConfig), and the cap.
  absl::Status Validate() const;
};

struct LocalStep {
  int64_t step = 0;
  double loss = 0;
  double seconds = 0;
  double lr = 0;  // the learning rate this step's update used
  bool evaluated = false;  // the model was evaluated after this step (TrainingConfig.eval_every)
  double eval_loss = 0;    // then: the mean loss over the evaluation batches
  // On a CUDA device (where LibTorch has CUDA): the caching allocator's peaks over this step,
  // as torch.cuda.max_memory_allocated / max_memory_reserved read them; 0 elsewhere.
  int64_t device_peak_allocated = 0;
  int64_t device_peak_reserved = 0;
};

// Runs `options.training.steps()` steps of `graph` (output 0 is the scalar loss), calling `on_step` after
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

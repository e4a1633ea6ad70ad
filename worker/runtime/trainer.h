// Trainer: one training step of a graph on one device.
//
// Step(batch): release the gradients (set them to undefined, so gradient memory exists only
// during backward and the optimizer step) → forward (Executor, RunMode::kTrain) → the loss, a
// floating-point scalar output → backward → optimizer step → release the gradients → write
// the buffer updates (BatchNorm statistics) under NoGradGuard. Random ops (dropout) draw from
// LibTorch's default generator, which the trainer reseeds with DeriveSeed(seed, "step:<n>")
// before each step, so a seed gives the same run.
#ifndef MAPD_WORKER_RUNTIME_TRAINER_H_
#define MAPD_WORKER_RUNTIME_TRAINER_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "proto/mapd/v1/graph.pb.h"
#include "worker/runtime/executor.h"
#include "worker/runtime/optimizer.h"
#include "worker/runtime/torch_types.h"

namespace mapd {

struct TrainerOptions {
  ExecutorOptions executor;  // device and parameter seed (also the dropout seed)
  OptimizerOptions optimizer;
  // The graph output that is the loss. MAP's convention is output 0 (zoo graphs; models whose
  // forward returns the loss first); nanoGPT's (logits, loss) needs 1.
  int loss_output = 0;
};

struct StepResult {
  int64_t step = 0;      // 1 for the first step
  double loss = 0;       // the loss of the forward pass (before the update)
  double seconds = 0;    // wall time of the whole step
  double lr = 0;         // the learning rate of its update (the schedule's)
};

class Trainer {
 public:
  // FAILED_PRECONDITION when the loss output is not a floating-point scalar (the model must
  // return its loss) or the graph has no trainable parameter; the executor's and optimizer's
  // errors otherwise.
  static absl::StatusOr<std::unique_ptr<Trainer>> Create(v1::Graph graph, const TrainerOptions& options);

  absl::StatusOr<StepResult> Step(const TensorMap& batch);
  // The loss on `batch`, forward only: no autograd, dropout off, the buffers' updates (batch
  // norms' running statistics) and the optimizer untouched. Batch norms normalise by the
  // batch's statistics, as in training (their graph is the training one).
  absl::StatusOr<double> Evaluate(const TensorMap& batch);

  Executor& executor() { return *executor_; }
  Optimizer& optimizer() { return *optimizer_; }
  int64_t steps() const { return steps_; }

 private:
  Trainer() = default;

  TrainerOptions options_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<Optimizer> optimizer_;
  bool random_ = false;  // the graph has random ops
  int64_t steps_ = 0;
};

}  // namespace mapd

#endif  // MAPD_WORKER_RUNTIME_TRAINER_H_

// MAP's own optimizers, written with in-place ATen ops so that their memory is exactly what
// the comment below says (the symbolic profiler models it):
//
// State (persistent, allocated at a parameter's first step, lives as long as the optimizer):
//   SGD:             none.
//   SGD + momentum:  one buffer per parameter (param size and dtype), a clone of the first
//                    gradient.
//   AdamW:           exp_avg and exp_avg_sq per parameter (2 x param size, param dtype, zeros).
//
// Temporaries of one Step():
//   SGD (with or without momentum, weight decay): none — weight decay is added into the
//     gradient in place (g += wd * p), momentum is buf = momentum*buf + g in place, then
//     p -= lr * (buf or g) in place.
//   AdamW: none of parameter size — p *= 1 - lr*wd; m = beta1*m + (1-beta1)*g;
//     v = beta2*v + (1-beta2)*g*g (addcmul_, fused); then the gradient's own storage becomes the
//     denominator: g = sqrt(v) / sqrt(1 - beta2^t) + eps; p -= lr/(1 - beta1^t) * m / g.
//     Only 0-d scalars are made.
//   Gradient clipping (max_grad_norm > 0), as torch.nn.utils.clip_grad_norm_: one 0-d norm
//     per parameter, their stack ([P] elements) and a few 0-d tensors; gradients are scaled
//     in place.
// 16-bit parameters (bf16 mixed precision, model/graph/mixed_precision.h): the optimizer keeps
//   an fp32 master of each (made from the parameter at Create, its ZeRO shard when that is what
//   it is given) and fp32 states; Step() updates the master from an fp32 copy of the gradient
//   (the one temporary of parameter size: one parameter at a time; AdamW reuses it as the
//   denominator) and writes the master back into the parameter, rounded. Clipping norms are
//   accumulated in fp32.
// So Step() consumes the gradients (they hold scratch values afterwards); the trainer releases
// them after the step, and gradient memory exists only during backward and the step.
//
// The numerics equal torch.optim.SGD (dampening 0, no Nesterov) and torch.optim.AdamW
// (amsgrad off), whose per-parameter step counts they keep too.
#ifndef MAPD_WORKER_RUNTIME_OPTIMIZER_H_
#define MAPD_WORKER_RUNTIME_OPTIMIZER_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/lr_schedule.h"

namespace mapd {

struct OptimizerOptions {
  enum class Kind { kSgd, kAdamW };
  Kind kind = Kind::kAdamW;
  double lr = 1e-3;            // > 0
  double momentum = 0.0;       // SGD: in [0, 1); 0 = plain SGD
  double weight_decay = 0.0;   // SGD: L2 added to the gradient; AdamW: decoupled, p *= 1 - lr*wd
  double beta1 = 0.9;          // AdamW, in [0, 1)
  double beta2 = 0.999;        // AdamW, in [0, 1)
  double eps = 1e-8;           // AdamW, > 0
  double max_grad_norm = 0.0;  // > 0: clip the global L2 norm of all gradients first
  // The rate of each step (lr_schedule.h): `lr` is its peak; the default keeps it constant.
  LrSchedule schedule;
};

// "sgd" or "adamw"; INVALID_ARGUMENT otherwise.
absl::StatusOr<OptimizerOptions::Kind> ParseOptimizerKind(const std::string& name);
// INVALID_ARGUMENT naming the first bad field.
absl::Status ValidateOptimizerOptions(const OptimizerOptions& options);

class Optimizer {
 public:
  // `params`: (name, tensor) of every trainable parameter; the tensors are updated in place.
  static absl::StatusOr<std::unique_ptr<Optimizer>> Create(const OptimizerOptions& options,
                                                           std::vector<std::pair<std::string, at::Tensor>> params);

  // One update from the parameters' gradients (parameters without one are skipped, their
  // state untouched). Consumes the gradients (see above). INTERNAL if LibTorch throws.
  absl::Status Step();

  const OptimizerOptions& options() const { return options_; }
  // Steps taken (calls of Step()).
  int64_t steps() const { return steps_; }
  // The learning rate the last Step() used (its schedule's at steps()); 0 before the first.
  double learning_rate() const { return lr_; }
  // Bytes of optimizer state now allocated.
  int64_t StateBytes() const;

  // The state of one parameter, for checkpoints: buffers (undefined before its first step) and
  // its own step count.
  struct ParamState {
    std::string name;
    at::Tensor buf1, buf2;
    at::Tensor master;  // the fp32 master of a 16-bit parameter (undefined otherwise)
    int64_t steps = 0;
  };
  std::vector<ParamState> State() const;
  // Puts saved state back (by parameter name; shapes must match): INVALID_ARGUMENT otherwise.
  // A 16-bit parameter whose state has no master takes its master from the parameter.
  absl::Status Restore(const std::vector<ParamState>& state, int64_t steps);

 private:
  struct Slot {
    std::string name;
    at::Tensor param;
    at::Tensor master;  // fp32 master of a 16-bit param (what the update reads and writes)
    at::Tensor buf1;  // momentum buffer, or AdamW exp_avg
    at::Tensor buf2;  // AdamW exp_avg_sq
    int64_t steps = 0;
  };
  explicit Optimizer(const OptimizerOptions& options) : options_(options) {}
  void ClipGradients();
  // The update of `p` (the master or the parameter itself) from `grad`.
  void UpdateSgd(Slot& s, at::Tensor& p, at::Tensor& grad);
  void UpdateAdamW(Slot& s, at::Tensor& p, at::Tensor& grad);

  OptimizerOptions options_;
  std::vector<Slot> slots_;
  int64_t steps_ = 0;
  double lr_ = 0;  // this step's rate (the schedule's), set by Step()
};

}  // namespace mapd

#endif  // MAPD_WORKER_RUNTIME_OPTIMIZER_H_

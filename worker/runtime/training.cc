// The optimizers (optimizer.h) and the training step (trainer.h). One translation unit for
// both keeps the number of LibTorch-including files small.
#include <ATen/ATen.h>

#include <chrono>
#include <cmath>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/runtime/optimizer.h"
#include "worker/runtime/seed.h"
#include "worker/runtime/torch_types.h"
#include "worker/runtime/trainer.h"

namespace mapd {

// ---------------------------------------------------------------- optimizer

absl::StatusOr<OptimizerOptions::Kind> ParseOptimizerKind(const std::string& name) {
  if (name == "sgd") return OptimizerOptions::Kind::kSgd;
  if (name == "adamw") return OptimizerOptions::Kind::kAdamW;
  return absl::InvalidArgumentError(absl::StrCat("unknown optimizer '", name, "'; use sgd or adamw"));
}

absl::Status ValidateOptimizerOptions(const OptimizerOptions& o) {
  auto bad = [](const char* field, double v, const char* want) {
    return absl::InvalidArgumentError(absl::StrCat("optimizer ", field, "=", v, " must be ", want));
  };
  if (!(o.lr > 0) || !std::isfinite(o.lr)) return bad("lr", o.lr, "positive");
  if (!(o.momentum >= 0 && o.momentum < 1)) return bad("momentum", o.momentum, "in [0, 1)");
  if (!(o.weight_decay >= 0)) return bad("weight_decay", o.weight_decay, "non-negative");
  if (!(o.beta1 >= 0 && o.beta1 < 1)) return bad("beta1", o.beta1, "in [0, 1)");
  if (!(o.beta2 >= 0 && o.beta2 < 1)) return bad("beta2", o.beta2, "in [0, 1)");
  if (!(o.eps > 0)) return bad("eps", o.eps, "positive");
  if (!(o.max_grad_norm >= 0)) return bad("max_grad_norm", o.max_grad_norm, "non-negative (0 = off)");
  if (o.kind == OptimizerOptions::Kind::kAdamW && o.momentum != 0) {
    return absl::InvalidArgumentError("momentum is an SGD option; AdamW uses beta1/beta2");
  }
  return o.schedule.Validate(o.lr);
}

absl::StatusOr<std::unique_ptr<Optimizer>> Optimizer::Create(const OptimizerOptions& options,
                                                             std::vector<std::pair<std::string, at::Tensor>> params) {
  MAPD_RETURN_IF_ERROR(ValidateOptimizerOptions(options));
  std::unique_ptr<Optimizer> opt(new Optimizer(options));
  for (auto& [name, t] : params) {
    if (!t.defined() || !at::isFloatingType(t.scalar_type())) {
      return absl::InvalidArgumentError(absl::StrCat("parameter '", name, "' is not a floating-point tensor"));
    }
    Slot slot{name, t, at::Tensor(), at::Tensor(), at::Tensor(), 0};
    // A 16-bit parameter steps through an fp32 master (optimizer.h).
    if (Is16BitFloat(t)) slot.master = t.detach().to(at::kFloat, /*non_blocking=*/false, /*copy=*/true);
    opt->slots_.push_back(std::move(slot));
  }
  return opt;
}

int64_t Optimizer::StateBytes() const {
  int64_t n = 0;
  for (const Slot& s : slots_) {
    if (s.buf1.defined()) n += static_cast<int64_t>(s.buf1.nbytes());
    if (s.buf2.defined()) n += static_cast<int64_t>(s.buf2.nbytes());
    if (s.master.defined()) n += static_cast<int64_t>(s.master.nbytes());
  }
  return n;
}

void Optimizer::ClipGradients() {
  std::vector<at::Tensor> norms;
  std::vector<at::Tensor> grads;
  for (Slot& s : slots_) {
    const at::Tensor& g = s.param.grad();
    if (!g.defined()) continue;
    norms.push_back(g.scalar_type() == at::kFloat ? at::norm(g, 2)
                                                  : at::linalg_vector_norm(g, 2, c10::nullopt, false, at::kFloat));
    grads.push_back(g);
  }
  if (grads.empty()) return;
  at::Tensor total = at::norm(at::stack(norms), 2);
  at::Tensor coef = at::clamp_max(options_.max_grad_norm / (total + 1e-6), 1.0);
  for (at::Tensor& g : grads) g.mul_(coef);
}

std::vector<Optimizer::ParamState> Optimizer::State() const {
  std::vector<ParamState> out;
  for (const Slot& s : slots_) out.push_back({s.name, s.buf1, s.buf2, s.master, s.steps});
  return out;
}

absl::Status Optimizer::Restore(const std::vector<ParamState>& state, int64_t steps) {
  std::unordered_map<std::string, const ParamState*> by_name;
  for (const ParamState& p : state) by_name[p.name] = &p;
  for (Slot& s : slots_) {
    auto it = by_name.find(s.name);
    if (it == by_name.end()) return absl::InvalidArgumentError(absl::StrCat("no saved optimizer state for '", s.name, "'"));
    for (const at::Tensor* b : {&it->second->buf1, &it->second->buf2, &it->second->master}) {
      if (b->defined() && !b->sizes().equals(s.param.sizes())) {
        return absl::InvalidArgumentError(absl::StrCat("saved optimizer state of '", s.name, "' does not match its shape"));
      }
    }
    // States are fp32 for a 16-bit parameter, the parameter's dtype otherwise.
    const at::TensorOptions state = s.master.defined() ? s.master.options() : s.param.options();
    s.buf1 = it->second->buf1.defined() ? it->second->buf1.to(state) : at::Tensor();
    s.buf2 = it->second->buf2.defined() ? it->second->buf2.to(state) : at::Tensor();
    if (s.master.defined()) {
      at::NoGradGuard no_grad;
      s.master.copy_(it->second->master.defined() ? it->second->master : s.param.detach());
    }
    s.steps = it->second->steps;
  }
  steps_ = steps;
  return absl::OkStatus();
}

void Optimizer::UpdateSgd(Slot& s, at::Tensor& p, at::Tensor& g) {
  const OptimizerOptions& o = options_;
  if (o.weight_decay != 0) g.add_(p, o.weight_decay);
  if (o.momentum != 0) {
    if (!s.buf1.defined()) {
      s.buf1 = g.clone();
    } else {
      s.buf1.mul_(o.momentum).add_(g);
    }
    p.add_(s.buf1, -lr_);
  } else {
    p.add_(g, -lr_);
  }
}

void Optimizer::UpdateAdamW(Slot& s, at::Tensor& p, at::Tensor& g) {
  const OptimizerOptions& o = options_;
  if (!s.buf1.defined()) {
    s.buf1 = at::zeros_like(p, at::MemoryFormat::Preserve);
    s.buf2 = at::zeros_like(p, at::MemoryFormat::Preserve);
  }
  ++s.steps;
  if (o.weight_decay != 0) p.mul_(1 - lr_ * o.weight_decay);
  const double bc1 = 1 - std::pow(o.beta1, static_cast<double>(s.steps));
  const double bc2 = 1 - std::pow(o.beta2, static_cast<double>(s.steps));
  s.buf1.mul_(o.beta1).add_(g, 1 - o.beta1);
  s.buf2.mul_(o.beta2).addcmul_(g, g, 1 - o.beta2);
  // The gradient is not needed any more: its storage becomes the denominator.
  at::sqrt_out(g, s.buf2);
  g.div_(std::sqrt(bc2)).add_(o.eps);
  p.addcdiv_(s.buf1, g, -(lr_ / bc1));
}

absl::Status Optimizer::Step() {
  at::NoGradGuard no_grad;
  ++steps_;
  lr_ = LearningRateAt(options_.schedule, options_.lr, steps_);
  return CatchTorch(absl::StrCat("optimizer step ", steps_), [&] {
    if (options_.max_grad_norm > 0) ClipGradients();
    for (Slot& s : slots_) {
      at::Tensor g = s.param.grad();
      if (!g.defined()) continue;
      if (s.master.defined()) g = g.to(at::kFloat);  // the master's fp32 gradient (a copy)
      at::Tensor& p = s.master.defined() ? s.master : s.param;
      if (options_.kind == OptimizerOptions::Kind::kSgd) {
        ++s.steps;
        UpdateSgd(s, p, g);
      } else {
        UpdateAdamW(s, p, g);
      }
      if (s.master.defined()) s.param.copy_(s.master);
    }
  });
}

// ---------------------------------------------------------------- trainer

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::Create(v1::Graph graph, const TrainerOptions& options) {
  const int k = options.loss_output;
  if (k < 0 || k >= graph.outputs_size()) {
    return absl::FailedPreconditionError(absl::StrCat("graph '", graph.name(), "' has ", graph.outputs_size(),
                                                      " output(s); the loss was expected at output ", k));
  }
  std::unique_ptr<Trainer> t(new Trainer());
  t->options_ = options;
  MAPD_ASSIGN_OR_RETURN(t->executor_, Executor::Create(std::move(graph), options.executor));
  const Graph& g = t->executor_->graph();
  const std::string& loss = g.proto().outputs(k);
  const TensorType& type = g.TypeOf(loss);
  if (type.rank() != 0 || !IsFloating(type.dtype)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "graph '", g.name(), "' output ", k, " ('", loss, "') is ", type.ToString(),
        ", not a floating-point scalar: training needs a model whose forward returns its loss (e.g. "
        "F.cross_entropy(logits, targets)) as output ", k, ", not logits"));
  }
  auto params = t->executor_->parameters().Trainable();
  if (params.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("graph '", g.name(), "' has no trainable parameter"));
  }
  MAPD_ASSIGN_OR_RETURN(t->optimizer_, Optimizer::Create(options.optimizer, std::move(params)));
  for (const v1::Node& n : g.proto().nodes()) t->random_ |= DrawsRandomNumbers(n);
  return t;
}

absl::StatusOr<double> Trainer::Evaluate(const TensorMap& batch) {
  MAPD_ASSIGN_OR_RETURN(Executor::Result result, executor_->Run(batch, RunMode::kEval));
  double loss = 0;
  MAPD_RETURN_IF_ERROR(CatchTorch(absl::StrCat("evaluating graph '", executor_->graph().name(), "'"),
                                  [&] { loss = result.outputs[options_.loss_output].item<double>(); }));
  return loss;
}

absl::StatusOr<StepResult> Trainer::Step(const TensorMap& batch) {
  const auto start = std::chrono::steady_clock::now();
  const int64_t step = steps_ + 1;
  auto params = executor_->parameters().Trainable();
  auto release_grads = [&params] {
    for (auto& [name, p] : params) p.mutable_grad().reset();
  };
  release_grads();
  if (random_) at::manual_seed(DeriveSeed(options_.executor.seed, absl::StrCat("step:", step)));

  MAPD_ASSIGN_OR_RETURN(Executor::Result result, executor_->Run(batch, RunMode::kTrain));
  at::Tensor loss = result.outputs[options_.loss_output];
  result.outputs.clear();  // only the loss (and the autograd graph behind it) stays
  double loss_value = 0;
  MAPD_RETURN_IF_ERROR(CatchTorch(absl::StrCat("backward of graph '", executor_->graph().name(), "' at step ", step),
                                  [&] {
                                    loss_value = loss.detach().item<double>();
                                    loss.backward();
                                  }));
  loss.reset();
  MAPD_RETURN_IF_ERROR(optimizer_->Step());
  release_grads();
  MAPD_RETURN_IF_ERROR(executor_->ApplyBufferUpdates(result));
  // A device that runs asynchronously (CUDA) has only queued the update: reading one element of
  // a parameter back waits for it, so the step's time is the step's and not the next one's.
  if (!params.empty() && !params.begin()->second.is_cpu()) (void)params.begin()->second.reshape(-1)[0].item<double>();
  steps_ = step;
  StepResult r;
  r.step = step;
  r.loss = loss_value;
  r.lr = optimizer_->learning_rate();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace mapd

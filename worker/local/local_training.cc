#include "worker/local/local_training.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/training_limits.h"
#include "common/data_spec.h"
#include "common/status_macros.h"
#include "worker/runtime/seed.h"
#include "worker/local/trainer_factory.h"
#include "worker/memory/counting_allocator.h"

namespace mapd {

absl::Status LocalTrainingOptions::Validate() const {
  if (steps <= 0) return absl::InvalidArgumentError(absl::StrCat("steps must be positive, got ", steps));
  if (optimizer != "sgd" && optimizer != "momentum" && optimizer != "adamw") {
    return absl::InvalidArgumentError(absl::StrCat("unknown optimizer '", optimizer, "': use sgd, momentum or adamw"));
  }
  if (!(lr > 0)) return absl::InvalidArgumentError(absl::StrCat("lr must be positive, got ", lr));
  if (weight_decay < 0) return absl::InvalidArgumentError("weight decay must not be negative");
  if (max_grad_norm < 0) return absl::InvalidArgumentError("max grad norm must not be negative");
  if (memory_cap < 0) return absl::InvalidArgumentError("the memory cap must not be negative");
  if (eval_every < 0) return absl::InvalidArgumentError(absl::StrCat("--eval-every must not be negative, got ", eval_every));
  if (eval_batches < 1 || eval_batches > kMaxEvalBatches) {
    return absl::InvalidArgumentError(absl::StrCat("--eval-batches must be 1 to ", kMaxEvalBatches, ", got ", eval_batches));
  }
  auto schedule = ScheduleOf(*this);
  if (!schedule.ok()) return schedule.status();
  return schedule->Validate(lr);
}

absl::StatusOr<LrSchedule> ScheduleOf(const LocalTrainingOptions& options) {
  return MakeLrSchedule(options.lr_schedule, options.warmup_steps, options.min_lr, options.steps);
}

OptimizerOptions MakeOptimizerOptions(const LocalTrainingOptions& options) {
  OptimizerOptions o;
  o.kind = options.optimizer == "adamw" ? OptimizerOptions::Kind::kAdamW : OptimizerOptions::Kind::kSgd;
  o.momentum = options.optimizer == "momentum" ? 0.9 : 0.0;
  o.lr = options.lr;
  o.weight_decay = options.weight_decay;
  o.max_grad_norm = options.max_grad_norm;
  if (auto schedule = ScheduleOf(options); schedule.ok()) o.schedule = *schedule;  // (Validate reports a bad one)
  return o;
}

absl::StatusOr<std::unique_ptr<Trainer>> MakeTrainer(const v1::Graph& graph, const LocalTrainingOptions& options) {
  if (auto st = options.Validate(); !st.ok()) return st;
  TrainerOptions t;
  t.executor.device = options.device;
  t.executor.seed = options.seed;
  t.optimizer = MakeOptimizerOptions(options);
  return Trainer::Create(graph, t);
}

namespace {

absl::StatusOr<std::unique_ptr<DataSource>> SourceOf(const v1::Graph& graph, const std::string& kind_name,
                                                    const std::string& joined_files, uint64_t seed, c10::Device device) {
  auto kind = ParseDataSource(kind_name);
  if (!kind.ok()) return kind.status();
  DataOptions d;
  d.source = *kind;
  const std::vector<std::string> files = SplitDataFiles(kind_name, joined_files);
  if (!files.empty()) d.path = files[0];
  if (files.size() > 1) d.targets_path = files[1];
  d.seed = seed;
  return MakeDataSource(graph, d, device);
}

}  // namespace

absl::StatusOr<std::unique_ptr<DataSource>> MakeSource(const v1::Graph& graph, const LocalTrainingOptions& options,
                                                      c10::Device device) {
  return SourceOf(graph, options.data, options.data_path, options.seed, device);
}

absl::StatusOr<std::unique_ptr<DataSource>> MakeEvalSource(const v1::Graph& graph, const LocalTrainingOptions& options,
                                                          c10::Device device) {
  const bool own = !options.eval_data.empty();
  return SourceOf(graph, own ? options.eval_data : options.data, own ? options.eval_data_path : options.data_path,
                  DeriveSeed(options.seed, "eval"), device);
}

bool EvaluatesAfter(const LocalTrainingOptions& options, int64_t step) {
  return options.eval_every > 0 && (step % options.eval_every == 0 || step == options.steps);
}

absl::StatusOr<double> MeanEvaluationLoss(const v1::Graph& graph, const LocalTrainingOptions& options, c10::Device device,
                                          const std::function<absl::StatusOr<double>(TensorMap)>& evaluate) {
  MAPD_ASSIGN_OR_RETURN(std::unique_ptr<DataSource> source, MakeEvalSource(graph, options, device));
  double sum = 0;
  for (int64_t k = 0; k < options.eval_batches; ++k) {
    MAPD_ASSIGN_OR_RETURN(TensorMap batch, source->Next());
    MAPD_ASSIGN_OR_RETURN(double loss, evaluate(std::move(batch)));
    sum += loss;
  }
  return sum / static_cast<double>(options.eval_batches);
}

absl::Status TrainLocally(const v1::Graph& graph, const LocalTrainingOptions& options,
                          const std::function<void(const LocalStep&)>& on_step,
                          std::vector<v1::TensorData>* final_parameters,
                          std::vector<v1::TensorData>* final_second_moments) {
  if (options.memory_cap > 0) {
    if (options.device != "cpu") {
      return absl::InvalidArgumentError("a memory cap is enforced on the CPU only (the counting allocator); drop it for CUDA");
    }
    CountingCpuAllocator::Install().SetLimit(options.memory_cap);
  }
  auto trainer = MakeTrainer(graph, options);
  if (!trainer.ok()) return trainer.status();
  auto source = MakeSource(graph, options, (*trainer)->executor().device());
  if (!source.ok()) return source.status();
  for (int64_t i = 0; i < options.steps; ++i) {
    auto batch = (*source)->Next();
    if (!batch.ok()) return batch.status();
    auto step = (*trainer)->Step(*batch);
    if (!step.ok()) return step.status();
    if (!std::isfinite(step->loss)) {
      return absl::FailedPreconditionError(absl::StrCat("the loss is ", step->loss, " at step ", step->step,
                                                        "; lower the learning rate (--lr) or clip gradients"));
    }
    LocalStep done{step->step, step->loss, step->seconds, step->lr};
    if (EvaluatesAfter(options, step->step)) {
      Trainer& t = **trainer;
      auto eval = MeanEvaluationLoss(graph, options, t.executor().device(), [&t](TensorMap batch) { return t.Evaluate(batch); });
      if (!eval.ok()) return eval.status();
      done.evaluated = true;
      done.eval_loss = *eval;
    }
    on_step(done);
  }
  if (final_parameters != nullptr) {
    const ParameterStore& store = (*trainer)->executor().parameters();
    for (const std::string& name : store.names()) final_parameters->push_back(TensorToProto(name, *store.Find(name)));
  }
  if (final_second_moments != nullptr && (*trainer)->optimizer().options().kind == OptimizerOptions::Kind::kAdamW) {
    for (const Optimizer::ParamState& s : (*trainer)->optimizer().State()) {
      if (s.buf2.defined()) final_second_moments->push_back(TensorToProto(s.name, s.buf2));
    }
  }
  return absl::OkStatus();
}

}  // namespace mapd

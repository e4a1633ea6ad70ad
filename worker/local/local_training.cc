#include "worker/local/local_training.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/data_spec.h"
#include "common/status_macros.h"
#include "worker/runtime/seed.h"
#include "worker/local/trainer_factory.h"
#include "worker/memory/counting_allocator.h"
#include "worker/memory/device_memory.h"

namespace mapd {

absl::Status LocalTrainingOptions::Validate() const {
  if (auto st = ValidateTrainingConfig(training); !st.ok()) return st;
  if (memory_cap < 0) return absl::InvalidArgumentError("the memory cap must not be negative");
  return absl::OkStatus();
}

OptimizerOptions MakeOptimizerOptions(const v1::TrainingConfig& t) {
  OptimizerOptions o;
  o.kind = t.optimizer() == "adamw" ? OptimizerOptions::Kind::kAdamW : OptimizerOptions::Kind::kSgd;
  o.momentum = t.optimizer() == "momentum" ? 0.9 : 0.0;
  o.lr = t.lr();
  o.weight_decay = t.weight_decay();
  o.max_grad_norm = t.max_grad_norm();
  if (auto schedule = ScheduleOf(t); schedule.ok()) o.schedule = *schedule;  // (Validate reports a bad one)
  return o;
}

absl::StatusOr<std::unique_ptr<Trainer>> MakeTrainer(const v1::Graph& graph, const LocalTrainingOptions& options) {
  if (auto st = options.Validate(); !st.ok()) return st;
  TrainerOptions t;
  t.executor.device = options.device;
  t.executor.seed = options.training.seed();
  t.optimizer = MakeOptimizerOptions(options.training);
  return Trainer::Create(graph, t);
}

namespace {

absl::StatusOr<std::unique_ptr<DataSource>> SourceOf(const v1::Graph& graph, const std::string& spec, uint64_t seed,
                                                    c10::Device device) {
  auto parsed = ParseDataSpec(spec);
  if (!parsed.ok()) return parsed.status();
  auto kind = ParseDataSource(parsed->kind);
  if (!kind.ok()) return kind.status();
  DataOptions d;
  d.source = *kind;
  if (!parsed->files.empty()) d.path = parsed->files[0];
  if (parsed->files.size() > 1) d.targets_path = parsed->files[1];
  d.seed = seed;
  return MakeDataSource(graph, d, device);
}

}  // namespace

absl::StatusOr<std::unique_ptr<DataSource>> MakeSource(const v1::Graph& graph, const LocalTrainingOptions& options,
                                                      c10::Device device) {
  return SourceOf(graph, options.training.data(), options.training.seed(), device);
}

absl::StatusOr<std::unique_ptr<DataSource>> MakeEvalSource(const v1::Graph& graph, const LocalTrainingOptions& options,
                                                          c10::Device device) {
  const v1::TrainingConfig& t = options.training;
  return SourceOf(graph, t.eval_data().empty() ? t.data() : t.eval_data(), DeriveSeed(t.seed(), "eval"), device);
}

absl::StatusOr<double> MeanEvaluationLoss(const v1::Graph& graph, const LocalTrainingOptions& options, c10::Device device,
                                          const std::function<absl::StatusOr<double>(TensorMap)>& evaluate) {
  MAPD_ASSIGN_OR_RETURN(std::unique_ptr<DataSource> source, MakeEvalSource(graph, options, device));
  double sum = 0;
  const int64_t batches = options.training.eval_batches();
  for (int64_t k = 0; k < batches; ++k) {
    MAPD_ASSIGN_OR_RETURN(TensorMap batch, source->Next());
    MAPD_ASSIGN_OR_RETURN(double loss, evaluate(std::move(batch)));
    sum += loss;
  }
  return sum / static_cast<double>(batches);
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
  const c10::Device device = (*trainer)->executor().device();
  const int cuda_index = device.is_cuda() ? device.index() : -1;
  for (int64_t i = 0; i < options.training.steps(); ++i) {
    auto batch = (*source)->Next();
    if (!batch.ok()) return batch.status();
    if (cuda_index >= 0) ResetDevicePeak(cuda_index);
    auto step = (*trainer)->Step(*batch);
    if (!step.ok()) return step.status();
    if (!std::isfinite(step->loss)) {
      return absl::FailedPreconditionError(absl::StrCat("the loss is ", step->loss, " at step ", step->step,
                                                        "; lower the learning rate (--lr) or clip gradients"));
    }
    LocalStep done{step->step, step->loss, step->seconds, step->lr};
    if (cuda_index >= 0) {
      const DevicePeak peak = ReadDevicePeak(cuda_index);
      done.device_peak_allocated = peak.allocated;
      done.device_peak_reserved = peak.reserved;
    }
    if (EvaluatesAfter(options.training, step->step)) {
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

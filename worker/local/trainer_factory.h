// Trainer and data source from LocalTrainingOptions, for the torch-free drivers in worker/
// (local training, measurement). Includes LibTorch types.
#ifndef MAPD_WORKER_LOCAL_TRAINER_FACTORY_H_
#define MAPD_WORKER_LOCAL_TRAINER_FACTORY_H_

#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "worker/local/local_training.h"
#include "worker/runtime/data.h"
#include "worker/runtime/trainer.h"

namespace mapd {

// The optimizer the config names (sgd | momentum: SGD with momentum 0.9 | adamw), with its rate,
// schedule, weight decay and clipping.
OptimizerOptions MakeOptimizerOptions(const v1::TrainingConfig& training);
absl::StatusOr<std::unique_ptr<Trainer>> MakeTrainer(const v1::Graph& graph, const LocalTrainingOptions& options);
absl::StatusOr<std::unique_ptr<DataSource>> MakeSource(const v1::Graph& graph, const LocalTrainingOptions& options,
                                                      c10::Device device);
// The evaluation batches' source: `eval_data` (or the training data's kind and files), seeded
// apart from the training batches; made afresh for each evaluation, so each draws the same.
absl::StatusOr<std::unique_ptr<DataSource>> MakeEvalSource(const v1::Graph& graph, const LocalTrainingOptions& options,
                                                          c10::Device device);
// The mean of `evaluate` over the eval_batches batches of a fresh MakeEvalSource: one process's
// Trainer::Evaluate or a rank's. Each batch is handed over, so the caller may release it (a rank
// keeps only its blocks) before evaluating.
absl::StatusOr<double> MeanEvaluationLoss(const v1::Graph& graph, const LocalTrainingOptions& options, c10::Device device,
                                          const std::function<absl::StatusOr<double>(TensorMap)>& evaluate);

}  // namespace mapd

#endif  // MAPD_WORKER_LOCAL_TRAINER_FACTORY_H_

// Trainer and data source from LocalTrainingOptions, for the torch-free drivers in worker/
// (local training, measurement). Includes LibTorch types.
#ifndef MAPD_WORKER_LOCAL_TRAINER_FACTORY_H_
#define MAPD_WORKER_LOCAL_TRAINER_FACTORY_H_

#include <memory>

#include "absl/status/statusor.h"
#include "worker/local/local_training.h"
#include "worker/runtime/data.h"
#include "worker/runtime/trainer.h"

namespace mapd {

// The optimizer `options.optimizer` names (sgd | momentum: SGD with momentum 0.9 | adamw).
OptimizerOptions MakeOptimizerOptions(const LocalTrainingOptions& options);
absl::StatusOr<std::unique_ptr<Trainer>> MakeTrainer(const v1::Graph& graph, const LocalTrainingOptions& options);
absl::StatusOr<std::unique_ptr<DataSource>> MakeSource(const v1::Graph& graph, const LocalTrainingOptions& options,
                                                      c10::Device device);

}  // namespace mapd

#endif  // MAPD_WORKER_LOCAL_TRAINER_FACTORY_H_

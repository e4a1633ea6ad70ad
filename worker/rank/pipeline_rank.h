// One rank of one pipeline stage (DESIGN §6b, §8): its stage's program (lowered by
// planner/lower/pipeline_lowering.h) run by a RankTrainer on the stage graph, micro-batch by
// micro-batch in the 1F1B order (one_f_one_b.h), with the activations it reads received from the
// stages that make them and the ones it makes sent on; in backward the gradients come back the
// other way. Then, once a step: the stage's gradient reductions, the gradient of a weight tied
// with another stage summed with that stage's, clipping over every stage, the optimizer.
//
// Groups: a pipeline job's ranks form the world mesh [stages] + the stage's mesh (WorldMesh), so
// ConnectMeshGroups gives axis 0 — the pipeline group: the rank at this position of every stage,
// group rank = stage — and then the stage's own axis groups. Point-to-point goes over the
// pipeline group; the reported loss (the last stage's) is summed over it, so every rank reports
// the global loss.
//
// Sends do not wait: a stage sends and goes on, and waits for its sends only at the end of the
// step, so neighbours that send to each other at once (the steady state) cannot deadlock.
#ifndef MAPD_WORKER_RANK_PIPELINE_RANK_H_
#define MAPD_WORKER_RANK_PIPELINE_RANK_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/ir/graph.h"
#include "proto/mapd/v1/rank_program.pb.h"
#include "worker/transport/communicator.h"
#include "worker/rank/one_f_one_b.h"
#include "worker/rank/rank_trainer.h"

namespace mapd {

// The world mesh of a pipeline job ([stages] + the stage's mesh) and a program's rank in it.
std::vector<int64_t> PipelineWorldMesh(const v1::RankProgram& program);
int PipelineGlobalRank(const v1::RankProgram& program);

class PipelineRank {
 public:
  // `graph` is the whole training graph (the stage graph is made from it); `groups` are
  // ConnectMeshGroups(PipelineWorldMesh(program), PipelineGlobalRank(program)) and must outlive
  // this. FAILED_PRECONDITION when the program is not a pipeline stage's.
  static absl::StatusOr<std::unique_ptr<PipelineRank>> Create(const Graph& graph, v1::RankProgram program,
                                                              std::vector<Communicator*> groups, const RankTrainerOptions& options);

  // This rank's blocks of the inputs its stage reads from the batch, per micro-batch.
  absl::StatusOr<RankTrainer::LocalBatch> TakeBlocks(const TensorMap& global_batch) const { return trainer_->TakeBlocks(global_batch); }
  absl::StatusOr<StepResult> Step(const RankTrainer::LocalBatch& batch);
  // Not built for stages yet (the evaluation batches would stream through them as training's do).
  absl::StatusOr<double> Evaluate(const RankTrainer::LocalBatch&) {
    return absl::UnimplementedError("evaluation under pipeline stages is not built yet: drop --eval-every or --pipeline-stages");
  }

  RankTrainer& trainer() { return *trainer_; }
  const v1::RankProgram& program() const { return trainer_->program(); }
  absl::StatusOr<v1::RankCheckpoint> Save() const { return trainer_->Save(); }
  absl::Status Restore(const v1::RankCheckpoint& c) { return trainer_->Restore(c); }
  absl::Status RestoreWhole(const v1::RankCheckpoint& whole) { return trainer_->RestoreWhole(whole); }
  absl::StatusOr<std::vector<std::pair<std::string, at::Tensor>>> Blocks() const { return trainer_->Blocks(); }

 private:
  PipelineRank() = default;
  absl::Status RunForward(int64_t k, const TensorMap& blocks);
  absl::Status RunBackward(int64_t k);
  absl::Status SumTiedGradients();
  absl::Status WaitForSends();
  // MAPD_PIPELINE_TRACE=FILE: a line per pass appended to FILE (stage, rank, pass, live and peak
  // bytes of the counting allocator).
  void Trace(const PassAction& a) const;
  // The local type's empty tensor of the value `name` of `shards` (inputs or outputs).
  absl::StatusOr<at::Tensor> EmptyLike(const google::protobuf::RepeatedPtrField<v1::Shard>& shards, const std::string& name) const;
  int Tag(const v1::StageTransfer& t, int64_t k) const { return static_cast<int>(t.tag() * micro_batches_ + k); }

  std::unique_ptr<RankTrainer> trainer_;
  Communicator* pipeline_ = nullptr;    // group rank = stage
  v1::PipelineRole role_;
  int64_t micro_batches_ = 1;
  std::vector<PassAction> schedule_;
  std::string trace_path_;  // MAPD_PIPELINE_TRACE, read once
  // Per micro-batch of the step under way: its values, and the activations it received.
  std::vector<std::optional<RankTrainer::Pass>> passes_;
  std::vector<std::vector<at::Tensor>> received_;
  std::vector<std::unique_ptr<PendingSend>> sends_;
  double loss_sum_ = 0;
};

}  // namespace mapd

#endif  // MAPD_WORKER_RANK_PIPELINE_RANK_H_

// One rank of one pipeline stage (DESIGN §6b, §8): its stage's program (lowered by
// planner/lower/pipeline_lowering.h) run by a RankTrainer on the stage graph, micro-batch by
// micro-batch in the 1F1B order (planner/plan/one_f_one_b.h), with the activations it reads
// received from the stages that make them and the ones it makes sent on; in backward the
// gradients come back the other way. Then, once a step: the stage's gradient reductions, the
// gradient of a weight tied with another stage summed with that stage's, clipping over every
// stage, the optimizer.
//
// Interleaved 1F1B (PipelineRole.chunks = V ≥ 2): the rank holds V chunks of layers, a
// RankTrainer each (the program's and its later_chunks'), and runs InterleavedSchedule's chunk
// passes; each chunk sends to and receives from the device stage of the model's next and
// previous chunk (the last stage's sends wrap around to the first), tags apart per chunk. One
// clipping norm covers every chunk.
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
#include "planner/plan/one_f_one_b.h"
#include "planner/plan/stages.h"
#include "worker/rank/rank_trainer.h"

namespace mapd {

// The world mesh of a pipeline job ([stages] + the stage's mesh) and a program's rank in it.
std::vector<int64_t> PipelineWorldMesh(const v1::RankProgram& program);
int PipelineGlobalRank(const v1::RankProgram& program);

class PipelineRank {
 public:
  // `graph` is the whole training graph (the stage graphs are made from it); `groups` are
  // ConnectMeshGroups(PipelineWorldMesh(program), PipelineGlobalRank(program)) and must outlive
  // this. FAILED_PRECONDITION when the program is not a pipeline stage's.
  static absl::StatusOr<std::unique_ptr<PipelineRank>> Create(const Graph& graph, v1::RankProgram program,
                                                              std::vector<Communicator*> groups, const RankTrainerOptions& options);

  // This rank's blocks of the inputs its chunks read from the batch: per chunk, per micro-batch.
  using LocalBatch = std::vector<RankTrainer::LocalBatch>;
  absl::StatusOr<LocalBatch> TakeBlocks(const TensorMap& global_batch) const;
  absl::StatusOr<StepResult> Step(const LocalBatch& batch);
  // Not built for stages yet (the evaluation batches would stream through them as training's do).
  absl::StatusOr<double> Evaluate(const LocalBatch&) {
    return absl::UnimplementedError("evaluation under pipeline stages is not built yet: drop --eval-every or --pipeline-stages");
  }

  // The rank's state: its chunks' blocks and optimizer slots in one checkpoint (each chunk takes
  // its own back by name).
  absl::StatusOr<v1::RankCheckpoint> Save() const;
  absl::Status Restore(const v1::RankCheckpoint& c);
  absl::Status RestoreWhole(const v1::RankCheckpoint& whole);
  absl::StatusOr<std::vector<std::pair<std::string, at::Tensor>>> Blocks() const;

 private:
  // One chunk of layers (the only one under 1F1B): its trainer and role, and the step under way's
  // passes (their values) and the activations each received.
  struct Chunk {
    std::unique_ptr<RankTrainer> trainer;
    v1::PipelineRole role;
    bool last = false;            // the model's last chunk: its passes end in the loss
    bool keeps_last_pass = false;  // buffer updates read the last pass's values after the passes
    std::vector<std::optional<RankTrainer::Pass>> passes;
    std::vector<std::vector<at::Tensor>> received;
  };

  PipelineRank() = default;
  absl::Status AddChunk(const Graph& graph, const LayerSequence& sequence, v1::RankProgram program, std::vector<Communicator*> groups,
                        const RankTrainerOptions& options);
  absl::Status RunForward(Chunk& c, int64_t k, const TensorMap& blocks);
  absl::Status RunBackward(Chunk& c, int64_t k);
  absl::Status SumTiedGradients(Chunk& c);
  absl::Status ApplyGradients();
  absl::Status WaitForSends();
  // MAPD_PIPELINE_TRACE=FILE: a line per pass appended to FILE (stage, rank, pass, live and peak
  // bytes of the counting allocator).
  void Trace(const PassAction& a) const;
  // The local type's empty tensor of the value `name` of `shards` (inputs or outputs).
  absl::StatusOr<at::Tensor> EmptyLike(const Chunk& c, const google::protobuf::RepeatedPtrField<v1::Shard>& shards,
                                       const std::string& name) const;
  int Tag(const v1::StageTransfer& t, int64_t k) const { return static_cast<int>(t.tag() * micro_batches_ + k); }

  std::vector<Chunk> chunks_;
  Communicator* pipeline_ = nullptr;    // group rank = stage
  int stage_ = 0, stages_ = 1, rank_ = 0;
  int64_t micro_batches_ = 1;
  std::vector<PassAction> schedule_;
  std::string trace_path_;  // MAPD_PIPELINE_TRACE, read once
  std::vector<std::unique_ptr<PendingSend>> sends_;
  double loss_sum_ = 0;
};

}  // namespace mapd

#endif  // MAPD_WORKER_RANK_PIPELINE_RANK_H_

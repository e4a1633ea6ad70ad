// One rank's training step under a plan (DESIGN §8): the rank's blocks of the parameters
// (initialised from the same global seed as single-device training, so every plan starts from
// the same global weights), its block of each global batch, the rank program's instructions
// (nodes through the execution table on local shapes; Communicate steps as autograd
// collectives), backward from the local loss, and the optimizer on the local blocks.
//
// The reported loss is the global one: the local loss summed over the axes where it is Partial.
//
// Dropout draws the global mask as one device would (the single-device trainer's per-step seed,
// nodes in order) and keeps the rank's block, so dropout plans reproduce one device too.
//
// Gradient clipping takes the norm over every shard (a block several ranks hold counted once),
// as clip_grad_norm_ on one device.
//
// Micro-batches (program.micro_batches() > 1): the program is the micro-batch graph's; a step
// runs it on consecutive slices of the global batch, each pass's loss scaled by 1/m when the
// loss averages over the batch, gradients accumulating, and applies the optimizer once — the
// result of one step on the whole batch. Under ZeRO 0-1 the gradients of parameters read only
// through GRAD_SYNC chains (zero.h, GradSyncChains) are accumulated unreduced and all-reduced
// once after the last pass, as the planner costs them; ZeRO 2-3 reduce-scatter each pass's into
// the shard. Dropout draws the whole batch's mask in every pass (the
// generator restarted at the step's seed) and keeps the pass's block, so plans with dropout
// reproduce one device too.
//
// Not built yet (UNIMPLEMENTED, naming the node): attention dropout (dropout_p > 0 in
// scaled_dot_product_attention); buffer updates of values split differently from their buffer.
#ifndef MAPD_WORKER_RANK_RANK_TRAINER_H_
#define MAPD_WORKER_RANK_RANK_TRAINER_H_

#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "model/ir/graph.h"
#include "proto/mapd/v1/checkpoint.pb.h"
#include "proto/mapd/v1/rank_program.pb.h"
#include "planner/lower/zero.h"
#include "worker/transport/communicator.h"
#include "worker/rank/grad_buckets.h"
#include "worker/runtime/optimizer.h"
#include "worker/runtime/trainer.h"

namespace mapd {

struct RankTrainerOptions {
  uint64_t seed = 0;  // the parameters' init seed (the same for every rank and plan)
  OptimizerOptions optimizer;
  // Data parallelism over one mesh axis (ZeRO 0-1, one pass a step): gradients all-reduced in
  // buckets of about this many bytes, started as backward fills them (grad_buckets.h); ZeRO 2-3
  // over one axis, one pass a step: reduced and gathered back a bucket at a time
  // (ZeroBuckets in grad_buckets.h). 0: one blocking collective per parameter. PyTorch DDP's default size.
  int64_t bucket_bytes = kDefaultBucketBytes;
};

class RankTrainer {
 public:
  // `groups[a]` is this rank's communicator on mesh axis a (ConnectMeshGroups); they must outlive
  // the trainer.
  static absl::StatusOr<std::unique_ptr<RankTrainer>> Create(Graph graph, v1::RankProgram program,
                                                             std::vector<Communicator*> groups,
                                                             const RankTrainerOptions& options);

  // This rank's blocks of a global batch, one map per micro-batch pass: copies, so that the
  // global batch (every rank is given the same one) can be released before the step — a view
  // would keep all of it, which the rank's profiled program does not hold.
  using LocalBatch = std::vector<TensorMap>;
  absl::StatusOr<LocalBatch> TakeBlocks(const TensorMap& global_batch) const;
  // One step on this rank's blocks (TakeBlocks), or on the global batch.
  absl::StatusOr<StepResult> Step(const LocalBatch& batch);
  absl::StatusOr<StepResult> Step(const TensorMap& global_batch);
  // The global loss on the batch under this rank's program, forward only: no autograd, dropout
  // off, no running statistics or optimizer state touched (the tail is not run). A collective:
  // every rank of the plan calls it at the same point.
  absl::StatusOr<double> Evaluate(const LocalBatch& batch);

  // A step pass by pass, as a pipeline stage takes it (pipeline_rank.h): the forward of each
  // pass, its backward — from the loss, or from the gradients of the values the stage sends —
  // in any order the schedule wants, then the gradients reduced and applied once. Step is
  // Forward + BackwardFromLoss for each pass, then ReduceGradients and ApplyGradients.
  using Env = std::unordered_map<std::string, at::Tensor>;
  struct Pass {
    int64_t index = 0;  // which micro-batch of the step
    Env env;            // its values (what backward and the sends need)
  };
  // `blocks`: this rank's blocks of the pass's inputs (TakeBlocks, and what other stages sent).
  absl::StatusOr<Pass> Forward(const TensorMap& blocks, int64_t index);
  // Backward from the pass's loss times the pass's loss scale; the pass's global loss (unscaled).
  absl::StatusOr<double> BackwardFromLoss(Pass& pass);
  // Backward from the gradients `grads` of the pass's values `outputs` (local names).
  absl::Status Backward(Pass& pass, const std::vector<std::string>& outputs, const std::vector<at::Tensor>& grads);
  // The loss scale of a pass (1/m when the loss averages over the batch).
  double pass_loss_scale() const { return pass_loss_scale_; }
  // After the passes: the deferred reductions of accumulated gradients, ZeRO-1's shards taken.
  absl::Status ReduceGradients();
  // The gradient the optimizer will apply to trainable `name` (its ZeRO shard's, or the block's),
  // after ReduceGradients; nullptr when it has none.
  at::Tensor* UpdateGradient(const std::string& name);
  // The whole gradient of trainable `name` after ReduceGradients, gathered from the stage's ranks
  // (a collective on the axes its block or ZeRO shard is split over: every rank calls it), and
  // this rank's part of a whole gradient put back as the one the optimizer applies.
  absl::StatusOr<at::Tensor> WholeGradient(const std::string& name) const;
  absl::Status SetWholeGradient(const std::string& name, const at::Tensor& whole);
  // `name` is held, with the same gradient, by `holders` ranks more than its placement says (a
  // weight tied across pipeline stages): the gradient norm counts it once.
  void CountHeldBy(const std::string& name, double holders);
  // Clipping (its norm summed over this rank's axis groups and `more_norm_groups`), the optimizer
  // step, ZeRO's blocks put back together, buffer updates from `last`'s values; the step counted.
  absl::Status ApplyGradients(const std::vector<Communicator*>& more_norm_groups, const Pass& last);
  // ApplyGradients in parts, for a rank of several trainers (an interleaved pipeline rank's
  // chunks, which clip by one norm): this trainer's sum of squared gradients (a block several
  // ranks hold counted once), not summed over any group; the clipping scale of squares summed
  // over this rank's axis groups and `more_norm_groups` (1 without clipping: no collective);
  // the step with every gradient scaled by `scale` first.
  bool clips() const { return max_grad_norm_ > 0; }
  at::Tensor GradientSquares() const;
  absl::StatusOr<double> ClipScale(at::Tensor sumsq, const std::vector<Communicator*>& more_norm_groups) const;
  absl::Status ApplyScaledGradients(double scale, const Pass& last);

  // This rank's blocks of the trainable parameters (name, tensor), in graph order. Under ZeRO-3
  // a block's storage exists only while in use: Blocks() gathers them (a collective: every rank
  // of the parameters' data-parallel groups calls it at the same point).
  const std::vector<std::pair<std::string, at::Tensor>>& parameters() const { return trainable_; }
  absl::StatusOr<std::vector<std::pair<std::string, at::Tensor>>> Blocks() const;
  const v1::RankProgram& program() const { return program_; }
  int64_t steps() const { return steps_; }
  // The learning rate of the last update (its schedule's at the optimizer's step count).
  double LearningRate() const;

  // This rank's state after the steps taken so far, and putting one back (the same program:
  // parameter names and block shapes must match, INVALID_ARGUMENT otherwise).
  absl::StatusOr<v1::RankCheckpoint> Save() const;
  absl::Status Restore(const v1::RankCheckpoint& checkpoint);
  // Putting back a checkpoint written under any plan, gathered into whole tensors
  // (common/checkpoint/gather.h): this rank takes its blocks of the parameters, buffers and
  // optimizer slots (its ZeRO shards of them) — a resharded resume. FAILED_PRECONDITION naming a
  // tensor the checkpoint lacks or holds in another shape (another model).
  absl::Status RestoreWhole(const v1::RankCheckpoint& whole);

 private:
  explicit RankTrainer(Graph graph) : graph_(std::move(graph)) {}
  // Create's steps, in its order: each fills the members named (rank_trainer.cc; the gradients'
  // sync in rank_grad_sync.cc).
  // micro_batches_, micro_graph_, pass_loss_scale_.
  absl::Status SetUpMicroBatches(int64_t micro_batches);
  // leaves_ and trainable_: this rank's blocks of the parameters, from the global seed.
  absl::Status MakeParameters(uint64_t seed);
  // release_ (each local tensor's last reader) and received_.
  void FindLastReaders();
  // copies_: how many ranks hold each trainable block, for clipping's norm.
  absl::Status CountBlockCopies();
  // zero_, zero_of_, updated_, identity_step_, zero_step_param_: what the optimizer updates
  // (copies_ of a ZeRO shard divided among its ranks).
  void LayOutZero();
  // free_after_ and reads_block_ (ZeRO-3); returns each GRAD_SYNC chain output → its trainable
  // index (ZeRO-3 only), for the recompute segments' blocks.
  std::unordered_map<std::string, int> MapZero3Reads();
  // deferred_step_ and deferred_: micro-batches' gradients reduced after the passes.
  void DeferMicroBatchReductions();
  // buckets_, bucket_of_step_, bucket_owners_: data parallelism's gradient buckets.
  absl::Status MakeGradBuckets(int64_t bucket_bytes);
  // zero_buckets_, zero_bucket_of_, zero_bucket_owners_: ZeRO 2-3's buckets.
  absl::Status MakeZeroBuckets(int64_t bucket_bytes);
  // segment_at_, segments_, segment_blocks_ (`block_of_chain`: MapZero3Reads's).
  absl::Status MapRecomputeSegments(const std::unordered_map<std::string, int>& block_of_chain);
  // max_grad_norm_ and optimizer_, over updated_.
  absl::Status MakeOptimizer(const OptimizerOptions& options);
  // Runs instruction `index` on the tensors of `env` (its outputs are added); dropout draws
  // from `generator`.
  absl::Status RunInstruction(int index, Env& env, at::Generator& generator) const;
  // Its two kinds: a Communicate step (an autograd collective, or where a bucket, ZeRO or the
  // passes' end reduces the gradient instead, the identity), and a node through the execution
  // table on local shapes.
  absl::Status RunCommunicate(int index, Env& env) const;
  absl::Status RunCompute(int index, Env& env, at::Generator& generator) const;
  // Activation checkpointing: segment `s` run so that only its inputs are kept, its outputs
  // added to `env`; its backward reruns it (SegmentFn in rank_trainer.cc).
  absl::Status RunSegment(int s, Env& env, at::Generator& generator) const;
  // The segment's instructions on `inputs` (io.inputs order); its outputs (io.outputs order).
  absl::StatusOr<std::vector<at::Tensor>> RunSegmentBody(int s, const std::vector<at::Tensor>& inputs,
                                                         at::Generator& generator) const;
  friend struct SegmentFn;
  struct SegmentIo {
    std::vector<std::string> inputs;   // read inside, made before it (parameters excluded)
    std::vector<std::string> outputs;  // made inside, read after it (or the loss, or buffer updates)
  };
  std::vector<SegmentIo> segments_;    // per program.recompute()
  std::vector<int> segment_at_;        // per instruction: the segment starting there, or -1
  // The first instruction Forward leaves to SumLossAndRunTail (after backward and the gradients'
  // reduction): batch norms' running statistics (RunningStatisticsTail); the program's size: none.
  int tail_start_ = 0;
  // After the gradients' reduction: `loss` (this rank's share of the step's loss) summed over the
  // loss's partial axes, and the tail run with its all-reduces coalesced — each compute
  // instruction runs once its inputs are there, and the all-reduces waiting meanwhile go as one
  // AllReduceSumCoalesced per axis (the loss joining the first on its first axis) — so a step
  // makes one small all-reduce where it made one per batch norm and pass. The step's loss
  // (undefined, and not summed, where `loss` is: summed apart, LossSummedAlone).
  absl::StatusOr<at::Tensor> SumLossAndRunTail(Pass& pass, at::Tensor loss);
  // Whether the loss is summed apart — over one axis, with no all-reduce after backward to join:
  // then Step starts its all-reduce before the gradients' reduction and waits for it after the
  // optimizer step, so its round trip (milliseconds with ranks > cores) hides behind them.
  bool LossSummedAlone() const;
  // This rank's local loss of the pass (the program's loss value); INTERNAL when not computed.
  absl::StatusOr<at::Tensor> PassLoss(const Pass& pass) const;
  // Backward from the pass's loss times its loss scale; this rank's loss (unscaled, f64).
  absl::StatusOr<at::Tensor> BackwardFromLocalLoss(Pass& pass);
  absl::StatusOr<at::Tensor> Block(const at::Tensor& global, const v1::Shard& shard) const;
  // Trainable `name`: its index in trainable_ (and updated_, copies_, zero_of_) and its shard in
  // the program. INVALID_ARGUMENT when this rank holds no such trainable parameter.
  struct TrainableShard {
    size_t index;
    const v1::Shard* shard;
  };
  absl::StatusOr<TrainableShard> FindTrainable(const std::string& name) const;
  // This rank's block of the dropout noise one device draws for `node` (throws on a mismatch).
  at::Tensor DropoutNoiseBlock(const v1::Node& node, const v1::Compute& c, const at::Tensor& like, double p,
                               at::Generator& generator) const;

  Graph graph_;
  v1::RankProgram program_;
  std::vector<Communicator*> groups_;
  std::unordered_map<std::string, at::Tensor> leaves_;  // parameters and buffers: local blocks
  std::vector<std::pair<std::string, at::Tensor>> trainable_;
  // What the optimizer updates, parallel to trainable_: the block itself, or for a parameter
  // ZeRO shards (zero_ holds its layout) the rank's flat shard of it.
  std::vector<std::pair<std::string, at::Tensor>> updated_;
  std::vector<int> zero_of_;           // per trainable block: its index in zero_, or -1
  std::vector<ZeroParam> zero_;        // ZeRO's sharded parameters (planner/lower/zero.h)
  // Per instruction: a GRAD_SYNC run as identity — ZeRO-2 replaces it, or a bucket summed over
  // several axes covers it (a bucketed chain's steps after its first).
  std::vector<bool> identity_step_;
  std::unordered_map<int, int> zero_step_param_;  // ZeRO-2/3: a chain's first step → its trainable index
  // ZeRO-3: per instruction, the trainable indices whose block it is the last forward reader of
  // (freed after it), and those whose block it reads (its outputs' gradients gather it again).
  std::vector<std::vector<int>> free_after_, reads_block_;
  // Per recompute segment: the trainable indices whose (freed) block it takes as an input — its
  // rerun in backward gathers them first.
  std::vector<std::vector<int>> segment_blocks_;
  absl::Status GatherBlocks(const std::vector<int>& trainable_indices) const;
  // The block of trainable `i` for reading: gathered (ZeRO-3) or the block itself; a fresh
  // tensor either way (a collective under ZeRO-3).
  absl::StatusOr<at::Tensor> ReadableBlock(size_t i) const;
  std::unique_ptr<Optimizer> optimizer_;
  // Per instruction: the local tensors whose last reader it is (released after it, so what
  // stays alive is what autograd saved — as the profiler assumes).
  std::vector<std::vector<std::string>> release_;
  bool random_ = false;  // the graph draws random numbers (DrawsRandomNumbers)
  bool evaluating_ = false;  // within Evaluate: dropout is the identity
  // Micro-batches: passes per step, the graph of one (types of its values), the loss scale of a
  // pass, and the pass running now (dropout keeps its slice of the whole batch's mask).
  int64_t micro_batches_ = 1;
  std::vector<bool> deferred_step_;                 // per instruction: a GRAD_SYNC reduced after the passes instead
  std::vector<std::pair<int, std::vector<int>>> deferred_;  // (trainable index, axes) reduced after the passes
  // Gradient buckets, one set per data-parallel axis; per instruction, the (set, slot) a
  // GRAD_SYNC hands its gradient to, or (-1, -1); per set, each slot's trainable index.
  std::vector<std::unique_ptr<GradBuckets>> buckets_;
  std::vector<std::pair<int, int>> bucket_of_step_;
  std::vector<std::vector<int>> bucket_owners_;
  // ZeRO 2-3's buckets, one set per (axis, dtype); per trainable index, the (set, slot) its
  // gradient goes to, or (-1, -1); per set, each slot's trainable index.
  std::vector<std::unique_ptr<ZeroBuckets>> zero_buckets_;
  std::vector<std::pair<int, int>> zero_bucket_of_;
  std::vector<std::vector<int>> zero_bucket_owners_;
  std::unique_ptr<Graph> micro_graph_;
  double pass_loss_scale_ = 1;
  int64_t pass_ = 0;
  double max_grad_norm_ = 0;     // > 0: clip across all shards
  std::vector<double> copies_;   // per trainable block: how many ranks hold the same block (or shard)
  uint64_t seed_ = 0;
  int64_t steps_ = 0;
  std::set<std::string> received_;  // a pipeline stage's inputs other stages send (not in the batch)
};

}  // namespace mapd

#endif  // MAPD_WORKER_RANK_RANK_TRAINER_H_

// Gradient buckets (DESIGN §8; PyTorch DDP's reducer is the model): the gradients of the
// parameters one group all-reduces (data parallelism over one mesh axis) are copied, as backward
// makes them, into flat buffers of about `bucket_bytes`; a bucket's all-reduce starts, without
// waiting, as soon as its last gradient is in, and runs while backward computes the rest. After
// backward, Finish waits for every bucket and gives each parameter its summed gradient — a view
// of its bucket, so no copy back.
//
// One all-reduce per bucket instead of one per parameter cuts the per-collective latency that
// dominated small models' steps, and starting them early hides the rest behind backward. The
// sums are the same: addition per element, over the same ranks (equivalence tests compare with
// the unbucketed runtime at 1e-5).
//
// Parameters are bucketed in the order their gradients are expected (the reverse of their use in
// forward); a bucket holds one dtype; a parameter larger than a bucket is a bucket of its own. A
// gradient that does not come in a step (a parameter backward did not reach) is summed as zeros
// and not handed back, so the optimizer skips it as before. Every rank of the group has the same
// parameters in the same order and completes its buckets in the same order (the same program,
// the same autograd order), so their all-reduces match.
#ifndef MAPD_WORKER_RANK_GRAD_BUCKETS_H_
#define MAPD_WORKER_RANK_GRAD_BUCKETS_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "planner/lower/zero.h"
#include "worker/transport/communicator.h"

namespace mapd {

class GradBuckets {
 public:
  // `params`: each parameter's block (its shape and dtype), in the order its gradient is
  // expected. `groups`: the communicators of the axes the gradients are summed over (at least
  // one; they must outlive the buckets): a bucket is all-reduced over the first as soon as it is
  // full, and after backward over each of the others in turn. `bucket_bytes` > 0.
  GradBuckets(std::vector<Communicator*> groups, const std::vector<at::Tensor>& params, int64_t bucket_bytes);

  // Parameter `slot`'s gradient is ready: copied into its bucket, whose all-reduce starts if it
  // was the last one missing. Called from backward (throws, as autograd code does, on a failed
  // start).
  void Ready(int slot, const at::Tensor& grad);

  // After backward: starts the buckets not started yet (in order), waits for every one — then,
  // per further axis, starts every bucket's all-reduce over it and waits for them — and hands
  // each parameter that had a gradient its sum (`set_grad(slot, view)`). Ready for the next step.
  absl::Status Finish(const std::function<void(int, at::Tensor)>& set_grad);

  int buckets() const { return static_cast<int>(buckets_.size()); }

 private:
  struct Bucket {
    at::Tensor flat;                  // the bucket's gradients, end to end
    std::vector<int> slots;           // its parameters
    int missing = 0;                  // gradients not yet in this step
    std::unique_ptr<PendingCollective> pending;  // its all-reduce, once started
  };
  struct Slot {
    int bucket = 0;
    int64_t offset = 0;               // in the bucket's elements
    int64_t numel = 0;
    std::vector<int64_t> sizes;
    bool ready = false;               // its gradient came this step
  };
  void Start(Bucket& b);
  void WaitFor(Bucket& b, absl::Status& status);  // its collective under way, if any; the first failure kept
  at::Tensor SlotView(const Slot& s);  // the slot's part of its bucket, in the parameter's shape

  std::vector<Communicator*> groups_;
  std::vector<Bucket> buckets_;
  std::vector<Slot> slots_;
  absl::Status start_error_;          // a bucket that could not start (reported by Finish)
};

// ZeRO 2-3's gradient buckets (the layout is planner/lower/zero.h's ZeroGradientBuckets, which
// the memory prediction reads too). Backward hands each sharded parameter's whole gradient to its
// bucket, which copies it rank-major into a staging buffer (row r: chunk r of each parameter);
// when the bucket's last gradient is in, one reduce-scatter of the buffer's rows
// (Communicator::ReduceScatterRowsAsync) starts and runs while backward goes on, and this rank
// keeps its row — its shard of every parameter's summed gradient. After the optimizer step,
// Gather puts the updated shards back into the blocks with one all-gather per bucket.
//
// One collective per bucket instead of one per parameter: ZeRO-2 on a small GPT went from a
// blocking reduce-scatter per parameter in backward and an all-gather per parameter after the
// step to a few of each. (Gloo has no CPU reduce-scatter: there it is the ring all-reduce of
// every row; NCCL's is ncclReduceScatter.) The sums are the same additions over the same ranks.
//
// Staging buffers are few: two, reused bucket after bucket — a bucket that needs one while both
// are taken waits for the older bucket under way to finish. Only if gradients come so far out
// of order that both buffers belong to buckets still missing some is a third allocated, for
// that step alone. A gradient that does not come in a step is summed as zeros and not handed
// back, so the optimizer skips it.
class ZeroBuckets {
 public:
  // `group`: the communicator of set.axis (outlives the buckets); `options`: the gradients'
  // dtype and device. Allocates the staging buffers (each bucket's row of shard gradients is
  // made when its reduction is done and lives until the optimizer has used it).
  ZeroBuckets(Communicator* group, ZeroBucketSet set, const at::TensorOptions& options);

  const ZeroBucketSet& layout() const { return set_; }

  // Parameter `slot`'s whole gradient (its block's shape): into its bucket's staging buffer; the
  // bucket's reduce-scatter starts if it was the last one missing. Called from backward (throws, as
  // autograd code does, on a failed collective).
  void Ready(int slot, const at::Tensor& grad);

  // After backward: starts the buckets not started yet, waits for all, and hands each parameter
  // that had a gradient its shard's sum (`set_grad(slot, view)`, a view of the bucket's row).
  absl::Status Finish(const std::function<void(int, at::Tensor)>& set_grad);

  // After the optimizer step: every rank's updated shards (`shard(slot)`, [chunk]) gathered
  // back into the blocks (`block(slot)`, written in place): one all-gather for as many buckets
  // as the staging buffers hold together.
  absl::Status Gather(const std::function<at::Tensor(int)>& shard, const std::function<at::Tensor(int)>& block);

  // ZeRO-3, where blocks exist only while in use (collectives.h FreeBlock): each slot's shard
  // (the optimizer's leaf) and block. Allocates the gather buffers (one staging buffer's size
  // each; two where there are two buckets or more).
  void SetParameters(std::vector<at::Tensor> shards, std::vector<at::Tensor> blocks);
  // ZeRO-3: parameter `slot`'s block gathered, if it is not: its bucket's shards are gathered
  // with one all-gather into a gather buffer — unless a buffer holds them already, as it does for
  // the bucket's other parameters, read next — and the block's part copied out. As FSDP
  // prefetches, the buckets are gathered ahead: the order in which the step before first needed
  // them (forward, then backward) is this step's forecast, and once the step has reached a
  // bucket of it, the next one is all-gathered, asynchronously, into the other buffer (the one
  // the least recently read) while this one computes. Every rank of the group runs the same
  // program and autograd order, so it frees, gathers and prefetches the same buckets in the
  // same order and their all-gathers match.
  absl::Status GatherBlock(int slot);
  // The shards changed (an optimizer step, a restore): what the gather buffers hold is stale,
  // the step's order of buckets becomes the next step's forecast, and the forecast's first
  // bucket is all-gathered, asynchronously, at once.
  absl::Status ShardsChanged();

 private:
  struct Bucket {
    int missing = 0;           // gradients not yet in this step
    int buffer = -1;           // its staging buffer, while it has one
    bool started = false;      // its reduce-scatter was started this step
    std::unique_ptr<PendingCollective> pending;
    at::Tensor shard_grads;    // [segment]: this rank's row of the sums, from Drain to Finish
  };
  struct Slot {
    int bucket = 0;
    int64_t offset = 0;        // of its chunk in a row
    int contributions = 1;     // gradients a step brings (one per reader: a tied weight has two)
    int arrived = 0;           // of them, this step: the first is copied in, the others added
  };
  int Contributions(int bucket) const;

  at::Tensor Rows(int bucket);   // its staging buffer as [ranks, segment]
  int TakeBuffer();              // a free staging buffer, waiting for a bucket under way if need be
  void Start(int bucket);
  absl::Status Drain(int bucket);  // waits for its reduce-scatter, keeps this rank's row, frees the buffer

  Communicator* group_;
  ZeroBucketSet set_;
  at::TensorOptions options_;
  std::vector<Bucket> buckets_;
  std::vector<Slot> slots_;
  at::Tensor staging_;                // the kept staging buffers, end to end
  std::vector<at::Tensor> buffers_;  // the first set_.staging_buffers (parts of staging_) are kept across steps
  std::vector<int> free_buffers_;
  std::deque<int> under_way_;        // buckets started and holding a buffer, oldest first
  absl::Status error_;               // the first failure of this step (reported by Finish)
  // ZeRO-3 (SetParameters): per slot, its shard and block; the gather buffers.
  struct GatherBuffer {
    at::Tensor flat;                             // staging_elements
    int bucket = -1;                             // whose shards it holds (or is receiving); -1: none
    std::unique_ptr<PendingCollective> pending;  // a prefetch under way into it
    int64_t last_read = 0;                       // when a block was last copied out of it
  };
  absl::StatusOr<GatherBuffer*> BufferFor(int bucket);  // holding `bucket`, gathered at once if none does
  absl::Status StartGather(GatherBuffer& buffer, int bucket, bool wait);
  absl::Status Settle(GatherBuffer& buffer);     // its prefetch done (on failure it holds nothing)
  absl::Status Prefetch();                       // the forecast's next bucket, if it is not held
  std::vector<at::Tensor> shards_, blocks_;
  std::vector<GatherBuffer> gathers_;
  int64_t reads_ = 0;                            // blocks copied out so far (the buffers' clock)
  std::vector<int> order_, forecast_;            // buckets in the order first needed: this step, the last
};

}  // namespace mapd

#endif  // MAPD_WORKER_RANK_GRAD_BUCKETS_H_

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
#ifndef MAPD_WORKER_DIST_GRAD_BUCKETS_H_
#define MAPD_WORKER_DIST_GRAD_BUCKETS_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "worker/dist/communicator.h"

namespace mapd {

class GradBuckets {
 public:
  // `params`: each parameter's block (its shape and dtype), in the order its gradient is
  // expected. `group` must outlive the buckets. `bucket_bytes` > 0.
  GradBuckets(Communicator* group, const std::vector<at::Tensor>& params, int64_t bucket_bytes);

  // Parameter `slot`'s gradient is ready: copied into its bucket, whose all-reduce starts if it
  // was the last one missing. Called from backward (throws, as autograd code does, on a failed
  // start).
  void Ready(int slot, const at::Tensor& grad);

  // After backward: starts the buckets not started yet (in order), waits for every one, and hands
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
  at::Tensor SlotView(const Slot& s);  // the slot's part of its bucket, in the parameter's shape

  Communicator* group_;
  std::vector<Bucket> buckets_;
  std::vector<Slot> slots_;
  absl::Status start_error_;          // a bucket that could not start (reported by Finish)
};

}  // namespace mapd

#endif  // MAPD_WORKER_DIST_GRAD_BUCKETS_H_

// The rank program's Communicate steps as autograd functions (DESIGN §7): each forward
// collective with the backward rank_program.proto gives it, so that N ranks' autograd computes
// what one device would.
#ifndef MAPD_WORKER_RANK_COLLECTIVES_H_
#define MAPD_WORKER_RANK_COLLECTIVES_H_

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"
#include <vector>

#include "planner/lower/zero.h"
#include "proto/mapd/v1/rank_program.pb.h"
#include "worker/transport/communicator.h"
#include "worker/rank/grad_buckets.h"

namespace mapd {

// Applies `step` to `x` on `group` (the communicator of the step's axis). A failed collective
// (in forward now, or later in backward) is reported as the communicator's error; in backward it
// surfaces as the exception autograd throws, which the trainer turns into a status.
absl::StatusOr<at::Tensor> ApplyCommunicate(const v1::Communicate& step, const at::Tensor& x, Communicator& group);

// This rank's chunk of `x` along `dim` (x split in group.size() equal chunks), contiguous: what
// a reduce-scatter of a sum leaves it.
at::Tensor ChunkOf(const at::Tensor& x, Communicator& group, int64_t dim);

// The sums over `group` of `tensors`, each shaped as given: one all-reduce per dtype, of their
// elements laid end to end (dtypes in order of first appearance, so every rank agrees). Small
// all-reduces cost a round trip each whatever their size (on 4 Gloo ranks sharing 2 cores ~5 ms
// apiece), so a step's small sums (batch norms' statistics, the loss) go together.
absl::StatusOr<std::vector<at::Tensor>> AllReduceSumCoalesced(const std::vector<at::Tensor>& tensors, Communicator& group);

// ZeRO's collectives (which parameters, which chunk: planner/lower/zero.h). `groups[a]` is the
// rank's communicator on mesh axis a.
//
// This rank's shard of `full`, flattened and zero-padded to z.ranks × z.chunk elements: [z.chunk].
at::Tensor FlatShard(const at::Tensor& full, const ZeroParam& z);
// This rank's shard of the sum of `full` over the parameter's data-parallel ranks: a
// reduce-scatter per axis, outermost first.
absl::StatusOr<at::Tensor> ReduceScatterShard(const at::Tensor& full, const ZeroParam& z,
                                              const std::vector<Communicator*>& groups);
// The block back from every rank's shard (an all-gather per axis, innermost first), `shape`d.
absl::StatusOr<at::Tensor> GatherShards(const at::Tensor& shard, const ZeroParam& z, const std::vector<Communicator*>& groups,
                                        at::IntArrayRef shape);
// ZeRO-2's parameter in forward: the values of `full` (which itself takes no gradient); its
// backward reduce-scatters the block's gradient and gives `shard` (a leaf) this rank's part, so
// a whole gradient lives only inside that backward. `z` and `groups` must outlive the graph.
// Under ZeRO-3 (`gathered`) the block is gathered first (GatherBlock) and freed after backward.
// With `buckets`, backward hands the gradient to them as `slot` instead (ZeroBuckets in grad_buckets.h) and
// gives the shard none (ZeroBuckets::Finish sets its summed one).
at::Tensor ZeroParameter(const at::Tensor& shard, const at::Tensor& full, const ZeroParam* z,
                         const std::vector<Communicator*>* groups, bool gathered, ZeroBuckets* buckets, int slot);

// ZeRO-3: the block is a tensor whose storage exists only while the parameter is in use — freed
// after its last reader in forward, gathered again before backward needs it (as FSDP frees and
// re-allocates its flat parameter's storage). Tensors autograd saved are views of the same
// storage, so they see the gathered values again.
bool BlockGathered(const at::Tensor& block);
// Gathers every rank's shard into `block`'s storage, allocating it (no-op when gathered). The
// write does not touch the block's version counter (a saved view would otherwise refuse it).
absl::Status GatherBlock(const at::Tensor& block, const at::Tensor& shard, const ZeroParam& z,
                         const std::vector<Communicator*>& groups);
void FreeBlock(const at::Tensor& block);
// Gives a freed `block` storage again and returns a tensor to write its values through.
at::Tensor AllocateBlock(const at::Tensor& block);
// A GRAD_SYNC done by gradient buckets (grad_buckets.h): the identity; in backward the gradient
// goes to `buckets` as slot `slot`, and the parameter gets its sum from GradBuckets::Finish.
at::Tensor BucketedGradSync(const at::Tensor& x, GradBuckets* buckets, int slot);

}  // namespace mapd

#endif  // MAPD_WORKER_RANK_COLLECTIVES_H_

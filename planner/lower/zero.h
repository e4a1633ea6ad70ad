// ZeRO as a rank runs it (stages 1 and 2; DESIGN §6): which parameters are sharded, over which
// ranks, and which part is this rank's. Shared by the runtime (worker/rank) and the memory
// prediction (rank_cost.h), so both see the same shards.
//
// A trainable parameter's data-parallel axes are the axes of the GRAD_SYNC steps that read it
// — the axes where it is held replicated while its consumers split their work, so its gradient
// is a partial sum there. It is sharded when every reader of the parameter is such a chain of
// GRAD_SYNC steps over the same axes (a parameter also read directly keeps stage 0: its direct
// uses' gradient contributions are already whole and must not be summed again). Its block is
// flattened and cut into `ranks` equal chunks (the last padded with zeros): the rank with
// position `index` among them (row-major over the axes, outermost first) owns chunk `index`.
#ifndef MAPD_PLANNER_LOWER_ZERO_H_
#define MAPD_PLANNER_LOWER_ZERO_H_

#include <cstdint>
#include <string>
#include <vector>

#include "planner/profile/bucket_size.h"
#include "proto/mapd/v1/rank_program.pb.h"

namespace mapd {

struct ZeroParam {
  std::string name;
  std::vector<int> axes;        // its data-parallel mesh axes, outermost first
  int64_t ranks = 1;            // the product of their sizes
  int64_t index = 0;            // this rank's position among them
  int64_t numel = 0;            // elements of the rank's block
  int64_t chunk = 0;            // ceil(numel / ranks): elements of a shard
  std::vector<int> grad_syncs;  // instruction indices of its GRAD_SYNC steps
};

// The sharded parameters of `program` (empty when its zero_stage is 0), in program order.
std::vector<ZeroParam> ZeroParams(const v1::RankProgram& program);

// The parameters every reader of which is a GRAD_SYNC chain over the same axes, whatever the
// ZeRO stage (ZeroParams are these under stage ≥ 1). Their gradient may be reduced once after
// the backward of several micro-batches — the sum of all-reduces is the all-reduce of the sum —
// instead of in each pass (`index`, `chunk` as for ZeRO over the chain's axes).
std::vector<ZeroParam> GradSyncChains(const v1::RankProgram& program);

// The chains whose all-reduce the runtime leaves to gradient buckets (worker/rank/grad_buckets.h):
// data parallelism over one axis or several — one reader, a chain of one GRAD_SYNC per axis —
// under ZeRO 0 or 1 with one pass a step (ZeRO-1 then cuts its shard from the bucket's sum). The
// chain's first step (grad_syncs[0], the one reading the parameter) hands the gradient to its
// bucket, which is all-reduced over each of the chain's axes in turn; the chain's other steps run
// as identities (LocalGraph makes them views). Their gradients live from the step's start, in
// the buckets (the profiler counts them so). A 2x2 mesh's data parallelism over both axes had
// each parameter's gradient all-reduced on each axis: 56 all-reduces a step for nanoGPT.
std::vector<ZeroParam> BucketedGradSyncs(const v1::RankProgram& program);

// ZeRO 2-3's gradient buckets (ZeroBuckets, worker/rank/grad_buckets.h). The sharded parameters of
// one axis and one dtype, in one pass a step, are reduced a bucket at a time instead
// of one reduce-scatter each. A bucket's gradients are laid out rank-major in a staging buffer of
// `ranks × segment` elements — row r holds chunk r of each of its parameters, end to end — so one
// reduction of the buffer leaves this rank's shard of every parameter in row `index`; after the
// optimizer step the same layout gathers the updated shards back. Two staging buffers of the
// set's largest bucket serve its buckets in turn (a third only when gradients come out of order).
struct ZeroBucket {
  std::vector<int> params;       // indices into ZeroBucketSet::params
  std::vector<int64_t> offsets;  // each one's chunk offset in a row
  int64_t segment = 0;           // elements of a row: the sum of their chunks
};
struct ZeroBucketSet {
  int axis = 0;
  v1::DType dtype = v1::DTYPE_UNSPECIFIED;
  int64_t ranks = 1;                // the axis's size
  std::vector<ZeroParam> params;    // in the order their gradients are expected
  std::vector<ZeroBucket> buckets;  // in the same order
  int64_t staging_buffers = 0;      // min(2, buckets)
  int64_t staging_elements = 0;     // of each: ranks × the largest segment
};

// The buckets of `program` (empty under ZeRO 0-1, several passes a step, or `bucket_bytes` ≤ 0):
// each set cut, in gradient order, into k = max(program.zero_bucket_parts(), set bytes /
// `bucket_bytes`) contiguous buckets (at most one per parameter) whose largest segment is as
// small as it can be (bucket_size.h says why these counts). None where zero_bucket_parts is -1.
std::vector<ZeroBucketSet> ZeroGradientBuckets(const v1::RankProgram& program, int64_t bucket_bytes);

}  // namespace mapd

#endif  // MAPD_PLANNER_LOWER_ZERO_H_

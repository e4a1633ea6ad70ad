// ZeRO as a rank runs it (stages 1 and 2; DESIGN §6): which parameters are sharded, over which
// ranks, and which part is this rank's. Shared by the runtime (worker/dist) and the memory
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

// The chains whose all-reduce the runtime leaves to gradient buckets (worker/dist/grad_buckets.h):
// data parallelism over one axis — a single GRAD_SYNC — under ZeRO 0 with one pass a step. Their
// gradients live from the step's start, in the buckets (the profiler counts them so).
std::vector<ZeroParam> BucketedGradSyncs(const v1::RankProgram& program);

}  // namespace mapd

#endif  // MAPD_PLANNER_LOWER_ZERO_H_

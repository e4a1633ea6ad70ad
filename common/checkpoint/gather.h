// The whole tensors of a committed checkpoint step, gathered from the ranks' blocks and shards
// (DIR/step-NNNNNNNN/rank_<r>.pb, each tensor placed in its whole by BlockPlace), without the plan
// the checkpoint was written under: what `mapctl export` writes as a PyTorch state dict. A job's
// ranks may have written their files in several directories (one per worker); every rank's file
// must be found in one of them. No LibTorch: tensors stay bytes.
#ifndef MAPD_COMMON_CHECKPOINT_GATHER_H_
#define MAPD_COMMON_CHECKPOINT_GATHER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/mapd/v1/checkpoint.pb.h"

namespace mapd {

struct GatheredCheckpoint {
  v1::CheckpointMeta meta;  // the step's, as committed (ranks, mesh, plan in words)
  // One "rank" holding every whole tensor: parameters and buffers (each with its aliases in
  // place.aliases), the optimizer's slots, the optimizer's step count.
  v1::RankCheckpoint whole;
};

// Step `step` (0: the last committed in every directory, the smallest of their LATESTs) of the
// checkpoint whose ranks' files are spread over `dirs`. NOT_FOUND for a step not committed in a
// directory; FAILED_PRECONDITION naming the ranks no directory holds, or a tensor whose blocks do
// not cover it; DATA_LOSS for a file that does not parse or a block that does not fit its place.
absl::StatusOr<GatheredCheckpoint> GatherCheckpoint(const std::vector<std::string>& dirs, int64_t step = 0);

}  // namespace mapd

#endif  // MAPD_COMMON_CHECKPOINT_GATHER_H_

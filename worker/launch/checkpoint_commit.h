// Committing a checkpoint (DESIGN §9): each rank writes its shard to DIR/step-NNNNNNNN.tmp/
// rank_<r>.pb; once every rank it waits for has, the launcher (`mapctl run`, or a mapd-worker for
// its ranks of a job) writes the step's metadata, renames the directory to DIR/step-NNNNNNNN (the
// atomic commit) and points DIR/LATEST at it. No LibTorch.
#ifndef MAPD_WORKER_LAUNCH_CHECKPOINT_COMMIT_H_
#define MAPD_WORKER_LAUNCH_CHECKPOINT_COMMIT_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/mapd/v1/checkpoint.pb.h"

namespace mapd {

// The directory of a checkpoint step ("DIR/step-00000010"); ".tmp" appended while uncommitted.
std::string CheckpointStepDir(const std::string& dir, int64_t step);

// Commits step `meta.step()` under `dir` (the ranks' shards are in its .tmp directory).
absl::Status CommitCheckpointStep(const std::string& dir, const v1::CheckpointMeta& meta);

// The metadata of the last step committed under `dir` (the one DIR/LATEST names); NOT_FOUND when
// none is, DATA_LOSS when LATEST names a step whose metadata cannot be read.
absl::StatusOr<v1::CheckpointMeta> ReadLatestCheckpoint(const std::string& dir);

}  // namespace mapd

#endif  // MAPD_WORKER_LAUNCH_CHECKPOINT_COMMIT_H_

// Committing a checkpoint (DESIGN §9): each rank writes its shard to DIR/step-NNNNNNNN.tmp/
// rank_<r>.pb; once every rank it waits for has, the launcher (`mapctl run`, or a mapd-worker for
// its ranks of a job) writes the step's metadata, renames the directory to DIR/step-NNNNNNNN (the
// atomic commit) and points DIR/LATEST at it. No LibTorch.
#ifndef MAPD_COMMON_CHECKPOINT_CHECKPOINT_COMMIT_H_
#define MAPD_COMMON_CHECKPOINT_CHECKPOINT_COMMIT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/mapd/v1/checkpoint.pb.h"

namespace mapd {

// The directory of a checkpoint step ("DIR/step-00000010").
std::string CheckpointStepDir(const std::string& dir, int64_t step);

// Where attempt `attempt` of a run stages the step before it is committed: "DIR/step-00000010.tmp"
// for attempt 0, "DIR/step-00000010.a2.tmp" for attempt 2. Each attempt has its own, so a rank of
// an earlier attempt that still runs never writes into the one a later attempt commits.
std::string CheckpointStagingDir(const std::string& dir, int64_t step, int attempt);

// Commits step `meta.step()` under `dir` from attempt `attempt`'s staging directory (where the
// ranks wrote their shards), then keeps the newest `keep_steps` committed steps (0: every one;
// PruneCheckpointSteps). A step is deleted only once a newer one is committed and named by LATEST.
absl::Status CommitCheckpointStep(const std::string& dir, const v1::CheckpointMeta& meta, int keep_steps = 0, int attempt = 0);

// Under `dir`, whose LATEST names step `latest`: deletes committed steps older than the newest
// `keep_steps` (>= 1), and the staging directories (any attempt's) of steps before `latest` —
// writes abandoned when a later step committed first. Steps after `latest` are never touched.
absl::Status PruneCheckpointSteps(const std::string& dir, int64_t latest, int keep_steps);

// The metadata a run commits with each step: the steps done, its world, mesh and plan (in words).
v1::CheckpointMeta CheckpointMetaFor(int64_t step, int world, const std::vector<int64_t>& mesh, const std::string& plan);

// OK when `meta`'s shards are a run's of `world` ranks on `mesh` under `plan` (the only ones it can
// load, until checkpoints are resharded); FAILED_PRECONDITION otherwise, naming both, from `what`
// ("--resume DIR", "the checkpoint of job 3").
absl::Status CheckCheckpointMatches(const v1::CheckpointMeta& meta, int world, const std::vector<int64_t>& mesh,
                                    const std::string& plan, const std::string& what);

// The metadata of the last step committed under `dir` (the one DIR/LATEST names); NOT_FOUND when
// none is, DATA_LOSS when LATEST names a step whose metadata cannot be read.
absl::StatusOr<v1::CheckpointMeta> ReadLatestCheckpoint(const std::string& dir);

}  // namespace mapd

#endif  // MAPD_COMMON_CHECKPOINT_CHECKPOINT_COMMIT_H_

// A job resuming without shared storage: before its ranks start, the worker fetches from the
// workers that keep them the shards of the resume step its ranks read — their own ranks' shards,
// or every rank's when the step is resharded into another plan — and commits them in its run's
// checkpoint directory, where the ranks read a step as they would their own.
#ifndef MAPD_WORKER_SHARDS_SHARD_RESUME_H_
#define MAPD_WORKER_SHARDS_SHARD_RESUME_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "proto/mapd/v1/workers.pb.h"

namespace mapd {

// The files of `a.resume_step()` this worker's ranks read: meta.pb, then rank_<r>.pb for its own
// ranks, or for every rank of the step's sources when resharded.
std::vector<int> RanksToFetch(const v1::RankAssignment& a);

// Fetches them (a.resume_shards says from where, a.shard_secret admits) into `checkpoint_dir`'s
// step a.resume_step(), committed there from attempt a.attempt()'s staging directory.
// FAILED_PRECONDITION naming the rank whose shards no holder gave, with the holders' errors.
absl::Status FetchResumeShards(const v1::RankAssignment& a, const std::string& checkpoint_dir, double timeout_seconds);

}  // namespace mapd

#endif  // MAPD_WORKER_SHARDS_SHARD_RESUME_H_

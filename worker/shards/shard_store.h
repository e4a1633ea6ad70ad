// A worker's checkpoint shards by job and step, kept for its peers (docs/coordinator.md
// "Checkpoints without shared storage"): DIR/job-<id>/step-NNNNNNNN/{meta.pb, rank_<r>.pb} — this
// worker's own ranks' shards of a committed step (linked in from the run directory) and the
// shards a peer worker pushed here after its commit. A job resuming elsewhere fetches from here
// the shards its ranks read (shard_service.h). Only jobs assigned to this worker, and callers
// that know a job's shard secret, are served. Of each job it keeps the step the coordinator last
// said is committed (the one a restart resumes from) and at most `max_newer_steps` newer ones
// (written, not yet committed on every worker); older steps are dropped. Thread-safe.
#ifndef MAPD_WORKER_SHARDS_SHARD_STORE_H_
#define MAPD_WORKER_SHARDS_SHARD_STORE_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace mapd {

// OK for the names a step holds ("meta.pb", "rank_<r>.pb" with 0 <= r < 2^20); INVALID_ARGUMENT
// naming anything else — never a path.
absl::Status CheckShardFileName(const std::string& file);

// The files a step's shards of `ranks` are: meta.pb and rank_<r>.pb for each.
std::vector<std::string> ShardFiles(const std::vector<int>& ranks);

class ShardStore {
 public:
  // `dir` is made if absent.
  explicit ShardStore(std::string dir, int max_newer_steps = 4);

  // Calls naming `job` must carry `secret` (the job's shard secret, from its assignment).
  void Allow(int64_t job, const std::string& secret);
  // The coordinator says `step` of `job` is committed on every worker: older steps are dropped.
  void Committed(int64_t job, int64_t step);
  // Drops every job not in `jobs` — its steps, its secret — (HeartbeatResponse.shard_keep: the
  // coordinator no longer runs it, so no resume will read them).
  void Retain(const std::set<int64_t>& jobs);
  // PERMISSION_DENIED unless `job` was allowed here with this secret (compared in constant time).
  absl::Status CheckAccess(int64_t job, const std::string& secret) const;

  // A fresh directory to receive a step's files into (then Keep); inside the store's directory, so
  // Keep only renames.
  absl::StatusOr<std::string> NewStaging(int64_t job, int64_t step);
  // Moves `files` from `from` (a staging directory, or a run's committed step directory when
  // `link` — then hard-linked, or copied across filesystems) into the job's step, then drops
  // what is not kept (above).
  absl::Status Keep(int64_t job, int64_t step, const std::string& from, const std::vector<std::string>& files, bool link = false);
  // The path of `file` of the job's step; NOT_FOUND naming it when it is not kept here.
  absl::StatusOr<std::string> PathOf(int64_t job, int64_t step, const std::string& file) const;

  const std::string& dir() const { return dir_; }
  // Where the job's step is kept: DIR/job-<id>/step-NNNNNNNN.
  std::string StepDir(int64_t job, int64_t step) const;

 private:
  void PruneLocked(int64_t job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string dir_;
  const int max_newer_steps_;
  std::map<int64_t, int64_t> committed_ ABSL_GUARDED_BY(mu_);  // job → its committed step
  mutable absl::Mutex mu_;
  std::map<int64_t, std::string> secrets_ ABSL_GUARDED_BY(mu_);
  int64_t next_staging_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace mapd

#endif  // MAPD_WORKER_SHARDS_SHARD_STORE_H_

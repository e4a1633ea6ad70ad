// The coordinator's copy of each rank's output (its stderr, sent by its worker with the reports):
// the last part of each rank's stream in memory, at byte offsets that only grow, so `mapctl logs
// ID --rank R -f` can follow it by asking from the last offset it saw. Lost when the coordinator
// restarts (the workers keep rotated files, `rank_R.log` under their work directories).
// Thread-safe.
#ifndef MAPD_SERVER_JOBS_RANK_LOGS_H_
#define MAPD_SERVER_JOBS_RANK_LOGS_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "absl/synchronization/mutex.h"

namespace mapd {

struct RankLogLimits {
  int64_t per_job_bytes = 16 << 20;  // a job's ranks share this: each keeps per_job_bytes / ranks,
  int64_t min_rank_bytes = 64 << 10; // but at least this
  int64_t max_rank_bytes = 1 << 20;  // and at most this
  // All jobs together: past it, the oldest jobs' output goes first.
  int64_t total_bytes = 512 << 20;
};

class RankLogs {
 public:
  explicit RankLogs(RankLogLimits limits = {}) : limits_(limits) {}

  // Appends `text` to rank `rank` of job `job` (which has `ranks` ranks); `dropped_before`: bytes
  // the worker could not send before it (noted in the stream).
  void Append(int64_t job, int ranks, int rank, std::string_view text, int64_t dropped_before);

  struct Slice {
    std::string text;
    int64_t start_offset = 0, next_offset = 0;
    int64_t dropped_bytes = 0;  // asked for but no longer kept
  };
  // The rank's output from `after_offset` (an offset past the end, from a coordinator that
  // restarted since: from the start); `tail_lines` > 0: only the last lines of that.
  Slice Read(int64_t job, int rank, int64_t after_offset, int tail_lines) const;

  void Forget(int64_t job);  // a deleted job's
  int64_t total_bytes() const;

 private:
  struct Stream {
    std::string text;    // the kept bytes: offsets [start, start + text.size())
    int64_t start = 0;
  };
  void TrimTotalLocked(int64_t keep_job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const RankLogLimits limits_;
  mutable absl::Mutex mu_;
  std::map<int64_t, std::map<int, Stream>> jobs_ ABSL_GUARDED_BY(mu_);
  int64_t total_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace mapd

#endif  // MAPD_SERVER_JOBS_RANK_LOGS_H_

// What the dispatcher tracks for a running job besides its parts: its progress over the ranks'
// reports, and its checkpoint steps as the workers write and the coordinator commits them.
// Plain values, kept under the dispatcher's lock.
#ifndef MAPD_SERVER_DISPATCH_JOB_TRACKING_H_
#define MAPD_SERVER_DISPATCH_JOB_TRACKING_H_

#include <algorithm>
#include <cstdint>
#include <map>

#include "proto/mapd/v1/workers.pb.h"

namespace mapd {

// Progress: the worst peak over every rank's steps; rank 0's steps and losses (the global loss).
struct JobProgressStats {
  int64_t worst_peak_bytes = 0;
  bool first_loss_seen = false;
  double first_loss = 0, last_loss = 0;
  int64_t last_step = 0;

  // Adds one rank's step; true when it is rank 0's (the job's progress).
  bool Add(const v1::RankStep& s) {
    worst_peak_bytes = std::max(worst_peak_bytes, s.peak_bytes());
    if (s.rank() != 0) return false;
    if (!first_loss_seen) first_loss = s.loss(), first_loss_seen = true;
    last_step = s.step();
    last_loss = s.loss();
    return true;
  }
};

// Checkpoint steps: how many of the job's parts (workers) wrote each, and the last committed.
class CheckpointTracker {
 public:
  // One part's shards of `step` are written; true when that makes all `parts` parts' (once).
  bool Written(int64_t step, int parts) { return ++written_[step] == parts; }
  void Committed(int64_t step) { committed_ = std::max(committed_, step); }
  int64_t committed() const { return committed_; }
  // A new attempt: steps written by the earlier one no longer count (committed ones do).
  void NewAttempt() { written_.clear(); }

 private:
  std::map<int64_t, int> written_;  // step → parts that wrote it
  int64_t committed_ = 0;           // the last step committed on the shared storage
};

}  // namespace mapd

#endif  // MAPD_SERVER_DISPATCH_JOB_TRACKING_H_

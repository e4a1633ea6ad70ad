// What the dispatcher tracks for a running job besides its parts: its progress over the ranks'
// reports, and its checkpoint steps as the workers write and the coordinator commits them.
// Plain values, kept under the dispatcher's lock.
#ifndef MAPD_SERVER_DISPATCH_JOB_TRACKING_H_
#define MAPD_SERVER_DISPATCH_JOB_TRACKING_H_

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <vector>

#include "proto/mapd/v1/workers.pb.h"

namespace mapd {

// Progress: the worst peak over every rank's steps; rank 0's steps and losses (the global loss).
struct JobProgressStats {
  int64_t worst_peak_bytes = 0;
  bool first_loss_seen = false;
  double first_loss = 0, last_loss = 0;
  int64_t last_step = 0;
  // Rank 0's step times after its first (warm-up: allocation, the first collectives), the last
  // kKeptStepTimes of them.
  static constexpr size_t kKeptStepTimes = 1024;
  std::deque<double> step_seconds;

  // The median of step_seconds (0: none yet).
  double MedianStepSeconds() const {
    if (step_seconds.empty()) return 0;
    std::vector<double> v(step_seconds.begin(), step_seconds.end());
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
    return v[v.size() / 2];
  }

  // Adds one rank's step of a job of `steps` steps; true when it is rank 0's next (the job's
  // progress). A step outside 1..steps, or one of rank 0's not after its last, is not counted.
  bool Add(const v1::RankStep& s, int64_t steps) {
    if (s.step() < 1 || s.step() > steps || s.peak_bytes() < 0) return false;
    worst_peak_bytes = std::max(worst_peak_bytes, s.peak_bytes());
    if (s.rank() != 0 || s.step() <= last_step) return false;
    if (!first_loss_seen) first_loss = s.loss(), first_loss_seen = true;
    last_step = s.step();
    last_loss = s.loss();
    if (s.step() > 1 && s.seconds() > 0 && std::isfinite(s.seconds())) {
      step_seconds.push_back(s.seconds());
      if (step_seconds.size() > kKeptStepTimes) step_seconds.pop_front();
    }
    return true;
  }
};

// Checkpoint steps: which of the job's parts (workers) wrote each, and the last committed.
class CheckpointTracker {
 public:
  // Part `part` (0 ≤ part < parts) wrote its shards of `step`; true when that makes every part's
  // — each part counted once, however often it says so, and only for a step after the last
  // committed (steps only move forward).
  bool Written(int64_t step, int part, int parts) {
    if (step <= committed_ || part < 0 || part >= parts) return false;
    std::set<int>& by = written_[step];
    const bool fresh = by.insert(part).second;
    return fresh && static_cast<int>(by.size()) == parts;
  }
  void Committed(int64_t step) {
    committed_ = std::max(committed_, step);
    written_.erase(written_.begin(), written_.upper_bound(committed_));  // nothing at or before it commits again
  }
  int64_t committed() const { return committed_; }
  // A new attempt: steps written by the earlier one no longer count (committed ones do).
  void NewAttempt() { written_.clear(); }

 private:
  std::map<int64_t, std::set<int>> written_;  // step → the parts that wrote it
  int64_t committed_ = 0;                     // the last step committed on the shared storage
};

}  // namespace mapd

#endif  // MAPD_SERVER_DISPATCH_JOB_TRACKING_H_

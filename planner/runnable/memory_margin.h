// The safety margin a plan keeps between its rank programs' profiled peak and the budget
// (`--memory-per-device`), learned from what the profiles have missed by: a plan accepted under
// a budget must not run out of it, and the symbolic profile of a rank's program, exact for what
// it models, leaves out a few allocations (at its least budget a small GPT's 8-micro-batch plan
// ran out 3,600 bytes past its prediction).
//
// The record is one file, DIR/memory-record.json, beside this host's calibration (the same
// DIR): the predicted and measured peak of each rank of the last kMemoryRecordRuns runs
// `mapctl run` made under a plan — a run a cap stopped records what it needed when refused.
// The margin is the largest shortfall (measured / predicted − 1) in it, at least
// kDefaultMemoryMargin and at most kMaxMemoryMargin.
#ifndef MAPD_PLANNER_RUNNABLE_MEMORY_MARGIN_H_
#define MAPD_PLANNER_RUNNABLE_MEMORY_MARGIN_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace mapd {

inline constexpr double kDefaultMemoryMargin = 0.01;
inline constexpr double kMaxMemoryMargin = 0.25;
inline constexpr int kMemoryRecordRuns = 256;

struct MemoryMargin {
  double fraction = kDefaultMemoryMargin;
  int recorded = 0;           // rank peaks in the record it was learned from
  double worst_shortfall = 0;  // the largest measured / predicted − 1 among them (≤ 0: none short)
  // "1.0% (no shortfall among 12 rank peaks recorded on this host)".
  std::string Describe() const;
};

// The margin DIR's record gives; the default where DIR is empty or the record is missing or
// does not parse (a record is advice, never a reason to fail a run).
MemoryMargin ReadMemoryMargin(const std::string& dir);

// Appends (predicted, measured) rank peaks to DIR's record, keeping the last kMemoryRecordRuns,
// under DIR/memory-record.lock. Pairs with a non-positive figure are left out.
absl::Status RecordMemoryPeaks(const std::string& dir, const std::vector<std::pair<int64_t, int64_t>>& predicted_measured);

// Whether a rank program profiled at `peak` bytes fits `budget` with `margin` (a fraction) to spare.
inline bool FitsWithMargin(int64_t peak, int64_t budget, double margin) {
  return static_cast<double>(peak) * (1 + margin) <= static_cast<double>(budget);
}

}  // namespace mapd

#endif  // MAPD_PLANNER_RUNNABLE_MEMORY_MARGIN_H_

// Bounds of a worker's report that both sides apply: the worker sends within them, the
// coordinator refuses a report beyond them (a forged or broken one).
#ifndef MAPD_COMMON_REPORT_LIMITS_H_
#define MAPD_COMMON_REPORT_LIMITS_H_

#include <cstdint>

namespace mapd {

// Bytes of ranks' output (ReportRequest.outputs' text, all ranks together) in one report.
constexpr int64_t kMaxRankOutputBytesPerReport = 1 << 20;
// A worker keeps at least this much of each rank's unsent output, however many ranks it runs.
constexpr int64_t kMinRankOutputBufferBytes = 16 << 10;
// A rank's log file on its worker (`rank_R.log` in the job's run directory) is rotated to
// `rank_R.log.1` past this size: the last 8-16 MiB of each rank's output stay on disk.
constexpr int64_t kRankLogFileBytes = 8 << 20;

}  // namespace mapd

#endif  // MAPD_COMMON_REPORT_LIMITS_H_

// A rank's log file on the worker (`rank_R.log` in the job's run directory) that rolls over:
// once it holds more than `max_bytes` it becomes `rank_R.log.1` (replacing the previous one) and
// starts again, so a rank printing without end holds at most about twice that on disk. The
// file is opened once and written through one stream, not reopened for every chunk of output.
#ifndef MAPD_WORKER_DAEMON_ROTATING_LOG_H_
#define MAPD_WORKER_DAEMON_ROTATING_LOG_H_

#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>

namespace mapd {

class RotatingLog {
 public:
  // Appends to `path` (created if absent; what it holds already counts towards `max_bytes`).
  RotatingLog(std::string path, int64_t max_bytes);
  // Best effort: a write the disk refuses is dropped (the coordinator keeps its own copy of the
  // rank's output, and the rank must not stop for its log).
  void Append(std::string_view text);

 private:
  std::string path_;
  int64_t max_bytes_;
  int64_t bytes_ = 0;  // in the file now
  std::ofstream out_;
};

}  // namespace mapd

#endif  // MAPD_WORKER_DAEMON_ROTATING_LOG_H_

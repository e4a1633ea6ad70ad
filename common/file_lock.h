// An exclusive flock(2) on a file, held while the object lives (closing the file releases it; so
// does the process's death, however it dies — no stale lock to clean up after a crash).
#ifndef MAPD_COMMON_FILE_LOCK_H_
#define MAPD_COMMON_FILE_LOCK_H_

#include <string>

#include "absl/status/statusor.h"

namespace mapd {

class FileLock {
 public:
  // Waits for the lock on `path` (made 0600 when missing). `what` names the file in errors
  // ("the calibration lock").
  static absl::StatusOr<FileLock> Acquire(const std::string& path, const std::string& what);
  // Takes the lock on `path` only if no other process holds it, and writes this process's id
  // into the file (for the next one's message); FAILED_PRECONDITION naming `what`, the file and
  // the holder's recorded process id when another holds it.
  static absl::StatusOr<FileLock> TryAcquire(const std::string& path, const std::string& what);

  FileLock(FileLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  FileLock& operator=(FileLock&&) = delete;
  ~FileLock();

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace mapd

#endif  // MAPD_COMMON_FILE_LOCK_H_

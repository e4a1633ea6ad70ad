#include "common/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace mapd {

namespace {

absl::StatusOr<int> OpenLockFile(const std::string& path, const std::string& what) {
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return absl::PermissionDeniedError(absl::StrCat("cannot open ", what, " ", path, ": ", strerror(errno)));
  return fd;
}

// What the holder wrote into the file: its process id ("" when unreadable).
std::string Holder(int fd) {
  char buf[32] = {};
  const ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  return n > 0 ? std::string(absl::StripAsciiWhitespace(std::string(buf, n))) : "";
}

}  // namespace

absl::StatusOr<FileLock> FileLock::Acquire(const std::string& path, const std::string& what) {
  auto fd = OpenLockFile(path, what);
  if (!fd.ok()) return fd.status();
  while (flock(*fd, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    const int err = errno;
    close(*fd);
    return absl::InternalError(absl::StrCat("cannot lock ", what, " ", path, ": ", strerror(err)));
  }
  return FileLock(*fd);
}

absl::StatusOr<FileLock> FileLock::TryAcquire(const std::string& path, const std::string& what) {
  auto fd = OpenLockFile(path, what);
  if (!fd.ok()) return fd.status();
  if (flock(*fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const std::string holder = err == EWOULDBLOCK ? Holder(*fd) : "";
    close(*fd);
    if (err != EWOULDBLOCK) return absl::InternalError(absl::StrCat("cannot lock ", what, " ", path, ": ", strerror(err)));
    return absl::FailedPreconditionError(absl::StrCat(what, " is in use by another process", holder.empty() ? "" : " (pid " + holder + ")",
                                                      ": ", path, " is locked"));
  }
  const std::string pid = absl::StrCat(getpid(), "\n");
  if (ftruncate(*fd, 0) != 0 || pwrite(*fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    // The lock holds without the id; only the next process's message is the poorer for it.
  }
  return FileLock(*fd);
}

FileLock::~FileLock() {
  if (fd_ >= 0) close(fd_);  // (closing releases the lock)
}

}  // namespace mapd

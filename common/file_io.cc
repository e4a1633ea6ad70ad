#include "common/file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace mapd {

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat("no such file: '", path, "'"));
    return absl::PermissionDeniedError(absl::StrCat("cannot open '", path, "': ", std::strerror(err)));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return absl::InternalError(absl::StrCat("error reading '", path, "'"));
  return ss.str();
}

absl::Status SyncDirectory(const std::string& dir) {
  const int fd = open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return absl::InternalError(absl::StrCat("cannot open directory '", dir, "': ", std::strerror(errno)));
  const int rc = fsync(fd);
  const int err = errno;
  close(fd);
  if (rc != 0) return absl::InternalError(absl::StrCat("cannot sync directory '", dir, "': ", std::strerror(err)));
  return absl::OkStatus();
}

namespace {

// A write's failure: RESOURCE_EXHAUSTED for a full disk or quota (room may be made, or the job
// restarts elsewhere), INTERNAL for the rest.
absl::Status WriteError(int err, const std::string& what) {
  const std::string message = absl::StrCat(what, ": ", std::strerror(err));
  return err == ENOSPC || err == EDQUOT ? absl::ResourceExhaustedError(message) : absl::InternalError(message);
}

}  // namespace

absl::Status SyncFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::InternalError(absl::StrCat("cannot open '", path, "' to sync it: ", std::strerror(errno)));
  const int rc = fsync(fd);
  const int err = errno;
  close(fd);
  return rc == 0 ? absl::OkStatus() : WriteError(err, absl::StrCat("cannot sync '", path, "'"));
}

absl::Status WriteStringToFileAtomic(const std::string& path, const std::string& data) {
  const std::string tmp = absl::StrCat(path, ".tmp");
  // Written, flushed to the device, then renamed over `path` and the directory synced: after a
  // crash the file is the old one or the whole new one (checkpoints depend on it).
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOSPC || err == EDQUOT) return WriteError(err, absl::StrCat("cannot write '", tmp, "'"));
    return absl::PermissionDeniedError(absl::StrCat("cannot write '", tmp, "': ", std::strerror(err)));
  }
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      close(fd);
      std::remove(tmp.c_str());
      return WriteError(err, absl::StrCat("error writing '", tmp, "'"));
    }
    done += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0 || close(fd) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    return WriteError(err, absl::StrCat("error writing '", tmp, "'"));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    return absl::InternalError(absl::StrCat("cannot rename '", tmp, "' to '", path, "': ", std::strerror(err)));
  }
  const size_t slash = path.rfind('/');
  return SyncDirectory(slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash)));
}

absl::StatusOr<std::string> FindExecutable(const std::string& name, const std::vector<std::string>& beside_self,
                                           const std::string& what_to_do) {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  std::vector<std::filesystem::path> tried;
  if (!ec) {
    for (const std::string& dir : beside_self) tried.push_back(self.parent_path() / dir / name);
  }
  if (const char* path = std::getenv("PATH")) {
    for (absl::string_view d : absl::StrSplit(path, ':', absl::SkipEmpty())) tried.push_back(std::filesystem::path(std::string(d)) / name);
  }
  std::vector<std::string> where;
  for (const std::filesystem::path& p : tried) {
    if (access(p.c_str(), X_OK) == 0) return std::filesystem::weakly_canonical(p, ec).string();
    where.push_back(p.string());
  }
  return absl::NotFoundError(absl::StrCat(name, " was not found (looked at ", absl::StrJoin(where, ", "), "): ", what_to_do));
}

}  // namespace mapd

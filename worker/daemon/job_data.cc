#include "worker/daemon/job_data.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "absl/strings/str_cat.h"

namespace mapd {

namespace {

// realpath(3), or "" when it fails.
std::string RealPath(const std::string& path) {
  char out[PATH_MAX];
  return realpath(path.c_str(), out) != nullptr ? std::string(out) : std::string();
}

}  // namespace

absl::StatusOr<std::string> ResolveJobData(const std::string& root, const std::string& relative) {
  const absl::Status refused = absl::PermissionDeniedError(
      absl::StrCat("job data '", relative.substr(0, 200), "' is not a readable file under this worker's --data-root",
                   root.empty() ? " (it has none: give mapd-worker --data-root DIR, or train on synthetic data)" : ""));
  if (root.empty() || relative.empty() || relative[0] == '/') return refused;
  const std::string real_root = RealPath(root);
  if (real_root.empty()) return refused;
  const std::string real = RealPath(real_root + "/" + relative);
  struct stat st;
  if (real.empty() || real.rfind(real_root + "/", 0) != 0 || stat(real.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return refused;
  }
  return real;
}

}  // namespace mapd

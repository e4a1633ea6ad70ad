// Where a job's data file is on a worker: under the operator's data root, and nowhere else
// (docs/coordinator.md "Security model").
#ifndef MAPD_WORKER_DAEMON_JOB_DATA_H_
#define MAPD_WORKER_DAEMON_JOB_DATA_H_

#include <string>

#include "absl/status/statusor.h"

namespace mapd {

// The real path of `relative` (a file of a job's text:FILE, tokens:FILE or npy:A[,B]) under
// `root`: a regular file whose real path, symlinks followed, is inside the real `root`. Every
// refusal is the same PERMISSION_DENIED, naming neither what exists nor its size; an empty
// `root` refuses every file (the worker was given no --data-root).
absl::StatusOr<std::string> ResolveJobData(const std::string& root, const std::string& relative);

}  // namespace mapd

#endif  // MAPD_WORKER_DAEMON_JOB_DATA_H_

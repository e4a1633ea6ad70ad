// Whole-file reads and atomic writes, shared by every layer (graphs, checkpoints, tokens).
#ifndef MAPD_COMMON_FILE_IO_H_
#define MAPD_COMMON_FILE_IO_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mapd {

// The file's bytes. NOT_FOUND when it does not exist, PERMISSION_DENIED when it cannot be opened,
// INTERNAL on a read error; each message names the path (and the errno text).
absl::StatusOr<std::string> ReadFileToString(const std::string& path);

// Writes PATH.tmp and flushes it to the device (fsync), renames it over `path` and syncs the
// directory: readers — and a machine restarted after a crash — see the old file or the whole new
// one.
absl::Status WriteStringToFileAtomic(const std::string& path, const std::string& data);

// Flushes a directory's entries (a rename into it, a new file) to the device.
absl::Status SyncDirectory(const std::string& dir);
// Flushes the file at `path` to its device: RESOURCE_EXHAUSTED when the disk (or quota) is full,
// INTERNAL for other failures.
absl::Status SyncFile(const std::string& path);

// An executable named `name` that MAP's programs start (mapd-rank, mapctl-torch): in each of
// `beside_self` (folders relative to the running executable's: "." for an install, build-tree
// folders) then on PATH. NOT_FOUND naming every place looked at and `what_to_do`.
absl::StatusOr<std::string> FindExecutable(const std::string& name, const std::vector<std::string>& beside_self,
                                           const std::string& what_to_do);

}  // namespace mapd

#endif  // MAPD_COMMON_FILE_IO_H_

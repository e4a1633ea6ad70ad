// What a job trains on, as users write it (mapctl --data, a job's `data`):
//   synthetic | text:FILE | tokens:FILE | npy:INPUTS[,TARGETS]
// parsed in one place for mapctl, the coordinator's check of a job and the worker that resolves
// the files. A file name may not contain ',' (npy's separator) or a NUL byte.
#ifndef MAPD_COMMON_DATA_SPEC_H_
#define MAPD_COMMON_DATA_SPEC_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mapd {

struct DataSpec {
  std::string kind;                // synthetic, text, tokens or npy
  std::vector<std::string> files;  // none (synthetic), one (text, tokens), one or two (npy)

  // The files as one string, ','-separated .
  std::string JoinedFiles() const;
  // The spec as users write it and ParseDataSpec reads it: "synthetic", "text:FILE", "npy:A,B".
  std::string ToString() const;
};

// INVALID_ARGUMENT naming the spec for an unknown kind, a missing or extra file, or an empty or
// over-long (1024 characters) file name.
absl::StatusOr<DataSpec> ParseDataSpec(absl::string_view spec);

// The inverse of JoinedFiles for a kind: npy's files split at ',', another kind's one file whole.
std::vector<std::string> SplitDataFiles(absl::string_view kind, absl::string_view joined);

}  // namespace mapd

#endif  // MAPD_COMMON_DATA_SPEC_H_

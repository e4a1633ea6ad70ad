// A job file (`mapctl submit -f job.yaml`): the JobSpec's fields in YAML — its training fields
// (TrainingConfig's: steps, lr, ...) at the top level as the flags are, or under `training:` — read through the proto's
// JSON mapping so a wrong field or value is named ("-f job.yaml: steps: ..."), plus what only
// the client reads (a model file, its inputs, the loss, weights to start from). A Job document
// (`mapctl get ID -o yaml`) is a job file too: its `spec` is read and the rest (id, state, times)
// left, so a job can be submitted again from what `get` printed.
#ifndef MAPD_CLIENT_MAPCTL_JOB_FILE_H_
#define MAPD_CLIENT_MAPCTL_JOB_FILE_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/mapd/v1/jobs.pb.h"

namespace mapd::cli {

struct JobFile {
  v1::JobSpec spec;              // the fields the file gives; the rest unset
  std::set<std::string> fields;  // which: JobSpec and TrainingConfig field names, and the client's below
  std::string model;             // `model`: a zoo spec (also in spec.model) or a model file
  std::vector<std::string> inputs;
  std::string loss;
  std::string init_from;
};

// The client's own keys beside JobSpec's fields.
const std::set<std::string>& ClientJobFileKeys();

// INVALID_ARGUMENT naming the file and the field for anything it cannot read; `memory_per_device`
// may be a size ("40GiB"), `mesh` a shape ("2x2") as the flags take them.
absl::StatusOr<JobFile> ReadJobFile(const std::string& path);

}  // namespace mapd::cli

#endif  // MAPD_CLIENT_MAPCTL_JOB_FILE_H_

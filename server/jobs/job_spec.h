// Checks a submitted job's spec before it is queued: every field in range, the model given one
// way, names the runtime knows. INVALID_ARGUMENT naming the field and what to give instead.
// (Whether the model builds and a plan fits is the planning step's to say.)
#ifndef MAPD_SERVER_JOBS_JOB_SPEC_H_
#define MAPD_SERVER_JOBS_JOB_SPEC_H_

#include "absl/status/status.h"
#include "proto/mapd/v1/jobs.pb.h"

namespace mapd {

absl::Status ValidateJobSpec(const v1::JobSpec& spec);

// The spec with defaults filled in (name, device, device type, optimizer, lr, data, zero, recompute).
v1::JobSpec WithDefaults(v1::JobSpec spec);

}  // namespace mapd

#endif  // MAPD_SERVER_JOBS_JOB_SPEC_H_

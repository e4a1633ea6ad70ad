// Checks a submitted job's spec before it is queued: every field in range, the model given one
// way, names the runtime knows. INVALID_ARGUMENT naming the field and what to give instead.
// (Whether the model builds and a plan fits is the planning step's to say.)
#ifndef MAPD_SERVER_JOBS_JOB_SPEC_H_
#define MAPD_SERVER_JOBS_JOB_SPEC_H_

#include "absl/status/status.h"
#include "proto/mapd/v1/jobs.pb.h"

namespace mapd {

// What one job may ask for: the operator's settings (mapd --max-ranks, ...), with these defaults
// (docs/coordinator.md "Security model").
struct SpecLimits {
  int64_t max_name_chars = 256;         // the job's name
  int64_t max_model_spec_chars = 1024;  // a zoo spec string
  int64_t max_steps = int64_t{1} << 40;
  int64_t max_ranks = 1 << 16;
  int64_t max_graph_nodes = 200000;     // a submitted graph's nodes (GPT-3 175B's training graph has ~10,000)
  absl::Status Validate() const;
};

absl::Status ValidateJobSpec(const v1::JobSpec& spec, const SpecLimits& limits = SpecLimits{});

// The spec with defaults filled in (name, device, device type, optimizer, lr, data, zero, recompute).
v1::JobSpec WithDefaults(v1::JobSpec spec);

}  // namespace mapd

#endif  // MAPD_SERVER_JOBS_JOB_SPEC_H_

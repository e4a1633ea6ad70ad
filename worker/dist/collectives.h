// The rank program's Communicate steps as autograd functions (DESIGN §7): each forward
// collective with the backward rank_program.proto gives it, so that N ranks' autograd computes
// what one device would.
#ifndef MAPD_WORKER_DIST_COLLECTIVES_H_
#define MAPD_WORKER_DIST_COLLECTIVES_H_

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"
#include "proto/mapd/v1/rank_program.pb.h"
#include "worker/dist/communicator.h"

namespace mapd {

// Applies `step` to `x` on `group` (the communicator of the step's axis). A failed collective
// (in forward now, or later in backward) is reported as the communicator's error; in backward it
// surfaces as the exception autograd throws, which the trainer turns into a status.
absl::StatusOr<at::Tensor> ApplyCommunicate(const v1::Communicate& step, const at::Tensor& x, Communicator& group);

}  // namespace mapd

#endif  // MAPD_WORKER_DIST_COLLECTIVES_H_

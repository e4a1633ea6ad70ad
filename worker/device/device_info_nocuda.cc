// Built when the CUDA toolkit is absent or MAPD_WITH_CUDA=off.
#include "worker/device/device_info.h"

namespace mapd {

bool BuiltWithCuda() { return false; }

absl::StatusOr<CudaInventory> QueryCuda() {
  return absl::FailedPreconditionError(
      "this build of MAP has no CUDA/NCCL support (the CUDA toolkit was not found at configure time, or "
      "MAPD_WITH_CUDA=off); rebuild with -DMAPD_WITH_CUDA=on on a machine with CUDA and NCCL");
}

}  // namespace mapd

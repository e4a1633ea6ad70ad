// What accelerators this build and this machine have. The CUDA/NCCL half is compiled only
// where the toolkit was found (MAPD_WITH_CUDA=auto|on); elsewhere the query says so.
#ifndef MAPD_WORKER_DEVICE_DEVICE_INFO_H_
#define MAPD_WORKER_DEVICE_DEVICE_INFO_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace mapd {

struct CudaDevice {
  int index = 0;
  std::string name;
  int64_t total_memory_bytes = 0;
  int compute_major = 0;
  int compute_minor = 0;
};

struct CudaInventory {
  int runtime_version = 0;  // e.g. 13000
  std::string nccl_version;  // e.g. "2.27.3"
  std::vector<CudaDevice> devices;  // empty when the machine has no GPU or no driver
  std::string note;  // why there are no devices, when there are none
};

// True when this binary was built with the CUDA/NCCL parts.
bool BuiltWithCuda();
// FAILED_PRECONDITION when built without CUDA (rebuild with -DMAPD_WITH_CUDA=on).
absl::StatusOr<CudaInventory> QueryCuda();

}  // namespace mapd

#endif  // MAPD_WORKER_DEVICE_DEVICE_INFO_H_

// Built when the CUDA toolkit and NCCL are present (MAPD_WITH_CUDA=auto|on).
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "absl/strings/str_cat.h"
#include "worker/device/device_info.h"

namespace mapd {

bool BuiltWithCuda() { return true; }

absl::StatusOr<CudaInventory> QueryCuda() {
  CudaInventory inv;
  cudaRuntimeGetVersion(&inv.runtime_version);
  int nccl = 0;
  if (ncclGetVersion(&nccl) == ncclSuccess) {
    // NCCL >= 2.9 encodes major*10000 + minor*100 + patch.
    inv.nccl_version = absl::StrCat(nccl / 10000, ".", (nccl % 10000) / 100, ".", nccl % 100);
  }
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    inv.note = absl::StrCat("no usable GPU: ", cudaGetErrorString(err));
    return inv;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    inv.devices.push_back({i, prop.name, static_cast<int64_t>(prop.totalGlobalMem), prop.major, prop.minor});
  }
  if (inv.devices.empty()) inv.note = "the CUDA runtime reports no devices";
  return inv;
}

}  // namespace mapd

#include "worker/memory/device_memory.h"

#if MAPD_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace mapd {

#if MAPD_TORCH_CUDA
// Index 0 of each statistic array is the aggregate over pool types (StatType::AGGREGATE, whose
// namespace moved between LibTorch versions; its value did not).
void ResetDevicePeak(int index) { c10::cuda::CUDACachingAllocator::resetPeakStats(static_cast<c10::DeviceIndex>(index)); }

DevicePeak ReadDevicePeak(int index) {
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(index));
  return DevicePeak{true, stats.allocated_bytes[0].peak, stats.reserved_bytes[0].peak};
}
#else
void ResetDevicePeak(int) {}
DevicePeak ReadDevicePeak(int) { return {}; }
#endif

}  // namespace mapd

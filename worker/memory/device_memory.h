// What a CUDA device's caching allocator handed out, as torch.cuda.max_memory_allocated and
// max_memory_reserved read it: the measured side of the profiler's prediction on a GPU.
//
//   ResetDevicePeak(0);  ... run a step ...  DevicePeak p = ReadDevicePeak(0);
//
// Built only where LibTorch has CUDA (MAPD_TORCH_CUDA, set by worker/memory/CMakeLists.txt when
// LibTorch's c10_cuda target exists); elsewhere ReadDevicePeak says it measured nothing.
#ifndef MAPD_WORKER_MEMORY_DEVICE_MEMORY_H_
#define MAPD_WORKER_MEMORY_DEVICE_MEMORY_H_

#include <cstdint>

namespace mapd {

struct DevicePeak {
  bool measured = false;  // false: this build's LibTorch has no CUDA
  int64_t allocated = 0;  // peak bytes in live tensors since the last reset
  int64_t reserved = 0;   // peak bytes the caching allocator held from the driver
};

// Peaks := now, on CUDA device `index` (no-op without CUDA).
void ResetDevicePeak(int index);
DevicePeak ReadDevicePeak(int index);

}  // namespace mapd

#endif  // MAPD_WORKER_MEMORY_DEVICE_MEMORY_H_

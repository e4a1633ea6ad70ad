// A c10::Allocator that wraps LibTorch's CPU allocator and counts live and peak bytes, so
// that the profiler's predictions can be checked against what a real training step uses.
//
//   CountingCpuAllocator& a = CountingCpuAllocator::Install();   // from now on, CPU tensors are counted
//   a.ResetPeak();  ... run a step ...  a.peak_bytes();
//
// Counting covers every allocation that goes through c10's CPU allocator (all ATen CPU
// tensors and autograd buffers); scratch memory that libraries such as oneDNN or BLAS allocate
// themselves is not seen. MAPD_ALLOC_TRACE=1 prints every allocation and free to stderr.
#ifndef MAPD_WORKER_MEMORY_COUNTING_ALLOCATOR_H_
#define MAPD_WORKER_MEMORY_COUNTING_ALLOCATOR_H_

#include <atomic>
#include <cstdint>

namespace mapd {

class CountingCpuAllocator {
 public:
  // Installs the counting allocator as LibTorch's CPU allocator (once; later calls return the
  // same instance). Tensors made before installation are not counted, and freeing them is
  // not subtracted.
  static CountingCpuAllocator& Install();

  int64_t live_bytes() const { return live_.load(); }
  int64_t peak_bytes() const { return peak_.load(); }
  int64_t allocations() const { return allocations_.load(); }
  // Peak := live, so that the next peak is measured from now.
  void ResetPeak() { peak_.store(live_.load()); }

  // Called by the allocator (internal).
  void OnAllocate(int64_t bytes);
  void OnFree(int64_t bytes);

 private:
  CountingCpuAllocator() = default;
  std::atomic<int64_t> live_{0};
  std::atomic<int64_t> peak_{0};
  std::atomic<int64_t> allocations_{0};
};

}  // namespace mapd

#endif  // MAPD_WORKER_MEMORY_COUNTING_ALLOCATOR_H_

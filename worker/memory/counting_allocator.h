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

  // A memory cap: an allocation that would take the live bytes past `bytes` throws
  // c10::OutOfMemoryError ("out of memory: allocating B bytes with L live would pass the cap
  // of C bytes") and allocates nothing. 0 = no cap. Applies to counted allocations only
  // (see above), so a cap set after tensors were made counts from the live total then.
  void SetLimit(int64_t bytes) { limit_.store(bytes); }
  int64_t limit() const { return limit_.load(); }
  int64_t refused() const { return refused_.load(); }  // allocations the cap refused
  // The last allocation the cap refused: its bytes, the bytes live then and the cap (zeros: none).
  struct Refusal {
    int64_t bytes = 0, live = 0, cap = 0;
  };
  Refusal last_refusal() const { return {last_refused_bytes_.load(), last_refused_live_.load(), last_refused_cap_.load()}; }

  // Called by the allocator (internal).
  void CheckLimit(int64_t bytes);  // throws c10::OutOfMemoryError past the cap
  void OnAllocate(int64_t bytes);
  void OnFree(int64_t bytes);

 private:
  CountingCpuAllocator() = default;
  std::atomic<int64_t> live_{0};
  std::atomic<int64_t> peak_{0};
  std::atomic<int64_t> allocations_{0};
  std::atomic<int64_t> limit_{0};
  std::atomic<int64_t> refused_{0};
  std::atomic<int64_t> last_refused_bytes_{0}, last_refused_live_{0}, last_refused_cap_{0};
};

}  // namespace mapd

#endif  // MAPD_WORKER_MEMORY_COUNTING_ALLOCATOR_H_

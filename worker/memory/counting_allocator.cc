#include "worker/memory/counting_allocator.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

#include "absl/strings/str_cat.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <unordered_map>

namespace mapd {

namespace {

// Sizes of live allocations by address. The DataPtrs we hand out keep context == data, as
// LibTorch's own CPU allocator does (some kernels, e.g. oneDNN's, assert it), so the size
// cannot ride in the context.
struct LiveTable {
  std::mutex mu;
  std::unordered_map<void*, int64_t> sizes;
};

LiveTable& Table() {
  static LiveTable* t = new LiveTable();
  return *t;
}

CountingCpuAllocator* g_counter = nullptr;
c10::DeleterFnPtr g_base_deleter = nullptr;

void FreeCounted(void* ptr) {
  int64_t bytes = 0;
  {
    LiveTable& t = Table();
    std::lock_guard<std::mutex> lock(t.mu);
    auto it = t.sizes.find(ptr);
    if (it != t.sizes.end()) {
      bytes = it->second;
      t.sizes.erase(it);
    }
  }
  g_counter->OnFree(bytes);
  g_base_deleter(ptr);
}

class CountingAllocatorImpl final : public c10::Allocator {
 public:
  explicit CountingAllocatorImpl(c10::Allocator* base) : base_(base) {}

  c10::DataPtr allocate(size_t n) const override {
    // The cap is checked before the allocation, so that a refused one changes nothing.
    g_counter->CheckLimit(static_cast<int64_t>(n));
    c10::DataPtr inner = base_->allocate(n);
    void* data = inner.get();
    const c10::Device device = inner.device();
    // Take ownership from the base DataPtr; its raw deleter frees `data` later.
    inner.release_context();
    if (data != nullptr) {
      LiveTable& t = Table();
      std::lock_guard<std::mutex> lock(t.mu);
      t.sizes[data] = static_cast<int64_t>(n);
    }
    g_counter->OnAllocate(static_cast<int64_t>(n));
    return c10::DataPtr(data, data, &FreeCounted, device);
  }

  c10::DeleterFnPtr raw_deleter() const override { return &FreeCounted; }

 private:
  c10::Allocator* base_;
};

}  // namespace

// MAPD_ALLOC_TRACE=1 prints every counted allocation and free with the live total, to
// compare a measured step with the profiler's timeline event by event.
const bool kTrace = [] {
  const char* v = std::getenv("MAPD_ALLOC_TRACE");
  return v != nullptr && v[0] == '1';
}();

void CountingCpuAllocator::OnFree(int64_t bytes) {
  const int64_t now = live_.fetch_sub(bytes) - bytes;
  if (kTrace) std::fprintf(stderr, "mapd-alloc free  %12lld live %12lld tid %ld\n", static_cast<long long>(bytes), static_cast<long long>(now), static_cast<long>(syscall(SYS_gettid)));
}

void CountingCpuAllocator::CheckLimit(int64_t bytes) {
  const int64_t limit = limit_.load();
  if (limit <= 0) return;
  const int64_t live = live_.load();
  if (live + bytes <= limit) return;
  refused_.fetch_add(1);
  last_refused_bytes_.store(bytes);
  last_refused_live_.store(live);
  last_refused_cap_.store(limit);
  // c10::OutOfMemoryError, as LibTorch's CUDA allocator throws: callers can tell it apart.
  throw c10::OutOfMemoryError(
      {__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
      absl::StrCat("out of memory: allocating ", bytes, " bytes with ", live, " live would pass the cap of ", limit,
                   " bytes (", bytes + live - limit, " over)"));
}

void CountingCpuAllocator::OnAllocate(int64_t bytes) {
  allocations_.fetch_add(1);
  const int64_t now = live_.fetch_add(bytes) + bytes;
  if (kTrace) std::fprintf(stderr, "mapd-alloc alloc %12lld live %12lld tid %ld\n", static_cast<long long>(bytes), static_cast<long long>(now), static_cast<long>(syscall(SYS_gettid)));
  int64_t peak = peak_.load();
  while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
  }
}

CountingCpuAllocator& CountingCpuAllocator::Install() {
  // Both live for the whole process: tensors may be freed at any time, even at exit.
  static CountingCpuAllocator* counter = [] {
    auto* c = new CountingCpuAllocator();
    c10::Allocator* base = c10::GetCPUAllocator();
    // The base must free a raw pointer on its own (LibTorch's CPU allocator does: free_cpu).
    g_base_deleter = base->raw_deleter();
    TORCH_CHECK(g_base_deleter != nullptr, "the CPU allocator has no raw deleter; cannot count allocations");
    g_counter = c;
    c10::SetCPUAllocator(new CountingAllocatorImpl(base), /*priority=*/100);
    return c;
  }();
  return *counter;
}

}  // namespace mapd

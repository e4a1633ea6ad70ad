#include "worker/memory/counting_allocator.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

namespace mapd {

namespace {

// Owns the base allocator's DataPtr and remembers the size, so the free can be counted.
struct Allocation {
  c10::DataPtr inner;
  int64_t bytes;
  CountingCpuAllocator* counter;
};

void FreeAllocation(void* ctx) {
  auto* a = static_cast<Allocation*>(ctx);
  a->counter->OnFree(a->bytes);
  delete a;  // frees the inner DataPtr through the base allocator
}

class CountingAllocatorImpl final : public c10::Allocator {
 public:
  CountingAllocatorImpl(c10::Allocator* base, CountingCpuAllocator* counter) : base_(base), counter_(counter) {}

  c10::DataPtr allocate(size_t n) const override {
    c10::DataPtr inner = base_->allocate(n);
    void* data = inner.get();
    const c10::Device device = inner.device();
    auto* a = new Allocation{std::move(inner), static_cast<int64_t>(n), counter_};
    counter_->OnAllocate(static_cast<int64_t>(n));
    return c10::DataPtr(data, a, &FreeAllocation, device);
  }

  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }

 private:
  c10::Allocator* base_;
  CountingCpuAllocator* counter_;
};

}  // namespace

void CountingCpuAllocator::OnAllocate(int64_t bytes) {
  allocations_.fetch_add(1);
  const int64_t now = live_.fetch_add(bytes) + bytes;
  int64_t peak = peak_.load();
  while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
  }
}

CountingCpuAllocator& CountingCpuAllocator::Install() {
  // Both live for the whole process: tensors may be freed at any time, even at exit.
  static CountingCpuAllocator* counter = [] {
    auto* c = new CountingCpuAllocator();
    auto* impl = new CountingAllocatorImpl(c10::GetCPUAllocator(), c);
    c10::SetCPUAllocator(impl, /*priority=*/100);
    return c;
  }();
  return *counter;
}

}  // namespace mapd

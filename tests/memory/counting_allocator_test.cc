// The counting allocator sees LibTorch's CPU tensors come and go, with exact sizes.
#include "worker/memory/counting_allocator.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "worker/runtime/torch_types.h"

namespace mapd {
namespace {

TEST(CountingAllocator, CountsLiveAndPeakBytes) {
  CountingCpuAllocator& a = CountingCpuAllocator::Install();
  const int64_t base = a.live_bytes();
  a.ResetPeak();
  {
    at::Tensor x = at::empty({1024, 256}, at::kFloat);  // 1 MiB
    EXPECT_EQ(a.live_bytes() - base, 1 << 20);
    {
      at::Tensor y = at::empty({512}, at::kDouble);  // 4 KiB
      EXPECT_EQ(a.live_bytes() - base, (1 << 20) + 4096);
    }
    EXPECT_EQ(a.live_bytes() - base, 1 << 20);
    at::Tensor v = x.view({256, 1024});  // a view allocates nothing
    EXPECT_EQ(a.live_bytes() - base, 1 << 20);
  }
  EXPECT_EQ(a.live_bytes(), base);
  EXPECT_EQ(a.peak_bytes() - base, (1 << 20) + 4096);
  EXPECT_EQ(&a, &CountingCpuAllocator::Install());
}

TEST(CountingAllocator, SeesAutogradBuffers) {
  CountingCpuAllocator& a = CountingCpuAllocator::Install();
  at::Tensor w = at::randn({64, 64}).requires_grad_();
  at::Tensor x = at::randn({32, 64});
  const int64_t before = a.live_bytes();
  a.ResetPeak();
  at::Tensor loss = at::relu(at::matmul(x, w)).sum();
  loss.backward();
  // w's gradient (16 KiB) stays; the step's temporaries came and went.
  EXPECT_EQ(a.live_bytes() - before, 64 * 64 * 4 + 4);  // + the scalar loss
  // At the matmul's backward: w's gradient (16 KiB) beside relu's input gradient (8 KiB).
  EXPECT_GE(a.peak_bytes() - before, 64 * 64 * 4 + 32 * 64 * 4);
}

}  // namespace
}  // namespace mapd

namespace mapd {
namespace {

// The cap refuses an allocation that would pass it — before allocating, so nothing changes —
// with LibTorch's own out-of-memory exception; CatchTorch turns it into RESOURCE_EXHAUSTED.
TEST(CountingAllocator, ACapRefusesWhatWouldPassIt) {
  CountingCpuAllocator& a = CountingCpuAllocator::Install();
  const int64_t live = a.live_bytes();
  a.SetLimit(live + 1000);
  at::Tensor fits = at::empty({200}, at::kFloat);  // 800 bytes
  const int64_t refused = a.refused();
  try {
    at::Tensor too_much = at::empty({100}, at::kFloat);  // 400 more: past the cap
    ADD_FAILURE() << "allocated past the cap";
  } catch (const c10::OutOfMemoryError& e) {
    const std::string what = e.what_without_backtrace();
    EXPECT_NE(what.find("allocating 400 bytes"), std::string::npos) << what;
    EXPECT_NE(what.find(absl::StrCat("cap of ", live + 1000, " bytes")), std::string::npos) << what;
  }
  EXPECT_EQ(a.refused(), refused + 1);
  EXPECT_EQ(a.live_bytes(), live + 800);
  const absl::Status st = CatchTorch("node 'x'", [] { at::empty({100}, at::kFloat); });
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_NE(st.message().find("node 'x': out of memory"), std::string::npos) << st;
  a.SetLimit(0);  // no cap: the same allocation goes through
  EXPECT_EQ(at::empty({100}, at::kFloat).numel(), 100);
}

}  // namespace
}  // namespace mapd

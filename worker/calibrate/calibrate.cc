#include "worker/calibrate/calibrate.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <thread>

#include "absl/strings/str_cat.h"

namespace mapd {

absl::Status CalibrateOptions::Validate() const {
  if (name.empty()) return absl::InvalidArgumentError("calibrate: the profile needs a name");
  if (matmul_size < 64 || matmul_size > 8192) {
    return absl::InvalidArgumentError(absl::StrCat("calibrate: matmul_size must be 64..8192, got ", matmul_size));
  }
  if (copy_bytes < (1 << 20)) return absl::InvalidArgumentError("calibrate: copy_bytes must be at least 1 MiB");
  if (!(min_seconds > 0)) return absl::InvalidArgumentError("calibrate: min_seconds must be positive");
  return absl::OkStatus();
}

namespace {

// Seconds per call of `fn`, from repeated calls filling `min_seconds` (after one warm-up).
double TimePerCall(const std::function<void()>& fn, double min_seconds) {
  using Clock = std::chrono::steady_clock;
  fn();
  int64_t calls = 0;
  const auto start = Clock::now();
  double elapsed = 0;
  do {
    fn();
    ++calls;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed < min_seconds);
  return elapsed / static_cast<double>(calls);
}

}  // namespace

absl::StatusOr<DeviceProfile> CalibrateCpu(const CalibrateOptions& options) {
  if (auto st = options.Validate(); !st.ok()) return st;
  DeviceProfile p;
  p.name = options.name;
  p.source = "measured";
  try {
    const int64_t n = options.matmul_size;
    at::Tensor a = at::randn({n, n});
    at::Tensor b = at::randn({n, n});
    const double mm32 = TimePerCall([&] { (void)at::matmul(a, b); }, options.min_seconds);
    p.fp32_flops = 2.0 * n * n * n / mm32;
    at::Tensor a16 = a.to(at::kBFloat16), b16 = b.to(at::kBFloat16);
    const double mm16 = TimePerCall([&] { (void)at::matmul(a16, b16); }, options.min_seconds);
    p.bf16_flops = 2.0 * n * n * n / mm16;
    at::Tensor src = at::ones({options.copy_bytes / 4});
    at::Tensor dst = at::empty_like(src);
    const double copy = TimePerCall([&] { dst.copy_(src); }, options.min_seconds);
    p.memory_bandwidth = 2.0 * static_cast<double>(options.copy_bytes) / copy;  // read + write
    at::Tensor x = at::ones({1});
    p.kernel_overhead_seconds = TimePerCall([&] { (void)at::add(x, x); }, options.min_seconds / 3);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("calibrate: LibTorch error: ", e.what()));
  }
  p.memory_bytes = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
  p.description = absl::StrCat("measured on this machine: ", std::thread::hardware_concurrency(), " hardware threads, ",
                               at::get_num_threads(), " LibTorch threads");
  if (auto st = p.Validate(); !st.ok()) return st;
  return p;
}

}  // namespace mapd

// `mapctl calibrate`: measure this machine for the profiler's time model.
#include <iostream>

#include "absl/strings/str_format.h"
#include "client/mapctl/commands.h"
#include "common/file_io.h"
#include "worker/calibrate/calibrate.h"

namespace mapd::cli {

int RunCalibrate(const std::string& name, const std::string& output, bool quick, const std::vector<int64_t>& collective_ranks,
                 int rounds) {
  CalibrateOptions options;
  options.name = name;
  options.collective_ranks = collective_ranks;
  options.rounds = rounds;
  if (quick) {
    options.matmul_size = 256;
    options.copy_bytes = 16LL << 20;
    options.min_seconds = 0.05;
  }
  auto profile = CalibrateCpu(options);
  if (!profile.ok()) return ReportError(profile.status());
  std::cout << absl::StrFormat(
      "%s: fp32 matmul %.1f GFLOP/s, bf16 matmul %.1f GFLOP/s, elementwise %.1f GFLOP/s, memory %.1f GB/s, %.1f us per kernel, "
      "%.1f GiB\n",
      profile->name, profile->fp32_flops / 1e9, profile->bf16_flops / 1e9, profile->vector_flops / 1e9,
      profile->memory_bandwidth / 1e9, profile->kernel_overhead_seconds * 1e6, static_cast<double>(profile->memory_bytes) / (1 << 30));
  for (const HostCollectives& c : profile->host_collectives) {
    std::cout << absl::StrFormat(
        "  %d local ranks: all-reduce %.0f us + %.2f ns a byte (%.0f us among computing ranks); each computes at %.2f of one alone\n",
        c.ranks, c.alpha * 1e6, c.beta * 1e9, c.busy_alpha * 1e6, c.compute_speed);
  }
  if (output.empty()) {
    std::cout << profile->ToJson() << "\n";
    return kExitOk;
  }
  if (auto st = WriteStringToFileAtomic(output, profile->ToJson() + "\n"); !st.ok()) return ReportError(st);
  std::cout << "wrote " << output << "; use it with: mapctl profile MODEL --device-type " << output << "\n";
  return kExitOk;
}

}  // namespace mapd::cli

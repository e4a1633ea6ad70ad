// mapd-rank: one rank of a training run (worker/rank/rank_main.h), started by mapd-worker for a
// job's ranks and by `mapctl run --ranks N`, never by people. It links the rank runtime
// (LibTorch, Gloo, NCCL where built) and no planner search: no solver, no CLI.
#include <cstdlib>
#include <iostream>

#include <CLI/CLI.hpp>

#include "absl/status/status.h"
#include "common/allocator.h"
#include "common/file_io.h"
#include "common/store_secret.h"
#include "common/version.h"
#include "worker/calibrate/calibrate.h"
#include "worker/rank/rank_main.h"

int main(int argc, char** argv) {
  // As the ranks always ran (inside mapctl): freed blocks stay in the heap, so a step's tensors
  // reuse them instead of going back to the kernel each step.
  mapd::RetainFreedMemory();
  CLI::App app{"mapd-rank: one rank of a MAP training run, as mapd-worker and `mapctl run --ranks N` start it (reads RUN_DIR "
               "written by its launcher; reports events on stdout, its log on stderr)"};
  app.set_version_flag("--version", mapd::VersionLine("mapd-rank"));
  mapd::RankProcessOptions o;
  std::string calibrate_to;
  app.add_option("--run-dir", o.run_dir, "The launch's run directory: job.pb, graph.pb, rank_<r>.pb");
  app.add_option("--rank", o.rank, "This rank (global)")->check(CLI::NonNegativeNumber);
  app.add_option("--cuda-device", o.cuda_device, "With the job's device cuda: this GPU (default: GPU RANK)");
  app.add_option("--store", o.store, "host:port of the job's rendezvous store (default: host it here; rank 0 only)");
  app.add_option("--calibrate-host", calibrate_to,
                 "Instead of a rank: measure this host for the cost model (as mapd-worker does at start) and write the profile "
                 "to this JSON file");
  CLI11_PARSE(app, argc, argv);
  if (!calibrate_to.empty()) {
    auto profile = mapd::CalibrateCpu(mapd::HostCalibrateOptions());
    absl::Status st = profile.ok() ? mapd::WriteStringToFileAtomic(calibrate_to, profile->ToJson() + "\n") : profile.status();
    if (!st.ok()) {
      std::cerr << "error: " << st.message() << " [" << absl::StatusCodeToString(st.code()) << "]\n";
      return 1;
    }
    return 0;
  }
  if (o.run_dir.empty() || o.rank < 0) {
    std::cerr << "error: give --run-dir and --rank (or --calibrate-host FILE) [INVALID_ARGUMENT]\n";
    return 2;
  }
  // The job's secret, from the environment its launcher set; not passed on to anything this starts.
  if (const char* secret = std::getenv(mapd::kStoreSecretEnv); secret != nullptr) o.store_secret = secret;
  unsetenv(mapd::kStoreSecretEnv);
  // (RunRankJob turns a stray exception into a status itself: never an abort.)
  if (auto st = mapd::RunRankJob(o); !st.ok()) {
    std::cerr << "error: " << st.message() << " [" << absl::StatusCodeToString(st.code()) << "]\n";
    return 1;
  }
  return 0;
}

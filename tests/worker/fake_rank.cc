// A stand-in for `mapd-rank` in the launcher's tests: behaves as its first argument says and
// reports RankEvents on stdout as a rank does. No LibTorch.
//   fake_rank ok RANK [STORE]   three steps, then done (rank 0 without STORE first reports StoreReady)
//   fake_rank fail RANK         a step, then "error: ... [RESOURCE_EXHAUSTED]" and exit 1
//   fake_rank crash RANK        a step, then abort()
//   fake_rank hang RANK         a step, then silence
//   fake_rank garbage RANK      bytes that are no event stream
//   fake_rank record RANK FILE INDEX [STORE]  appends "INDEX [STORE]" to FILE and "INDEX SECRET" to
//                                            FILE.secrets, then as ok (hosting the store without STORE)
//   fake_rank --run-dir D --rank R [--cuda-device K] [--store H:P]   as `mapd-rank`: reads
//       D/job.pb, reports StoreReady (rank 0 without --store), job.steps steps, a checkpoint shard
//       every job.checkpoint_every steps (and after the last), and writes its argv to
//       D/argv_R.txt and its MAPD_STORE_SECRET to D/secret_R.txt; MAPD_FAULT=fail:R makes rank R fail after its first step
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>

#include "common/checkpoint/checkpoint_commit.h"
#include "common/file_io.h"
#include "common/store_secret.h"
#include "worker/launch/rank_command.h"
#include "worker/launch/rank_events.h"

namespace {

void Emit(int rank, const std::function<void(mapd::v1::RankEvent&)>& fill) {
  mapd::v1::RankEvent e;
  e.set_rank(rank);
  fill(e);
  if (!mapd::WriteRankEvent(1, e).ok()) std::exit(3);
}

void Step(int rank, int64_t s) {
  Emit(rank, [&](mapd::v1::RankEvent& e) { e.mutable_step_begun()->set_step(s); });
  Emit(rank, [&](mapd::v1::RankEvent& e) {
    e.mutable_step_done()->set_step(s);
    e.mutable_step_done()->set_loss(1.0 / s);
  });
}

// The rendezvous secret the launcher gave this process ("(none)" without).
std::string SecretGiven() {
  const char* secret = std::getenv(mapd::kStoreSecretEnv);
  return secret == nullptr ? "(none)" : secret;
}

// `mapd-rank`'s command line (worker/launch/rank_command.h), run as a rank of a launch would.
int RankCommand(int argc, char** argv) {
  std::string dir, store;
  int rank = -1;
  std::string args;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--run-dir") dir = value;
    if (flag == "--rank") rank = std::atoi(value.c_str());
    if (flag == "--store") store = value;
  }
  for (int i = 1; i < argc; ++i) args += std::string(argv[i]) + (i + 1 < argc ? " " : "\n");
  if (!mapd::WriteStringToFileAtomic(dir + "/argv_" + std::to_string(rank) + ".txt", args).ok()) return 4;
  if (!mapd::WriteStringToFileAtomic(dir + "/secret_" + std::to_string(rank) + ".txt", SecretGiven()).ok()) return 4;
  auto job = mapd::ReadRankJob(dir);
  if (!job.ok() || !mapd::ReadRankProgram(dir, rank).ok()) {
    std::fprintf(stderr, "error: rank %d: cannot read its run directory [DATA_LOSS]\n", rank);
    return 1;
  }
  if (store.empty() && rank == 0) Emit(rank, [](mapd::v1::RankEvent& e) { e.mutable_store_ready()->set_port(4242); });
  const char* fault = std::getenv("MAPD_FAULT");
  const int64_t steps = job->training().steps();
  for (int64_t s = 1; s <= steps; ++s) {
    Step(rank, s);
    if (fault != nullptr && std::string(fault) == "fail:" + std::to_string(rank)) {
      std::fprintf(stderr, "error: rank %d: out of memory [RESOURCE_EXHAUSTED]\n", rank);
      return 1;
    }
    // As a real rank: every checkpoint_every steps and after the last (common/training_config.h).
    const int64_t every = job->training().checkpoint_every();
    if (!job->checkpoint_dir().empty() && ((every > 0 && s % every == 0) || s == steps)) {
      const std::string tmp = mapd::CheckpointStagingDir(job->checkpoint_dir(), s, job->attempt());
      std::filesystem::create_directories(tmp);
      if (!mapd::WriteStringToFileAtomic(tmp + "/rank_" + std::to_string(rank) + ".pb", "shard").ok()) return 4;
      Emit(rank, [&](mapd::v1::RankEvent& e) { e.mutable_checkpoint_written()->set_step(s); });
    }
  }
  Emit(rank, [](mapd::v1::RankEvent& e) { e.mutable_done()->set_peak_bytes(100); });
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "--run-dir") return RankCommand(argc, argv);
  if (argc < 3) return 2;
  const std::string mode = argv[1];
  const int rank = std::atoi(argv[2]);
  if (mode == "record") {
    std::ofstream out(argv[3], std::ios::app);
    for (int i = 4; i < argc; ++i) out << argv[i] << (i + 1 < argc ? " " : "\n");
    std::ofstream secrets(std::string(argv[3]) + ".secrets", std::ios::app);
    secrets << argv[4] << " " << SecretGiven() << "\n";
  }
  const bool hosts = (mode == "ok" && argc == 3 && rank == 0) || (mode == "record" && argc == 5);
  if (hosts) Emit(rank, [](mapd::v1::RankEvent& e) { e.mutable_store_ready()->set_port(4242); });
  if (mode == "garbage") {
    std::fputs("hello, this is not an event stream\n", stdout);
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::seconds(5));
    return 0;
  }
  Step(rank, 1);
  if (mode == "fail") {
    std::fprintf(stderr, "error: rank %d: out of memory [RESOURCE_EXHAUSTED]\n", rank);
    return 1;
  }
  if (mode == "crash") std::abort();
  if (mode == "hang") {
    std::this_thread::sleep_for(std::chrono::seconds(30));
    return 0;
  }
  Step(rank, 2);
  Step(rank, 3);
  Emit(rank, [](mapd::v1::RankEvent& e) { e.mutable_done()->set_peak_bytes(100); });
  return 0;
}

// A stand-in for `mapctl _rank` in the launcher's tests: behaves as its first argument says and
// reports RankEvents on stdout as a rank does. No LibTorch.
//   fake_rank ok RANK [STORE]   three steps, then done (rank 0 without STORE first reports StoreReady)
//   fake_rank fail RANK         a step, then "error: ... [RESOURCE_EXHAUSTED]" and exit 1
//   fake_rank crash RANK        a step, then abort()
//   fake_rank hang RANK         a step, then silence
//   fake_rank garbage RANK      bytes that are no event stream
//   fake_rank record RANK FILE INDEX [STORE]  appends "INDEX [STORE]" to FILE, then as ok (hosting
//                                            the store without STORE)
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

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

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const std::string mode = argv[1];
  const int rank = std::atoi(argv[2]);
  if (mode == "record") {
    std::ofstream out(argv[3], std::ios::app);
    for (int i = 4; i < argc; ++i) out << argv[i] << (i + 1 < argc ? " " : "\n");
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

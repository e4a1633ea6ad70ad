// The Communicator contract, checked on every backend this build and machine have: Gloo always
// (ranks as threads of this process over a real TCPStore), NCCL where the build has it and at
// least two GPUs are visible (NCCL refuses two ranks of one group on one GPU), skipped otherwise
// with the reason. A 2x2 mesh, so that each collective runs on both axes' groups.
#include "worker/transport/communicator.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "worker/device/device_info.h"
#include "worker/rank/collectives.h"
#include "worker/transport/gloo_communicator.h"
#include "worker/rank/grad_buckets.h"
#include "worker/transport/nccl_communicator.h"
#include "worker/transport/timed_communicator.h"

namespace mapd {
namespace {

// Rank r's local tensor: [2, 3] filled with r * 10 + (element index).
at::Tensor Local(int rank) { return at::arange(6, at::kFloat).reshape({2, 3}) + 10.0 * rank; }

// Runs the checks on 4 ranks (mesh 2x2; rank = 2 * c0 + c1), GPU r for rank r when `nccl`; on
// the CPU, through shared memory when `arena` > 0 (the default transport), by Gloo alone at 0.
void CheckCollectives(bool nccl, int64_t arena = 0) {
  auto server = StoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::vector<int64_t> mesh = {2, 2};
  std::vector<std::string> errors(4);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 4; ++rank) {
    threads.emplace_back([&, rank] {
      RendezvousOptions ro;
      ro.port = (*server)->port();
      ro.timeout = std::chrono::milliseconds(30000);
      ro.shared_memory_arena_bytes = arena;
      if (nccl) ro.cuda_device = rank;
      auto groups = ConnectMeshGroups(ro, mesh, rank);
      if (!groups.ok()) return void(errors[rank] = groups.status().ToString());
      std::string& err = errors[rank];
      auto expect = [&](bool ok, const std::string& what) {
        if (!ok && err.empty()) err = what;
      };
      const int coords[2] = {rank / 2, rank % 2};
      for (int axis = 0; axis < 2; ++axis) {
        Communicator& g = *(*groups)[axis];
        expect(g.size() == 2 && g.rank() == coords[axis], "group rank/size");
        // The peer on this axis: the rank differing in this coordinate only.
        const int peer = axis == 0 ? (1 - coords[0]) * 2 + coords[1] : coords[0] * 2 + (1 - coords[1]);
        const int first = g.rank() == 0 ? rank : peer, second = g.rank() == 0 ? peer : rank;
        at::Tensor sum = Local(rank);
        expect(g.AllReduceSum(sum).ok() && sum.equal(Local(rank) + Local(peer)), "all-reduce");
        // Coalesced: one all-reduce per dtype (f32 twice, f64 between), each sum in its input's shape.
        const std::vector<at::Tensor> several = {Local(rank), Local(rank).to(at::kDouble)[1], Local(rank).reshape({-1}).narrow(0, 4, 2)};
        auto sums = AllReduceSumCoalesced(several, g);
        expect(sums.ok() && sums->size() == 3 && (*sums)[0].equal(Local(rank) + Local(peer)) &&
                   (*sums)[1].equal((Local(rank) + Local(peer)).to(at::kDouble)[1]) &&
                   (*sums)[2].equal((Local(rank) + Local(peer)).reshape({-1}).narrow(0, 4, 2)) && several[0].equal(Local(rank)),
               "coalesced all-reduce");
        auto gathered = g.AllGather(Local(rank), 1);
        expect(gathered.ok() && gathered->equal(at::cat({Local(first), Local(second)}, 1)), "all-gather along dim 1");
        at::Tensor full = at::cat({Local(rank), Local(rank) * 2}, 0);  // [4, 3]
        auto scattered = g.ReduceScatter(full, 0);
        at::Tensor both = at::cat({Local(rank), Local(rank) * 2}, 0) + at::cat({Local(peer), Local(peer) * 2}, 0);
        expect(scattered.ok() && scattered->equal(both.chunk(2, 0)[g.rank()]), "reduce-scatter along dim 0");
        auto across = g.ReduceScatter(full.view({2, 6}), 1);  // chunks of a non-leading dimension: strided
        expect(across.ok() && across->equal(both.view({2, 6}).chunk(2, 1)[g.rank()]), "reduce-scatter along dim 1");
        // Rows: row j of every rank summed into group rank j's row j (started, then waited for).
        at::Tensor rows = full.view({2, 6}).clone();
        auto pending = g.ReduceScatterRowsAsync(rows);
        expect(pending.ok() && (*pending)->Wait().ok() && rows[g.rank()].equal(both.view({2, 6})[g.rank()]), "reduce-scatter of rows");
        at::Tensor half_rows = full.view({2, 6}).to(at::kBFloat16);
        auto half_pending = g.ReduceScatterRowsAsync(half_rows);
        expect(half_pending.ok() && (*half_pending)->Wait().ok() &&
                   half_rows[g.rank()].to(at::kFloat).equal(both.view({2, 6})[g.rank()]),
               "bf16 reduce-scatter of rows");
        // All-to-all: chunk j of dim 1 (of [2, 4]) goes to group rank j; received along dim 0.
        at::Tensor wide = at::cat({Local(rank), Local(rank)}, 1).narrow(1, 0, 4).contiguous();
        auto swapped = g.AllToAll(wide, /*split_dim=*/1, /*concat_dim=*/0);
        auto chunk_of = [&](int r) { return at::cat({Local(r), Local(r)}, 1).narrow(1, 0, 4).chunk(2, 1)[g.rank()]; };
        expect(swapped.ok() && swapped->equal(at::cat({chunk_of(first), chunk_of(second)}, 0)), "all-to-all");
        // bf16 (Gloo has none: summed in fp32, moved as 16-bit bits): exact on these integers.
        at::Tensor half = Local(rank).to(at::kBFloat16);
        expect(g.AllReduceSum(half).ok() && half.scalar_type() == at::kBFloat16 &&
                   half.to(at::kFloat).equal(Local(rank) + Local(peer)),
               "bf16 all-reduce");
        auto half_gathered = g.AllGather(Local(rank).to(at::kBFloat16), 0);
        expect(half_gathered.ok() && half_gathered->scalar_type() == at::kBFloat16 &&
                   half_gathered->to(at::kFloat).equal(at::cat({Local(first), Local(second)}, 0)),
               "bf16 all-gather");
        auto half_scattered = g.ReduceScatter(full.to(at::kBFloat16), 0);
        expect(half_scattered.ok() && half_scattered->to(at::kFloat).equal(both.chunk(2, 0)[g.rank()]), "bf16 reduce-scatter");
        auto half_swapped = g.AllToAll(wide.to(at::kBFloat16), 1, 0);
        expect(half_swapped.ok() && half_swapped->to(at::kFloat).equal(at::cat({chunk_of(first), chunk_of(second)}, 0)),
               "bf16 all-to-all");
        expect(g.Barrier().ok(), "barrier");
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int rank = 0; rank < 4; ++rank) EXPECT_TRUE(errors[rank].empty()) << "rank " << rank << ": " << errors[rank];
}

TEST(Communicator, GlooCollectivesOnBothAxesOfA2x2Mesh) { CheckCollectives(/*nccl=*/false); }

// The names this process's shared segments had, if any is still in /dev/shm.
std::vector<std::string> LeftInDevShm() {
  std::vector<std::string> left;
  const std::string mine = "mapd-" + std::to_string(getpid()) + "-";
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    if (entry.path().filename().string().rfind(mine, 0) == 0) left.push_back(entry.path().string());
  }
  return left;
}

// The same contract through shared memory (the CPU default), which leaves nothing in /dev/shm.
TEST(Communicator, SharedMemoryCollectivesOnBothAxesOfA2x2Mesh) {
  CheckCollectives(/*nccl=*/false, /*arena=*/RendezvousOptions().shared_memory_arena_bytes);
  EXPECT_TRUE(LeftInDevShm().empty()) << LeftInDevShm()[0];
}

// Runs `body(rank, group)` on four ranks of a 1-D CPU mesh, each a thread of this process; each
// returns its tensors, or sets `error`. Fails the test naming a rank that could not connect or
// reported an error. Gloo alone unless `arena` > 0 (then shared memory, arenas of that size).
std::vector<std::vector<at::Tensor>> OnFourGlooRanks(
    const std::function<std::vector<at::Tensor>(int, Communicator&, std::string*)>& body, int64_t arena = 0,
    std::chrono::milliseconds timeout = std::chrono::milliseconds(30000)) {
  auto server = StoreServer::Start("127.0.0.1", 0);
  EXPECT_TRUE(server.ok()) << server.status();
  if (!server.ok()) return {};
  std::vector<std::vector<at::Tensor>> results(4);
  std::vector<std::string> errors(4);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 4; ++rank) {
    threads.emplace_back([&, rank] {
      RendezvousOptions ro;
      ro.port = (*server)->port();
      ro.timeout = timeout;
      ro.shared_memory_arena_bytes = arena;
      auto groups = ConnectMeshGroups(ro, {4}, rank);
      if (!groups.ok()) return void(errors[rank] = groups.status().ToString());
      results[rank] = body(rank, *(*groups)[0], &errors[rank]);
    });
  }
  for (auto& t : threads) t.join();
  for (int rank = 0; rank < 4; ++rank) EXPECT_TRUE(errors[rank].empty()) << "rank " << rank << ": " << errors[rank];
  return results;
}

// Gloo's small all-reduces (up to 4 KiB) go by direct exchange (every rank sends to every other
// and sums in rank order): on 4 ranks of one group the sums of random tensors are the same bit
// for bit on every rank and equal to the rank-order sum, also with two in flight at once beside
// a large (ring) one, in f32, f64 and bf16.
TEST(Communicator, GlooSmallAllReducesAgreeBitForBitAndMatchTheRankOrderSum) {
  auto input = [](int rank, int64_t n, at::ScalarType type) {
    at::manual_seed(100 + rank);  // the same draw in every thread that asks for it
    return at::randn({n}, at::kDouble).to(type);
  };
  std::mutex draw;  // at::manual_seed is global
  auto drawn = [&](int rank, int64_t n, at::ScalarType type) {
    std::lock_guard<std::mutex> lock(draw);
    return input(rank, n, type);
  };
  auto results = OnFourGlooRanks([&](int rank, Communicator& g, std::string* error) -> std::vector<at::Tensor> {
    std::vector<at::Tensor> t = {drawn(rank, 200, at::kFloat), drawn(rank, 128, at::kDouble),
                                 drawn(rank, 100, at::kBFloat16), drawn(rank, 40000, at::kFloat)};
    auto big = g.AllReduceSumAsync(t[3]);
    auto a = g.AllReduceSumAsync(t[0]);
    auto b = g.AllReduceSumAsync(t[1]);
    if (!big.ok() || !a.ok() || !b.ok()) return (*error = "start", std::vector<at::Tensor>{});
    if (!(*b)->Wait().ok() || !(*a)->Wait().ok() || !(*big)->Wait().ok()) return (*error = "wait", std::vector<at::Tensor>{});
    if (!g.AllReduceSum(t[2]).ok()) return (*error = "bf16", std::vector<at::Tensor>{});
    return t;
  });
  if (HasFailure()) return;
  // (elements, dtype); all but the last are at most 4 KiB as summed, so go by direct exchange.
  const std::vector<std::pair<int64_t, at::ScalarType>> kinds = {{200, at::kFloat}, {128, at::kDouble}, {100, at::kBFloat16}, {40000, at::kFloat}};
  for (size_t k = 0; k < kinds.size(); ++k) {
    SCOPED_TRACE(k);
    const auto [n, type] = kinds[k];
    const bool narrow = type == at::kBFloat16;
    at::Tensor want = input(0, n, type).to(narrow ? at::kFloat : type);
    for (int r = 1; r < 4; ++r) want.add_(input(r, n, type).to(narrow ? at::kFloat : type));
    if (narrow) want = want.to(at::kBFloat16);
    for (int rank = 0; rank < 4; ++rank) {
      EXPECT_TRUE(results[rank][k].equal(results[0][k])) << "rank " << rank << " differs from rank 0";
      if (k + 1 < kinds.size()) {
        EXPECT_TRUE(results[rank][k].equal(want)) << "not the rank-order sum on rank " << rank;
      } else {
        EXPECT_TRUE(at::allclose(results[rank][k], want, 1e-5, 1e-5));
      }
    }
  }
}

// All-gathers into a buffer (ZeRO's buckets) go by direct exchange: started asynchronously, a
// small all-reduce (also a direct exchange, on the same tag) and a blocking all-gather started
// after it, every rank's row lands in its place — f32 from a row of the output itself, bf16 from
// a separate tensor.
TEST(Communicator, GlooAllGathersIntoABufferBesideOtherExchanges) {
  auto row = [](int rank, int64_t n, at::ScalarType type) { return (at::arange(n, at::kFloat) + 1000 * rank).to(type); };
  auto results = OnFourGlooRanks([&](int rank, Communicator& g, std::string* error) -> std::vector<at::Tensor> {
    at::Tensor big = at::zeros({4 * 3000});
    big.view({4, 3000})[rank].copy_(row(rank, 3000, at::kFloat));
    at::Tensor small = at::full({8}, static_cast<double>(rank + 1));
    at::Tensor half = at::zeros({4 * 40}, at::kBFloat16);
    auto gather = g.AllGatherIntoAsync(big.view({4, 3000})[rank], big);
    auto sum = g.AllReduceSumAsync(small);
    if (!gather.ok() || !sum.ok()) return (*error = "start", std::vector<at::Tensor>{});
    if (!g.AllGatherInto(row(rank, 40, at::kBFloat16), half).ok()) return (*error = "blocking gather", std::vector<at::Tensor>{});
    if (!(*sum)->Wait().ok() || !(*gather)->Wait().ok()) return (*error = "wait", std::vector<at::Tensor>{});
    return {big, small, half};
  });
  if (HasFailure()) return;
  for (int rank = 0; rank < 4; ++rank) {
    SCOPED_TRACE(rank);
    for (int from = 0; from < 4; ++from) {
      EXPECT_TRUE(results[rank][0].view({4, 3000})[from].equal(row(from, 3000, at::kFloat))) << "row " << from;
      EXPECT_TRUE(results[rank][2].view({4, 40})[from].equal(row(from, 40, at::kBFloat16))) << "bf16 row " << from;
    }
    EXPECT_TRUE(results[rank][1].equal(at::full({8}, 10.0)));
  }
}

// Gloo's asynchronous direct exchanges two at a time, as ZeRO's buckets run them: reduce-scatters
// of rows and all-gathers of different sizes, each started while the one before is under way,
// the older waited for only when a third would start, with compute in between. Every result is
// checked when it lands: each rank's row sums, each rank's gathered rows.
TEST(Communicator, GlooDirectExchangesTwoAtATimeLandWhatWasSent) {
  constexpr int kRounds = 60;
  auto value = [](int round, int rank, int64_t n) { return at::arange(n, at::kFloat) * 0.5 + 100.0 * rank + 10000.0 * round; };
  auto results = OnFourGlooRanks([&](int rank, Communicator& g, std::string* error) -> std::vector<at::Tensor> {
    struct InFlight {
      int round;
      int64_t n;
      at::Tensor rows;
      std::unique_ptr<PendingCollective> pending;
    };
    std::deque<InFlight> flying;
    at::Tensor work = at::randn({96, 96});
    auto land = [&]() -> bool {
      InFlight f = std::move(flying.front());
      flying.pop_front();
      if (!f.pending->Wait().ok()) return (*error = "wait in round " + std::to_string(f.round), false);
      const bool scatter = f.round % 2 == 0;
      for (int from = 0; from < 4; ++from) {
        // A reduce-scatter's row of this rank: every rank's row `rank` summed; a gather's row
        // `from`: rank from's values.
        if (scatter && from != rank) continue;
        at::Tensor want = scatter ? value(f.round, 0, f.n) * 4 + 100.0 * (0 + 1 + 2 + 3) + 4.0 * rank : value(f.round, from, f.n);
        if (!f.rows[from].equal(want)) return (*error = "round " + std::to_string(f.round) + " row " + std::to_string(from), false);
      }
      return true;
    };
    for (int round = 0; round < kRounds; ++round) {
      const int64_t n = 26000 + 7000 * (round % 5);
      at::Tensor rows = at::zeros({4, n});
      std::unique_ptr<PendingCollective> pending;
      if (round % 2 == 0) {
        for (int to = 0; to < 4; ++to) rows[to].copy_(value(round, rank, n) + to);  // (the + to makes row `to` the receiver's)
        auto started = g.ReduceScatterRowsAsync(rows);
        if (!started.ok()) return (*error = "reduce-scatter start", std::vector<at::Tensor>{});
        pending = *std::move(started);
      } else {
        rows[rank].copy_(value(round, rank, n));
        at::Tensor flat = rows.view({-1});
        auto started = g.AllGatherIntoAsync(rows[rank], flat);
        if (!started.ok()) return (*error = "all-gather start", std::vector<at::Tensor>{});
        pending = *std::move(started);
      }
      flying.push_back(InFlight{round, n, rows, std::move(pending)});
      for (int i = 0; i < 1 + (round * 7 + rank * 3) % 4; ++i) work = at::tanh(at::matmul(work, work) * 0.01);
      if (flying.size() == 2 && !land()) return {};
    }
    while (!flying.empty()) {
      if (!land()) return {};
    }
    return {work};
  });
}

// Shared memory with arenas of 4 KiB, so that collectives wait for space, wrap round, and the
// larger ones go by Gloo in between: 80 rounds of all-reduces (random sizes up to 1,500 floats),
// reduce-scatters of rows and all-gathers, up to three under way at once with compute between
// and waited for oldest first. Every result lands as sent: integer-valued sums exact, and a
// random all-reduce the same bits on every rank and equal to the rank-order sum.
TEST(Communicator, SharedMemoryManyUnderWayInASmallArenaLandWhatWasSent) {
  constexpr int kRounds = 80;
  auto value = [](int round, int rank, int64_t n) { return at::arange(n, at::kFloat) + 100.0 * rank + 10000.0 * round; };
  auto size_of = [](int round) -> int64_t { return 1 + (round * 389) % 1500; };  // > 1,024 floats: by Gloo
  std::mutex draw;  // at::manual_seed is global
  auto random_of = [&](int rank) {
    std::lock_guard<std::mutex> lock(draw);
    at::manual_seed(7 + rank);
    return at::randn({500});
  };
  auto results = OnFourGlooRanks(
      [&](int rank, Communicator& g, std::string* error) -> std::vector<at::Tensor> {
        struct InFlight {
          int round;
          at::Tensor t;
          std::unique_ptr<PendingCollective> pending;
        };
        std::deque<InFlight> flying;
        at::Tensor work = at::randn({64, 64});
        auto land = [&]() -> bool {
          InFlight f = std::move(flying.front());
          flying.pop_front();
          if (!f.pending->Wait().ok()) return (*error = "wait in round " + std::to_string(f.round), false);
          const int64_t n = size_of(f.round);
          bool right = true;
          switch (f.round % 3) {
            case 0:  // all-reduce
              right = f.t.equal(value(f.round, 0, n) * 4 + 600.0);
              break;
            case 1:  // reduce-scatter: this rank's row, every rank's row `rank` summed
              right = f.t[rank].equal(value(f.round, 0, n) * 4 + 600.0 + 4.0 * rank);
              break;
            default:  // all-gather
              for (int from = 0; from < 4; ++from) right = right && f.t[from].equal(value(f.round, from, n));
          }
          if (!right) *error = "round " + std::to_string(f.round) + " landed wrong";
          return right;
        };
        for (int round = 0; round < kRounds; ++round) {
          const int64_t n = size_of(round);
          at::Tensor t;
          absl::StatusOr<std::unique_ptr<PendingCollective>> started;
          if (round % 3 == 0) {
            t = value(round, rank, n);
            started = g.AllReduceSumAsync(t);
          } else if (round % 3 == 1) {
            t = at::zeros({4, n});
            for (int to = 0; to < 4; ++to) t[to].copy_(value(round, rank, n) + to);
            started = g.ReduceScatterRowsAsync(t);
          } else {
            t = at::zeros({4, n});
            started = g.AllGatherIntoAsync(value(round, rank, n), t);
          }
          if (!started.ok()) return (*error = "start in round " + std::to_string(round) + ": " + started.status().ToString(), std::vector<at::Tensor>{});
          flying.push_back(InFlight{round, t, *std::move(started)});
          for (int i = 0; i < (round * 7 + rank * 3) % 3; ++i) work = at::tanh(at::matmul(work, work) * 0.01);
          if (flying.size() == 3 && !land()) return {};
          if (round % 10 == 9 && !g.Barrier().ok()) return (*error = "barrier", std::vector<at::Tensor>{});
        }
        while (!flying.empty()) {
          if (!land()) return {};
        }
        at::Tensor noise = random_of(rank);
        if (!g.AllReduceSum(noise).ok()) return (*error = "random all-reduce", std::vector<at::Tensor>{});
        return {noise};
      },
      /*arena=*/4096);
  if (HasFailure()) return;
  at::Tensor want = random_of(0);
  for (int r = 1; r < 4; ++r) want.add_(random_of(r));
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_TRUE(results[rank][0].equal(results[0][0])) << "rank " << rank << " differs from rank 0";
    EXPECT_TRUE(at::allclose(results[rank][0], want, 1e-5, 1e-5)) << "rank " << rank;
  }
}

// Two ranks of a shared-memory group, the first running `first`, the second `second`, with a
// timeout of a second; what each returned.
std::vector<absl::Status> OnTwoSharedRanks(const std::function<absl::Status(Communicator&)>& first,
                                           const std::function<absl::Status(Communicator&)>& second) {
  auto server = StoreServer::Start("127.0.0.1", 0);
  EXPECT_TRUE(server.ok()) << server.status();
  if (!server.ok()) return {};
  std::vector<absl::Status> statuses(2);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      RendezvousOptions ro;
      ro.port = (*server)->port();
      ro.timeout = std::chrono::milliseconds(1000);
      auto groups = ConnectMeshGroups(ro, {2}, rank);
      statuses[rank] = !groups.ok() ? groups.status() : (rank == 0 ? first : second)(*(*groups)[0]);
    });
  }
  for (auto& t : threads) t.join();
  return statuses;
}

// A peer that never comes to a collective: the waiting rank gives up at the timeout with
// DEADLINE_EXCEEDED naming the group rank it waited for, and so does every later collective.
TEST(Communicator, SharedMemoryPeerThatNeverComesIsADeadlineNamingIt) {
  at::Tensor t = at::ones({16});
  auto statuses = OnTwoSharedRanks(
      [&](Communicator& g) {
        const absl::Status first = g.AllReduceSum(t);
        const absl::Status later = g.Barrier();
        EXPECT_EQ(later.code(), absl::StatusCode::kDeadlineExceeded) << later;
        return first;
      },
      [](Communicator&) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        return absl::OkStatus();
      });
  ASSERT_EQ(statuses.size(), 2u);
  EXPECT_EQ(statuses[0].code(), absl::StatusCode::kDeadlineExceeded) << statuses[0];
  EXPECT_NE(statuses[0].message().find("group rank(s) 1 did not start collective #1 (all-reduce)"), std::string::npos) << statuses[0];
}

// Ranks that call different collectives at the same point in the group's order get an error
// saying so (rather than each other's bytes).
TEST(Communicator, SharedMemoryCollectivesCalledInADifferentOrderAreAnError) {
  at::Tensor summed = at::ones({16}), local = at::ones({8}), out = at::zeros({16});
  auto statuses = OnTwoSharedRanks([&](Communicator& g) { return g.AllReduceSum(summed); },
                                   [&](Communicator& g) { return g.AllGatherInto(local, out); });
  ASSERT_EQ(statuses.size(), 2u);
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(statuses[rank].code(), absl::StatusCode::kInternal) << rank << ": " << statuses[rank];
    EXPECT_NE(statuses[rank].message().find("called collectives in a different order"), std::string::npos) << statuses[rank];
  }
}

// A strided tensor is gathered through shared memory as a contiguous one is (tensor parallelism
// gathers attention's heads as a transposed view): one rank passes a transpose, the other the
// same layout contiguous, and both get every rank's values in order. (Had the strided one gone
// to Gloo, each rank would have waited for the other on a different transport.)
TEST(Communicator, SharedMemoryGathersAStridedTensorAsAContiguousOne) {
  auto values = [](int rank) { return at::arange(12, at::kFloat).view({3, 4}) + 100.0 * rank; };
  std::vector<at::Tensor> out(2);
  auto gather = [&](int rank, bool strided) {
    return [&, rank, strided](Communicator& g) {
      const at::Tensor local = strided ? values(rank).t().contiguous().t() : values(rank);
      EXPECT_EQ(local.is_contiguous(), !strided);
      out[rank] = at::zeros({2, 3, 4});
      return g.AllGatherInto(local, out[rank]);
    };
  };
  auto statuses = OnTwoSharedRanks(gather(0, true), gather(1, false));
  ASSERT_EQ(statuses.size(), 2u);
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_TRUE(statuses[rank].ok()) << rank << ": " << statuses[rank];
    for (int from = 0; from < 2; ++from) EXPECT_TRUE(out[rank][from].equal(values(from))) << rank << " from " << from;
  }
}

// Where the segment cannot be had (here: larger than /dev/shm) the group stays on Gloo and works.
TEST(Communicator, SharedMemoryThatCannotBeHadLeavesTheGroupOnGloo) {
  auto results = OnFourGlooRanks(
      [](int rank, Communicator& g, std::string* error) -> std::vector<at::Tensor> {
        at::Tensor t = at::full({64}, static_cast<double>(rank));
        if (!g.AllReduceSum(t).ok()) *error = "all-reduce";
        return {t};
      },
      /*arena=*/int64_t{512} << 30);
  if (HasFailure()) return;
  for (int rank = 0; rank < 4; ++rank) EXPECT_TRUE(results[rank][0].equal(at::full({64}, 6.0))) << rank;
  EXPECT_TRUE(LeftInDevShm().empty());
}

TEST(Communicator, NcclCollectivesOnBothAxesOfA2x2Mesh) {
  if (!NcclBackendBuilt()) GTEST_SKIP() << "this build has no NCCL backend (no CUDA toolkit/NCCL at configure time)";
  auto inv = QueryCuda();
  const size_t gpus = inv.ok() ? inv->devices.size() : 0;
  if (gpus < 4) GTEST_SKIP() << "NCCL needs a GPU per rank of a group: 4 for this mesh, " << gpus << " visible";
  CheckCollectives(/*nccl=*/true);
}

// One GPU (what scripts/gpu-check.sh has): a group of one rank through NCCL, every collective
// and both dtypes, each giving back its input as a group of one must.
TEST(Communicator, NcclCollectivesOnOneGpu) {
  if (!NcclBackendBuilt()) GTEST_SKIP() << "this build has no NCCL backend (no CUDA toolkit/NCCL at configure time)";
  auto inv = QueryCuda();
  if (!inv.ok() || inv->devices.empty()) GTEST_SKIP() << "no GPU visible";
  auto server = StoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status();
  RendezvousOptions ro;
  ro.port = (*server)->port();
  ro.cuda_device = 0;
  auto groups = ConnectMeshGroups(ro, {1}, 0);
  ASSERT_TRUE(groups.ok()) << groups.status();
  Communicator& g = *(*groups)[0];
  ASSERT_EQ(g.size(), 1);
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    const at::Tensor x = Local(0).to(dtype);
    at::Tensor sum = x.clone();
    ASSERT_TRUE(g.AllReduceSum(sum).ok());
    EXPECT_TRUE(sum.equal(x)) << dtype;
    auto gathered = g.AllGather(x, 1);
    ASSERT_TRUE(gathered.ok()) << gathered.status();
    EXPECT_TRUE(gathered->equal(x)) << dtype;
    auto scattered = g.ReduceScatter(x, 0);
    ASSERT_TRUE(scattered.ok()) << scattered.status();
    EXPECT_TRUE(scattered->equal(x)) << dtype;
    auto swapped = g.AllToAll(x, 1, 0);
    ASSERT_TRUE(swapped.ok()) << swapped.status();
    EXPECT_TRUE(swapped->equal(x)) << dtype;
  }
  EXPECT_TRUE(g.Barrier().ok());
}

TEST(Communicator, NcclWithoutTheBackendOrAGpuIsAClearError) {
  auto server = StoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status();
  auto inv = QueryCuda();
  if (NcclBackendBuilt() && inv.ok() && !inv->devices.empty()) GTEST_SKIP() << "a GPU is visible: the error path needs none";
  RendezvousOptions ro;
  ro.port = (*server)->port();
  ro.cuda_device = 0;
  auto groups = ConnectMeshGroups(ro, {1}, 0);
  ASSERT_FALSE(groups.ok());
  EXPECT_EQ(groups.status().code(), NcclBackendBuilt() ? absl::StatusCode::kUnavailable : absl::StatusCode::kUnimplemented)
      << groups.status();
  EXPECT_NE(groups.status().message().find("axis 0"), std::string::npos) << groups.status();
}

// The last rendezvous: rank 0 (whose process hosts the store) waits until every rank says it is
// done, so it never takes the store away from a rank still using it; a rank that never comes is
// a deadline naming how many are missing.
TEST(Rendezvous, RankZeroWaitsAtTheEndForEveryRank) {
  auto server = StoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status();
  RendezvousOptions ro;
  ro.port = (*server)->port();
  ro.timeout = std::chrono::milliseconds(5000);
  std::atomic<bool> zero_returned{false};
  absl::Status zero_status;
  std::thread zero([&] {
    zero_status = FinishRendezvous(ro, 0, 3);
    zero_returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(zero_returned) << "rank 0 left before ranks 1 and 2 were done";
  for (int rank = 1; rank < 3; ++rank) {
    EXPECT_TRUE(FinishRendezvous(ro, rank, 3).ok());
  }
  zero.join();
  EXPECT_TRUE(zero_status.ok()) << zero_status;

  auto other = StoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(other.ok());
  ro.port = (*other)->port();
  ro.timeout = std::chrono::milliseconds(1500);  // enough for c10d to connect (300 ms was not, here)
  const absl::Status alone = FinishRendezvous(ro, 0, 2);
  EXPECT_EQ(alone.code(), absl::StatusCode::kDeadlineExceeded) << alone;
  EXPECT_NE(alone.message().find("1 rank(s) did not finish"), std::string::npos) << alone;
}

// The fake backend: a group of two whose other rank mirrors this one (rank 0), so a sum is twice
// this rank's tensor and a gather repeats its part — enough to check a bucket layout against the
// same arithmetic done by hand, and to count the collectives.
class MirroredPair : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  const std::string& name() const override { return name_; }
  absl::Status AllReduceSum(at::Tensor& t) override {
    ++all_reduces;
    t.mul_(2);
    return absl::OkStatus();
  }
  absl::StatusOr<at::Tensor> AllGather(const at::Tensor& local, int64_t dim) override {
    ++all_gathers;
    return at::cat({local, local}, dim);
  }
  absl::StatusOr<std::unique_ptr<PendingCollective>> AllGatherIntoAsync(const at::Tensor& local, at::Tensor& out) override {
    ++async_gathers;  // done at once (then counted in all_gathers too)
    return Communicator::AllGatherIntoAsync(local, out);
  }
  absl::StatusOr<at::Tensor> ReduceScatter(const at::Tensor& full, int64_t dim) override {
    return (full * 2).chunk(2, dim)[0].clone();
  }
  absl::StatusOr<at::Tensor> AllToAll(const at::Tensor&, int64_t, int64_t) override { return absl::UnimplementedError("fake"); }
  absl::Status Barrier() override { return absl::OkStatus(); }
  absl::StatusOr<std::unique_ptr<PendingSend>> Send(const at::Tensor&, int, int) override { return absl::UnimplementedError("fake"); }
  absl::Status Recv(at::Tensor&, int, int) override { return absl::UnimplementedError("fake"); }
  int all_reduces = 0, all_gathers = 0, async_gathers = 0;

 private:
  std::string name_ = "mirrored pair";
};

// Five parameters of 5, 4, 6, 3 and 2 elements sharded over a pair, in buckets {0, 1}, {2, 3},
// {4} and two staging buffers; parameter 1 read `tied_reads` times (a tied weight: that many
// gradients a step).
ZeroBucketSet FiveParametersInThreeBuckets(int tied_reads) {
  const std::vector<int64_t> numel = {5, 4, 6, 3, 2};
  ZeroBucketSet set;
  set.ranks = 2;
  set.dtype = v1::FLOAT32;
  for (size_t i = 0; i < numel.size(); ++i) {
    ZeroParam z;
    z.name = "p" + std::to_string(i);
    z.axes = {0};
    z.ranks = 2;
    z.numel = numel[i];
    z.chunk = (numel[i] + 1) / 2;
    z.grad_syncs = {static_cast<int>(i)};
    if (i == 1 && tied_reads == 2) z.grad_syncs = {3, 7};
    set.params.push_back(z);
  }
  set.buckets = {ZeroBucket{{0, 1}, {0, 3}, 5}, ZeroBucket{{2, 3}, {0, 3}, 5}, ZeroBucket{{4}, {0}, 1}};
  set.staging_buffers = 2;
  set.staging_elements = 10;
  return set;
}

// ZeroBuckets (grad_buckets.h) on five parameters in buckets {0, 1}, {2, 3}, {4}, parameter 1 a
// tied weight (two gradients a step): gradients out of order — the first of each bucket before
// any bucket is complete, so a third staging buffer is needed — give every parameter its
// shard's sum (twice chunk 0 of its gradient, the padding zeros) with one all-reduce per bucket;
// a parameter without a gradient gets none; the updated shards are gathered back into the
// blocks with one all-gather per group of buckets the two staging buffers hold (two here).
TEST(ZeroBuckets, OutOfOrderGradientsTiedWeightsAndTheGatherBack) {
  const std::vector<int64_t> numel = {5, 4, 6, 3, 2};
  const ZeroBucketSet set = FiveParametersInThreeBuckets(/*tied_reads=*/2);
  MirroredPair pair;
  ZeroBuckets buckets(&pair, set, at::TensorOptions().dtype(at::kFloat));
  std::vector<at::Tensor> grads;
  for (int64_t n : numel) grads.push_back(at::randn({n}));
  const at::Tensor tied_second = at::randn({numel[1]});
  for (auto [slot, grad] : std::vector<std::pair<int, at::Tensor>>{
           {0, grads[0]}, {2, grads[2]}, {4, grads[4]}, {1, grads[1]}, {3, grads[3]}, {1, tied_second}}) {
    buckets.Ready(slot, grad);
  }
  std::map<int, at::Tensor> got;
  ASSERT_TRUE(buckets.Finish([&](int slot, at::Tensor g) { got[slot] = g.clone(); }).ok());
  EXPECT_EQ(pair.all_reduces, 3);
  ASSERT_EQ(got.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    const at::Tensor whole = i == 1 ? grads[1] + tied_second : grads[i];
    const int64_t chunk = set.params[i].chunk;
    EXPECT_TRUE(at::allclose(got[i], 2 * whole.narrow(0, 0, chunk))) << "parameter " << i;
  }
  // The next step: in order, parameter 3 without a gradient.
  got.clear();
  for (int slot : {0, 1, 1, 2, 4}) buckets.Ready(slot, grads[slot]);
  ASSERT_TRUE(buckets.Finish([&](int slot, at::Tensor g) { got[slot] = g.clone(); }).ok());
  EXPECT_EQ(pair.all_reduces, 6);
  EXPECT_EQ(got.count(3), 0u);
  EXPECT_TRUE(at::allclose(got[1], 2 * (2 * grads[1]).narrow(0, 0, 2)));
  EXPECT_TRUE(at::allclose(got[2], 2 * grads[2].narrow(0, 0, 3)));
  // The gather back: block i is its shard twice over, cut to its elements.
  std::vector<at::Tensor> shards, blocks;
  for (int64_t n : numel) {
    shards.push_back(at::randn({(n + 1) / 2}));
    blocks.push_back(at::zeros({n}));
  }
  ASSERT_TRUE(buckets.Gather([&](int slot) { return shards[slot]; }, [&](int slot) { return blocks[slot]; }).ok());
  EXPECT_EQ(pair.all_gathers, 2);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(at::equal(blocks[i], at::cat({shards[i], shards[i]}).narrow(0, 0, numel[i]))) << i;
}

// ZeRO-3's gathers (ZeroBuckets::GatherBlock) on five parameters in buckets {0, 1}, {2, 3}, {4},
// read 0, 2, 1, 3, 4 and freed after each read, a step after another: two gather buffers keep
// buckets 0 and 1 both, so the first step gathers each bucket once (one buffer would gather
// 0, 1, 0, 1, 2); once the shards change, the first step's order is the forecast: bucket 0 is
// gathered at once (asynchronously, before the next step reads it) and the others ahead of
// their reads, and every block holds its new shard.
TEST(ZeroBuckets, Zero3GathersEachBucketOnceAndPrefetchesTheNextAsTheLastStepRead) {
  const std::vector<int64_t> numel = {5, 4, 6, 3, 2};
  const ZeroBucketSet set = FiveParametersInThreeBuckets(/*tied_reads=*/1);
  MirroredPair pair;
  ZeroBuckets buckets(&pair, set, at::TensorOptions().dtype(at::kFloat));
  std::vector<at::Tensor> shards, blocks;
  for (int64_t n : numel) {
    shards.push_back(at::randn({(n + 1) / 2}));
    blocks.push_back(at::zeros({n}));
    FreeBlock(blocks.back());
  }
  buckets.SetParameters(shards, blocks);
  auto step = [&] {
    for (int slot : {0, 2, 1, 3, 4}) {
      ASSERT_TRUE(buckets.GatherBlock(slot).ok()) << slot;
      ASSERT_TRUE(BlockGathered(blocks[slot])) << slot;
      EXPECT_TRUE(at::equal(blocks[slot], at::cat({shards[slot], shards[slot]}).narrow(0, 0, numel[slot]))) << slot;
      FreeBlock(blocks[slot]);
    }
    for (at::Tensor& shard : shards) shard.add_(1);  // an optimizer step
    ASSERT_TRUE(buckets.ShardsChanged().ok());
  };
  step();
  EXPECT_EQ(pair.all_gathers, 4);  // each bucket once, and the next step's first
  EXPECT_EQ(pair.async_gathers, 1);  // the next step's first bucket, as this step's order forecasts
  step();
  EXPECT_EQ(pair.all_gathers, 7);
  EXPECT_EQ(pair.async_gathers, 4);  // buckets 1 and 2, started before they were read; 0 for the next
}

// The timing wrapper: a collective started in one step and waited for in the next, after the
// rank cleared its stats for that step (ZeRO-3 gathers the next step's first bucket ahead), is
// counted in the stats as they are when the wait ends — it used to write through a pointer to
// the cleared entry.
TEST(Communicator, TimedWaitsAreCountedWhereTheStatsAreWhenTheyEnd) {
  CollectiveStats stats;
  std::unique_ptr<Communicator> timed = TimeCollectives(std::make_unique<MirroredPair>(), &stats);
  at::Tensor local = at::ones({4}), out = at::zeros({8});
  auto gather = timed->AllGatherIntoAsync(local, out);
  ASSERT_TRUE(gather.ok()) << gather.status();
  EXPECT_EQ(stats["all_gather"].calls, 1);
  stats.clear();  // the next step
  stats["all_reduce"].calls = 3;  // the new step's entries take the memory of the old
  ASSERT_TRUE((*gather)->Wait().ok());
  ASSERT_EQ(stats.count("all_gather"), 1u);
  EXPECT_EQ(stats["all_gather"].calls, 0);  // started in the step before
  EXPECT_GE(stats["all_gather"].seconds, 0.0);
  EXPECT_EQ(stats["all_reduce"].calls, 3);
  EXPECT_TRUE(out.equal(at::ones({8})));
}

}  // namespace
}  // namespace mapd

#include "tests/rank/one_device.h"

#include <gtest/gtest.h>

#include <ATen/Parallel.h>

#include <cmath>
#include <thread>

#include "worker/transport/gloo_communicator.h"
#include "worker/runtime/data.h"
#include "worker/runtime/trainer.h"

namespace mapd {

OptimizerOptions Sgd(double lr) {
  OptimizerOptions o;
  o.kind = OptimizerOptions::Kind::kSgd;
  o.lr = lr;
  o.momentum = 0.9;
  return o;
}

Reference SingleDevice(const Graph& g, const OptimizerOptions& optimizer, bool repeat) {
  Reference ref;
  DataOptions data;
  data.seed = 11;
  auto source = MakeDataSource(g.proto(), data, c10::Device(c10::kCPU));
  EXPECT_TRUE(source.ok()) << source.status();
  TrainerOptions to;
  to.executor.seed = 5;
  to.optimizer = optimizer;
  auto trainer = Trainer::Create(g.proto(), to);
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  for (int s = 0; s < kSteps; ++s) {
    auto batch = (*source)->Next();
    EXPECT_TRUE(batch.ok());
    ref.batches.push_back(repeat && s > 0 ? ref.batches.front() : *batch);
    auto r = (*trainer)->Step(ref.batches.back());
    EXPECT_TRUE(r.ok()) << r.status();
    ref.losses.push_back(r->loss);
  }
  for (const auto& [name, t] : (*trainer)->executor().parameters().Trainable()) ref.final_params[name] = t.detach().clone();
  return ref;
}

void ExpectBlocksMatch(const v1::RankProgram& program, const std::vector<std::pair<std::string, at::Tensor>>& blocks,
                       const Reference& ref, double tolerance, int rank) {
  for (const auto& [name, local] : blocks) {
    const v1::Shard* shard = nullptr;
    for (const auto& s : program.parameters()) {
      if (s.name() == name) shard = &s;
    }
    for (const v1::RankProgram& chunk : program.later_chunks()) {  // interleaved: the rank's other chunks
      for (const auto& s : chunk.parameters()) {
        if (s.name() == name) shard = &s;
      }
    }
    ASSERT_NE(shard, nullptr) << name;
    at::Tensor expected = ref.final_params.at(name);
    for (int d = 0; d < shard->local_type().shape_size(); ++d) {
      expected = expected.narrow(d, shard->offsets().start(d), shard->local_type().shape(d));
    }
    const double scale = std::max(1.0, expected.abs().max().item<double>());
    EXPECT_LE((local - expected).abs().max().item<double>(), tolerance * scale)
        << "rank " << rank << " " << name << " worst at flat index " << (local - expected).abs().flatten().argmax().item<int64_t>()
        << " of " << local.numel();
  }
}

void RunRanksOnThreads(int world, const std::function<std::vector<int64_t>(int rank)>& mesh_of,
                       const std::function<void(int rank, std::vector<Communicator*> groups, RankOutcome& out)>& body,
                       std::vector<RankOutcome>& ranks) {
  ranks.assign(world, RankOutcome());
  auto server = StoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status();
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      at::set_num_threads(1);
      RendezvousOptions ro;
      ro.port = (*server)->port();
      ro.timeout = std::chrono::milliseconds(60000);
      auto groups = ConnectMeshGroups(ro, mesh_of(rank), rank);
      if (!groups.ok()) return void(ranks[rank].error = groups.status().ToString());
      std::vector<Communicator*> raw;
      for (auto& c : *groups) raw.push_back(c.get());
      body(rank, raw, ranks[rank]);
    });
  }
  for (auto& t : threads) t.join();
}

void ExpectRanksMatch(const std::vector<v1::RankProgram>& programs, const std::vector<RankOutcome>& ranks, const Reference& ref,
                      double tolerance) {
  for (size_t rank = 0; rank < ranks.size(); ++rank) {
    const RankOutcome& r = ranks[rank];
    ASSERT_TRUE(r.error.empty()) << "rank " << rank << ": " << r.error;
    ASSERT_EQ(r.losses.size(), static_cast<size_t>(kSteps));
    for (int s = 0; s < kSteps; ++s) {
      EXPECT_NEAR(r.losses[s], ref.losses[s], tolerance * std::abs(ref.losses[s])) << "rank " << rank << " step " << s + 1;
    }
    ExpectBlocksMatch(programs[rank], r.blocks, ref, tolerance, static_cast<int>(rank));
  }
}

}  // namespace mapd

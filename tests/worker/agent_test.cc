// mapd-worker's agent against a real coordinator in this process, with stand-in ranks
// (fake_rank's `_rank` mode): two workers register, a 2-rank job is planned and placed across
// them, rank 0's worker reports the rendezvous store's address and the coordinator passes it to
// the other worker's rank, the ranks report their steps and the job succeeds. No LibTorch.
#include "worker/daemon/agent.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "common/file_io.h"
#include "common/store_secret.h"
#include "server/api/server.h"
#include "server/jobs/job_spec.h"

namespace mapd {
namespace {

using ::testing::HasSubstr;

constexpr const char* kToken = "agent-test-token";
constexpr const char* kWorkerToken = "agent-test-worker-token";

struct Worker {
  MetricsRegistry metrics;
  std::unique_ptr<WorkerAgent> agent;
  std::thread thread;
  absl::Status ended;
};

TEST(WorkerAgent, TwoWorkersRunAJobWhoseRanksMeetOnRankZerosStore) {
  ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.token = kToken;
  o.worker_token = kWorkerToken;
  o.lease.heartbeat_seconds = 0.1;
  o.lease.lease_seconds = 5;
  o.dispatch_period_seconds = 0.05;
  auto server = MapdServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();

  const std::string dir = ::testing::TempDir() + "/agent_test_" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  Worker workers[2];
  for (int w = 0; w < 2; ++w) {
    AgentOptions a;
    a.coordinator = "127.0.0.1:" + std::to_string((*server)->port());
    a.token = kWorkerToken;
    a.hostname = "worker-" + std::to_string(w);
    v1::Device d;
    d.set_name("cpu:0");
    d.set_memory_bytes(int64_t{1} << 30);
    a.devices = {d};
    a.runner.work_dir = dir + "/w" + std::to_string(w);
    a.runner.rank_program = MAPD_BINARY_DIR "/tests/worker/fake_rank";
    a.runner.rank_timeout_seconds = 10;
    a.runner.advertise_host = "127.0.0.1";
    workers[w].agent = std::make_unique<WorkerAgent>(a, &workers[w].metrics);
    workers[w].thread = std::thread([&wk = workers[w]] { wk.ended = wk.agent->Run(); });
  }
  for (int i = 0; i < 100 && (*server)->workers().List().size() < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ((*server)->workers().List().size(), 2u);

  v1::JobSpec spec;
  spec.set_model("gpt2:layers=1,hidden=32,heads=2,vocab=64,seq=8,batch=4");
  spec.set_ranks(2);
  spec.mutable_training()->set_steps(3);
  spec.set_device_type("cpu");
  auto job = (*server)->jobs().Submit(WithDefaults(spec));
  ASSERT_TRUE(job.ok()) << job.status();
  v1::JobState state = v1::PENDING;
  for (int i = 0; i < 600; ++i) {
    state = (*server)->jobs().Get(job->id())->state();
    if (state == v1::SUCCEEDED || state == v1::FAILED || state == v1::CANCELLED) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::string events;
  const auto all = (*server)->jobs().Events(job->id());
  ASSERT_TRUE(all.ok()) << all.status();
  for (const auto& e : *all) events += e.message() + "\n";
  EXPECT_EQ(state, v1::SUCCEEDED) << (*server)->jobs().Get(job->id())->error() << "\n" << events;
  EXPECT_THAT(events, HasSubstr("(rank 0), w-"));
  EXPECT_THAT(events, HasSubstr("trained 3 steps on 2 rank(s)"));
  EXPECT_EQ((*server)->jobs().Get(job->id())->step(), 3);
  // Rank 1 ran on the other worker with the address rank 0's worker reported (fake_rank's port).
  std::string rank1;
  for (int w = 0; w < 2; ++w) {
    auto argv = ReadFileToString(dir + "/w" + std::to_string(w) + "/job-" + std::to_string(job->id()) + "/argv_1.txt");
    if (argv.ok()) rank1 = *argv;
  }
  EXPECT_THAT(rank1, HasSubstr("--rank 1 --store 127.0.0.1:4242"));
  // Both ranks, on their two workers, were given the one secret the coordinator drew for the job.
  std::vector<std::string> secrets;
  for (int w = 0; w < 2; ++w) {
    for (int r = 0; r < 2; ++r) {
      auto secret = ReadFileToString(dir + "/w" + std::to_string(w) + "/job-" + std::to_string(job->id()) + "/secret_" + std::to_string(r) + ".txt");
      if (secret.ok()) secrets.push_back(*secret);
    }
  }
  ASSERT_EQ(secrets.size(), 2u);
  EXPECT_TRUE(CheckStoreSecret(secrets[0]).ok()) << secrets[0];
  EXPECT_EQ(secrets[0], secrets[1]);

  for (auto& w : workers) w.agent->Stop();
  for (auto& w : workers) {
    w.thread.join();
    EXPECT_TRUE(w.ended.ok()) << w.ended;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mapd

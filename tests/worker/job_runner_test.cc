// A mapd-worker's JobRunner against stand-in ranks (fake_rank's `_rank` mode): the run directory
// and the ranks' command lines, rank 0's store address reported, steps and checkpoints reported
// and committed on the worker, metrics, and failures. No LibTorch, no coordinator.
#include "worker/daemon/job_runner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/checkpoint/checkpoint_commit.h"
#include "common/file_io.h"
#include "worker/launch/rank_command.h"

namespace mapd {
namespace {

using ::testing::HasSubstr;

constexpr char kSecret[] = "00112233445566778899aabbccddeeff";

class JobRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/job_runner_" + std::to_string(getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    options_.work_dir = dir_;
    options_.rank_program = MAPD_BINARY_DIR "/tests/worker/fake_rank";
    options_.rank_timeout_seconds = 10;
    options_.advertise_host = "10.0.0.9";
    options_.worker_id = "w-5";
    DeclareJobMetrics(&metrics_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Job 7's ranks `ranks` of a 2-rank mesh: 4 steps, a checkpoint every 2.
  static v1::RankAssignment Assignment(std::vector<int> ranks) {
    v1::RankAssignment a;
    a.set_job_id(7);
    a.add_mesh(2);
    a.mutable_graph()->set_name("g");
    for (int r : ranks) {
      a.add_ranks(r);
      a.add_devices("cpu:" + std::to_string(r));
      a.add_programs()->set_rank(r);
    }
    a.mutable_training()->set_steps(4);
    a.mutable_training()->set_optimizer("sgd");
    a.mutable_training()->set_lr(0.1);
    a.mutable_training()->set_data("synthetic");
    a.mutable_training()->set_checkpoint_every(2);
    a.set_items_per_step(10);
    a.set_plan("mesh 2, layout 0123456789abcdef");
    a.set_store_secret(kSecret);
    return a;
  }

  // Runs the assignment to its end; the reports it sent.
  std::vector<v1::ReportRequest> Run(const v1::RankAssignment& a) {
    std::vector<v1::ReportRequest> reports;
    std::mutex mu;
    JobRunner runner(a, options_, [&](const v1::ReportRequest& r) {
      std::lock_guard<std::mutex> lock(mu);
      reports.push_back(r);
      return false;
    }, &metrics_);
    runner.Start();
    for (int i = 0; i < 400 && !runner.done(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_TRUE(runner.done());
    std::lock_guard<std::mutex> lock(mu);
    return reports;
  }

  std::string dir_;
  JobRunnerOptions options_;
  MetricsRegistry metrics_;
};

TEST_F(JobRunnerTest, RankZeroHostsTheStoreAndStepsAndCheckpointsAreReported) {
  const auto reports = Run(Assignment({0, 1}));
  ASSERT_FALSE(reports.empty());
  std::vector<std::string> stores;
  std::vector<int64_t> rank0_steps, checkpoints;
  for (const auto& r : reports) {
    EXPECT_EQ(r.job_id(), 7);
    if (!r.store_address().empty()) stores.push_back(r.store_address());
    for (const auto& s : r.steps()) {
      if (s.rank() == 0) rank0_steps.push_back(s.step());
    }
    if (r.checkpoint_step() > 0) checkpoints.push_back(r.checkpoint_step());
  }
  // Where rank 0's store listens, on this worker's advertised host, reported once.
  EXPECT_EQ(stores, std::vector<std::string>{"10.0.0.9:4242"});
  EXPECT_EQ(rank0_steps, (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(checkpoints, (std::vector<int64_t>{2, 4}));
  EXPECT_TRUE(reports.back().finished());
  EXPECT_EQ(reports.back().code(), 0) << reports.back().error();
  // The run directory and the one command line: rank 0 hosts, rank 1 is given its address.
  const std::string run = dir_ + "/job-7";
  EXPECT_EQ(ReadRankJob(run)->training().steps(), 4);
  EXPECT_EQ(ReadRankJob(run)->local_host(), "10.0.0.9");
  EXPECT_EQ(*ReadFileToString(run + "/argv_0.txt"), "--run-dir " + run + " --rank 0\n");
  EXPECT_EQ(*ReadFileToString(run + "/argv_1.txt"), "--run-dir " + run + " --rank 1 --store 10.0.0.9:4242\n");
  // Both have the coordinator's secret in their environment (not on their command lines).
  EXPECT_EQ(*ReadFileToString(run + "/secret_0.txt"), kSecret);
  EXPECT_EQ(*ReadFileToString(run + "/secret_1.txt"), kSecret);
  // Without shared storage the worker commits its own ranks' shards.
  auto meta = ReadLatestCheckpoint(run + "/checkpoints");
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(meta->step(), 4);
  EXPECT_EQ(meta->plan(), "mesh 2, layout 0123456789abcdef");
  EXPECT_TRUE(std::filesystem::exists(run + "/checkpoints/step-00000002/rank_1.pb"));
  // Rank series labelled with the worker and the rank's device; prometheus-cpp orders labels by name.
  EXPECT_THAT(metrics_.Encode(), HasSubstr("mapd_worker_step{device=\"cpu:0\",job_id=\"7\",rank=\"0\",worker=\"w-5\"} 4"));
  EXPECT_THAT(metrics_.Encode(), HasSubstr("mapd_worker_jobs_total{outcome=\"succeeded\"} 1"));
}

TEST_F(JobRunnerTest, WithoutRankZeroTheRanksJoinTheStoreTheCoordinatorNamed) {
  v1::RankAssignment a = Assignment({1});
  a.set_store_address("10.0.0.1:29500");
  const auto reports = Run(a);
  ASSERT_FALSE(reports.empty());
  EXPECT_EQ(reports.back().code(), 0) << reports.back().error();
  EXPECT_EQ(*ReadFileToString(dir_ + "/job-7/argv_1.txt"), "--run-dir " + dir_ + "/job-7 --rank 1 --store 10.0.0.1:29500\n");
  for (const auto& r : reports) EXPECT_TRUE(r.store_address().empty());
  // Neither rank 0 nor an address: refused, naming why.
  a.clear_store_address();
  a.set_attempt(1);
  const auto refused = Run(a);
  ASSERT_FALSE(refused.empty());
  EXPECT_EQ(refused.back().code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(refused.back().error(), HasSubstr("neither rank 0 nor the address of its rendezvous store"));
  // An assignment without the job's secret: its ranks could not join the store; refused, naming it.
  a = Assignment({0, 1});
  a.clear_store_secret();
  a.set_attempt(2);
  const auto secretless = Run(a);
  ASSERT_FALSE(secretless.empty());
  EXPECT_EQ(secretless.back().code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(secretless.back().error(), HasSubstr("the assignment's store_secret: a rendezvous secret is 32 hexadecimal characters"));
}

TEST_F(JobRunnerTest, AFailedRankEndsThePartWithItsCodeAndWords) {
  setenv("MAPD_FAULT", "fail:1", 1);
  const auto reports = Run(Assignment({0, 1}));
  unsetenv("MAPD_FAULT");
  ASSERT_FALSE(reports.empty());
  EXPECT_TRUE(reports.back().finished());
  EXPECT_EQ(reports.back().code(), static_cast<int>(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(reports.back().error(), HasSubstr("rank 1 exited with status 1: error: rank 1: out of memory"));
  EXPECT_THAT(metrics_.Encode(), HasSubstr("mapd_worker_jobs_total{outcome=\"failed\"} 1"));
  // What the rank said is kept in its log file and sent to the coordinator, as rank 1's output.
  std::string sent;
  for (const auto& r : reports) {
    for (const auto& o : r.outputs()) {
      EXPECT_EQ(o.rank(), 1) << o.text();  // rank 0 says nothing
      sent += o.text();
    }
  }
  EXPECT_THAT(sent, HasSubstr("error: rank 1: out of memory [RESOURCE_EXHAUSTED]\n"));
  EXPECT_THAT(*ReadFileToString(dir_ + "/job-7/rank_1.log"), HasSubstr("error: rank 1: out of memory"));
}

}  // namespace
}  // namespace mapd

namespace mapd {
namespace {

TEST(RotatingLog, RollsOverPastItsSizeKeepingOneOldFile) {
  const std::string dir = ::testing::TempDir() + "/rotating_log_" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string file = dir + "/rank_0.log";
  {
    RotatingLog log(file, /*max_bytes=*/10);
    log.Append("first\n");
    log.Append("second\n");  // 13 bytes now: the next chunk starts a new file
    EXPECT_EQ(*ReadFileToString(file), "first\nsecond\n");  // written as it comes
    log.Append("third\n");
  }
  EXPECT_EQ(*ReadFileToString(file + ".1"), "first\nsecond\n");
  EXPECT_EQ(*ReadFileToString(file), "third\n");
  // What the file holds already counts: a log opened on it rolls over at once past its size.
  RotatingLog again(file, /*max_bytes=*/5);
  again.Append("fourth\n");
  EXPECT_EQ(*ReadFileToString(file + ".1"), "third\n");
  EXPECT_EQ(*ReadFileToString(file), "fourth\n");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mapd

// The rank protocol's launcher side: event framing, the run directory and command line, and
// LaunchRanks driving stand-in ranks (fake_rank) through success, failure, crash, hang, garbage
// and the rendezvous store hosted by the first rank.
#include "worker/launch/launcher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "common/file_io.h"
#include "common/store_secret.h"
#include "worker/launch/rank_command.h"
#include "worker/launch/rank_events.h"

namespace mapd {
namespace {

using ::testing::HasSubstr;

const char* kFakeRank = MAPD_BINARY_DIR "/tests/worker/fake_rank";

v1::RankEvent Step(int rank, int64_t step, double loss) {
  v1::RankEvent e;
  e.set_rank(rank);
  e.mutable_step_done()->set_step(step);
  e.mutable_step_done()->set_loss(loss);
  (*e.mutable_step_done()->mutable_collectives())["all_reduce"].set_bytes(4096);
  return e;
}

TEST(RankEvents, ReassembleFromAnyPieces) {
  const std::string stream = FrameRankEvent(Step(0, 1, 2.5)) + FrameRankEvent(Step(0, 2, 1.5));
  for (size_t piece : {size_t{1}, size_t{3}, stream.size()}) {
    RankEventReader reader;
    std::vector<v1::RankEvent> got;
    for (size_t i = 0; i < stream.size(); i += piece) {
      ASSERT_TRUE(reader.Feed(stream.data() + i, std::min(piece, stream.size() - i), &got).ok());
    }
    ASSERT_EQ(got.size(), 2u) << "pieces of " << piece;
    EXPECT_EQ(got[1].step_done().step(), 2);
    EXPECT_DOUBLE_EQ(got[0].step_done().loss(), 2.5);
    EXPECT_EQ(got[0].step_done().collectives().at("all_reduce").bytes(), 4096);
    EXPECT_EQ(reader.pending_bytes(), 0u);
  }
}

TEST(RankEvents, RefuseWhatIsNoEventStream) {
  std::vector<v1::RankEvent> got;
  RankEventReader text;
  const std::string line = "{\"rank\": 0, \"step\": 1}\n";  // the old JSON lines
  EXPECT_EQ(text.Feed(line.data(), line.size(), &got).code(), absl::StatusCode::kDataLoss);
  RankEventReader huge;
  const std::string big_length = "\xa7\xff\xff\xff\x7f";
  EXPECT_THAT(std::string(huge.Feed(big_length.data(), big_length.size(), &got).message()), HasSubstr("not a stream of events"));
  RankEventReader bad;
  const std::string junk = std::string("\xa7\x03", 2) + "\xff\xff\xff";
  EXPECT_EQ(bad.Feed(junk.data(), junk.size(), &got).code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(got.empty());
}

TEST(RankCommand, OneCommandLineAndARunDirectoryTheRankReadsBack) {
  EXPECT_EQ(RankCommandLine({"/bin/mapd-rank", "/run", 0, -1, ""}), (std::vector<std::string>{"/bin/mapd-rank", "--run-dir", "/run", "--rank", "0"}));
  EXPECT_EQ(RankCommandLine({"/bin/mapd-rank", "/run", 3, 1, "10.0.0.1:29500"}),
            (std::vector<std::string>{"/bin/mapd-rank", "--run-dir", "/run", "--rank", "3", "--cuda-device", "1", "--store", "10.0.0.1:29500"}));
  const std::string dir = ::testing::TempDir() + "/rank_command_" + std::to_string(getpid());
  v1::Graph graph;
  graph.set_name("g");
  v1::RankJob job;
  job.mutable_training()->set_steps(7);
  job.mutable_training()->set_optimizer("sgd");
  v1::RankProgram p2, p3;
  p2.set_rank(2);
  p3.set_rank(3);
  ASSERT_TRUE(WriteRunDirectory(dir, graph, job, {2, 3}, {&p2, &p3}).ok());
  EXPECT_EQ(ReadRankJob(dir)->training().steps(), 7);
  EXPECT_EQ(ReadRankProgram(dir, 3)->rank(), 3);
  EXPECT_EQ(ReadRankProgram(dir, 0).status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(WriteRunDirectory(dir, graph, job, {2}, {&p2, &p3}).ok());
  std::filesystem::remove_all(dir);
}

// Runs `ranks` fake ranks in `mode` (per process); returns the launch's status and the events.
struct Launched {
  absl::Status status;
  std::map<int, std::vector<v1::RankEvent>> events;
};
constexpr char kSecret[] = "0123456789abcdef0123456789abcdef";
Launched Launch(const std::vector<std::string>& modes, LaunchOptions o = {}) {
  o.ranks = static_cast<int>(modes.size());
  if (!o.argv_for) {
    o.argv_for = [&](int i, const std::string& store) {
      std::vector<std::string> argv{kFakeRank, modes[i], std::to_string(i)};
      if (!store.empty()) argv.push_back(store);
      return argv;
    };
  }
  if (o.silence_timeout == std::chrono::milliseconds(60000)) o.silence_timeout = std::chrono::seconds(2);
  if (o.store_host_index < 0 && o.store_secret.empty()) o.store_secret = kSecret;  // (the host's, as a worker is given it)
  Launched out;
  out.status = LaunchRanks(o, [&](int i, const v1::RankEvent& e) { out.events[i].push_back(e); });
  return out;
}

TEST(LaunchRanks, RunsEveryRankAndHandsOnItsEvents) {
  LaunchOptions o;
  o.store = "127.0.0.1:1";
  const Launched l = Launch({"ok", "ok", "ok"}, o);
  ASSERT_TRUE(l.status.ok()) << l.status;
  for (int r = 0; r < 3; ++r) {
    ASSERT_EQ(l.events.at(r).size(), 7u);  // 3 × (begun, done) + done
    EXPECT_EQ(l.events.at(r)[5].step_done().step(), 3);
    EXPECT_TRUE(l.events.at(r).back().has_done());
  }
}

TEST(LaunchRanks, TheStoreHostStartsFirstAndTheOthersGetItsAddress) {
  const std::string file = ::testing::TempDir() + "/launch_order_" + std::to_string(getpid());
  std::filesystem::remove(file);
  LaunchOptions o;
  o.store_host_index = 1;
  o.store_host = "10.1.2.3";
  o.argv_for = [&](int i, const std::string& store) {
    std::vector<std::string> argv{kFakeRank, "record", i == 1 ? "0" : "5", file, std::to_string(i)};
    if (!store.empty()) argv.push_back(store);
    return argv;
  };
  const Launched l = Launch({"", "", ""}, o);
  ASSERT_TRUE(l.status.ok()) << l.status;
  EXPECT_TRUE(l.events.at(1).front().has_store_ready());
  std::string lines = *ReadFileToString(file);
  // The host (process 1) was started, and said where its store is, before the others.
  EXPECT_EQ(lines.substr(0, 2), "1\n") << lines;
  EXPECT_THAT(lines, HasSubstr("0 10.1.2.3:4242\n"));
  EXPECT_THAT(lines, HasSubstr("2 10.1.2.3:4242\n"));
  // The launch hosts the store, so it drew the job's secret; every rank has it in its environment.
  const std::vector<std::string> secrets = absl::StrSplit(*ReadFileToString(file + ".secrets"), '\n', absl::SkipEmpty());
  ASSERT_EQ(secrets.size(), 3u);
  const std::string secret = secrets[0].substr(2);
  EXPECT_TRUE(CheckStoreSecret(secret).ok()) << secret;
  for (const std::string& line : secrets) EXPECT_EQ(line.substr(2), secret) << line;
  std::filesystem::remove(file);
  std::filesystem::remove(file + ".secrets");
}

TEST(LaunchRanks, ALaunchThatJoinsAnotherStoreNeedsItsSecret) {
  LaunchOptions o;
  o.store = "127.0.0.1:1";
  o.store_secret = "not-hex";
  const Launched l = Launch({"ok"}, o);
  EXPECT_EQ(l.status.code(), absl::StatusCode::kInvalidArgument) << l.status;
  EXPECT_THAT(std::string(l.status.message()), HasSubstr("rendezvous secret"));
}

TEST(LaunchRanks, AFailedRankEndsTheRunWithItsOwnCodeAndWords) {
  LaunchOptions o;
  o.rank_names = {4, 5};
  o.store = "127.0.0.1:1";
  const Launched l = Launch({"hang", "fail"}, o);
  EXPECT_EQ(l.status.code(), absl::StatusCode::kResourceExhausted) << l.status;
  EXPECT_THAT(std::string(l.status.message()), HasSubstr("rank 5 exited with status 1: error: rank 1: out of memory"));
}

TEST(LaunchRanks, ACrashIsAbortedAndAHangIsADeadline) {
  LaunchOptions o;
  o.store = "127.0.0.1:1";
  const Launched crashed = Launch({"ok", "crash"}, o);
  EXPECT_EQ(crashed.status.code(), absl::StatusCode::kAborted) << crashed.status;
  EXPECT_THAT(std::string(crashed.status.message()), HasSubstr("rank 1 was killed by signal"));
  const Launched hung = Launch({"hang"}, o);
  EXPECT_EQ(hung.status.code(), absl::StatusCode::kDeadlineExceeded) << hung.status;
  EXPECT_THAT(std::string(hung.status.message()), HasSubstr("rank 0 sent nothing for 2 s"));
}

TEST(LaunchRanks, OutputThatIsNoEventStreamIsDataLoss) {
  LaunchOptions o;
  o.store = "127.0.0.1:1";
  const Launched l = Launch({"garbage"}, o);
  EXPECT_EQ(l.status.code(), absl::StatusCode::kDataLoss) << l.status;
  EXPECT_THAT(std::string(l.status.message()), HasSubstr("rank 0: the rank's output is not a stream of events"));
}

TEST(LaunchRanks, AStoreHostThatEndsWithoutItsStoreFailsTheRun) {
  LaunchOptions o;
  o.store_host_index = 0;
  o.argv_for = [](int i, const std::string& store) {
    return std::vector<std::string>{kFakeRank, "ok", std::to_string(i + 1)};  // rank 1..: reports no store
  };
  const Launched l = Launch({"", ""}, o);
  EXPECT_EQ(l.status.code(), absl::StatusCode::kInternal) << l.status;
  EXPECT_THAT(std::string(l.status.message()), HasSubstr("ended without reporting its rendezvous store"));
}

TEST(LaunchRanks, CancelStopsTheRanks) {
  std::atomic<bool> cancel{true};
  LaunchOptions o;
  o.store = "127.0.0.1:1";
  o.cancel = &cancel;
  EXPECT_EQ(Launch({"hang"}, o).status.code(), absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace mapd

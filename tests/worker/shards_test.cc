// Checkpoint shards between workers (worker/shards): a committed step's files pushed to a peer's
// shard service arrive whole (in chunks, the bytes equal), are served back only with the job's
// secret and only by their names, a resuming worker fetches them past a holder that is gone, and
// the replicator reports the last step its peer kept; puts that never end take no more than the
// service's threads.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <thread>

#include <grpcpp/create_channel.h>

#include "common/checkpoint/checkpoint_commit.h"
#include "common/file_io.h"
#include "worker/shards/shard_client.h"
#include "worker/shards/shard_replicator.h"
#include "worker/shards/shard_resume.h"
#include "worker/shards/shard_service.h"
#include "worker/shards/shard_store.h"

namespace mapd {
namespace {

namespace fs = std::filesystem;
constexpr int64_t kJob = 7;
const std::string kSecret(32, 'a');

std::string RandomBytes(size_t n, unsigned seed) {
  std::mt19937 random(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(random());
  return s;
}

// A worker's store and shard service on loopback, in a directory of its own.
struct Peer {
  explicit Peer(const std::string& name) : dir(::testing::TempDir() + "/shards_" + name + "_" + std::to_string(getpid())) {
    fs::remove_all(dir);
    store = std::make_unique<ShardStore>(dir + "/shards");
    store->Allow(kJob, kSecret);
    server = *StartShardServer("127.0.0.1:0", store.get());
  }
  ~Peer() {
    server->server->Shutdown();
    fs::remove_all(dir);
  }
  std::string dir;
  std::unique_ptr<ShardStore> store;
  std::unique_ptr<ShardServer> server;
};

// A run's committed step 5 of a 2-rank job: meta.pb, and shards of 2.5 MiB (three chunks) and 10 bytes.
std::string CommittedStep(const std::string& dir) {
  const std::string step = CheckpointStepDir(dir, 5);
  fs::create_directories(step);
  v1::CheckpointMeta meta = CheckpointMetaFor(5, 2, {2}, "mesh 2");
  EXPECT_TRUE(WriteStringToFileAtomic(step + "/meta.pb", meta.SerializeAsString()).ok());
  EXPECT_TRUE(WriteStringToFileAtomic(step + "/rank_0.pb", RandomBytes((5 << 20) / 2, 1)).ok());
  EXPECT_TRUE(WriteStringToFileAtomic(step + "/rank_1.pb", RandomBytes(10, 2)).ok());
  return step;
}

TEST(ShardFiles, OnlyTheNamesOfAStepsFilesAreTaken) {
  for (const char* ok : {"meta.pb", "rank_0.pb", "rank_17.pb", "rank_1048575.pb"}) EXPECT_TRUE(CheckShardFileName(ok).ok()) << ok;
  for (const char* bad : {"", "../meta.pb", "rank_.pb", "rank_01.pb", "rank_-1.pb", "rank_1048576.pb", "rank_1.pb/x", "/etc/passwd", "LATEST"}) {
    EXPECT_EQ(CheckShardFileName(bad).code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(ShardService, APushedStepArrivesWholeAndIsServedOnlyWithTheJobsSecret) {
  Peer a("a"), b("b");
  const std::string step = CommittedStep(a.dir + "/run");
  const std::vector<std::string> files = ShardFiles({0, 1});
  ASSERT_TRUE(a.store->Keep(kJob, 5, step, files, /*link=*/true).ok());
  ASSERT_TRUE(PushShards(b.server->address, {kJob, 5, kSecret}, a.store->StepDir(kJob, 5), files, 30).ok());
  for (const std::string& f : files) {
    EXPECT_EQ(*ReadFileToString(b.store->StepDir(kJob, 5) + "/" + f), *ReadFileToString(step + "/" + f)) << f;
  }
  // A wrong secret, or a job not assigned there, is refused; so is a name that is not a shard's.
  EXPECT_EQ(PushShards(b.server->address, {kJob, 5, std::string(32, 'b')}, step, files, 30).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(PushShards(b.server->address, {kJob + 1, 5, kSecret}, step, files, 30).code(), absl::StatusCode::kPermissionDenied);
  const std::string into = a.dir + "/fetched";
  fs::create_directories(into);
  EXPECT_EQ(FetchShards({b.server->address}, {kJob, 5, std::string(32, 'b')}, {"rank_0.pb"}, into, 30).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(FetchShards({b.server->address}, {kJob, 5, kSecret}, {"../../meta.pb"}, into, 30).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FetchShards({b.server->address}, {kJob, 6, kSecret}, {"rank_0.pb"}, into, 30).code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(fs::exists(into + "/rank_0.pb"));
  ASSERT_TRUE(FetchShards({b.server->address}, {kJob, 5, kSecret}, {"rank_0.pb"}, into, 30).ok());
  EXPECT_EQ(*ReadFileToString(into + "/rank_0.pb"), *ReadFileToString(step + "/rank_0.pb"));
}

TEST(ShardService, PutsThatNeverEndHoldNoMoreThanItsThreads) {
  // A peer that opens puts and never ends them: past kMaxShardServerThreads calls at once, the
  // rest are refused RESOURCE_EXHAUSTED, and once they end a put is served again.
  Peer b("held");
  auto stub = v1::ShardService::NewStub(grpc::CreateChannel(b.server->address, grpc::InsecureChannelCredentials()));
  struct Held {
    grpc::ClientContext context;
    v1::PutShardsResponse response;
    std::unique_ptr<grpc::ClientWriter<v1::ShardChunk>> writer;
  };
  constexpr int kOpen = 3 * kMaxShardServerThreads;
  std::vector<std::unique_ptr<Held>> held;
  v1::ShardChunk first;
  first.set_job_id(kJob);
  first.set_step(5);
  first.set_secret(kSecret);
  first.set_file("rank_0.pb");
  first.set_data("x");  // not its last chunk: the put waits for more
  for (int i = 0; i < kOpen; ++i) {
    held.push_back(std::make_unique<Held>());
    held.back()->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    held.back()->writer = stub->PutShards(&held.back()->context, &held.back()->response);
    held.back()->writer->Write(first);  // (false on a call already refused)
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // every call has reached the server
  std::map<grpc::StatusCode, int> ended;
  for (auto& h : held) {
    h->writer->WritesDone();  // a held put then ends short of its file's last chunk
    ++ended[h->writer->Finish().error_code()];
  }
  // Those served held a thread each (one more polls); the rest were refused at once.
  EXPECT_LE(ended[grpc::StatusCode::INVALID_ARGUMENT], kMaxShardServerThreads);
  EXPECT_GE(ended[grpc::StatusCode::RESOURCE_EXHAUSTED], kOpen - kMaxShardServerThreads);
  EXPECT_EQ(ended[grpc::StatusCode::INVALID_ARGUMENT] + ended[grpc::StatusCode::RESOURCE_EXHAUSTED], kOpen);
  const std::string step = CommittedStep(b.dir + "/run");
  absl::Status again;
  for (int attempt = 0; attempt < 50; ++attempt) {  // (the server sees the cancels within moments)
    again = PushShards(b.server->address, {kJob, 5, kSecret}, step, ShardFiles({0, 1}), 30);
    if (again.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(again.ok()) << again;
}

TEST(ShardStore, KeepsTheCommittedStepAndAFewNewerOnes) {
  Peer a("prune");
  const std::string step = CommittedStep(a.dir + "/run");
  ShardStore store(a.dir + "/capped", /*max_newer_steps=*/2);
  auto kept = [&] {
    std::vector<int64_t> out;
    for (int64_t s : {5, 10, 15, 20, 25}) {
      if (store.PathOf(kJob, s, "meta.pb").ok()) out.push_back(s);
    }
    return out;
  };
  for (int64_t s : {5, 10}) ASSERT_TRUE(store.Keep(kJob, s, step, {"meta.pb"}, /*link=*/true).ok());
  store.Committed(kJob, 5);
  // Steps written past the committed one (a worker whose peers lag, or a paused one that goes on)
  // never push it out: a restart resumes from it.
  for (int64_t s : {15, 20, 25}) ASSERT_TRUE(store.Keep(kJob, s, step, {"meta.pb"}, /*link=*/true).ok());
  EXPECT_EQ(kept(), (std::vector<int64_t>{5, 20, 25}));
  store.Committed(kJob, 20);
  EXPECT_EQ(kept(), (std::vector<int64_t>{20, 25}));
  store.Committed(kJob, 10);  // (late news changes nothing)
  EXPECT_EQ(kept(), (std::vector<int64_t>{20, 25}));
  EXPECT_TRUE(fs::exists(step + "/rank_0.pb"));  // the run's own files stay
}

TEST(ShardStore, RetainDropsTheJobsNotNamed) {
  Peer a("retain");
  const std::string step = CommittedStep(a.dir + "/run");
  a.store->Allow(kJob + 1, kSecret);
  for (int64_t job : {kJob, kJob + 1}) ASSERT_TRUE(a.store->Keep(job, 5, step, ShardFiles({0, 1}), /*link=*/true).ok());
  a.store->Retain({kJob + 1});
  EXPECT_FALSE(fs::exists(a.store->StepDir(kJob, 5)));
  EXPECT_EQ(a.store->CheckAccess(kJob, kSecret).code(), absl::StatusCode::kPermissionDenied);  // its secret forgotten
  EXPECT_TRUE(fs::exists(a.store->StepDir(kJob + 1, 5) + "/rank_0.pb"));
  EXPECT_TRUE(a.store->CheckAccess(kJob + 1, kSecret).ok());
  EXPECT_TRUE(fs::exists(step + "/rank_0.pb"));  // the run's own files stay (the store held links)
}

TEST(ShardResume, AResumingWorkerFetchesEveryShardPastAHolderThatIsGone) {
  Peer a("ra"), b("rb");
  const std::string step = CommittedStep(a.dir + "/run");
  ASSERT_TRUE(b.store->Keep(kJob, 5, step, ShardFiles({0, 1}), /*link=*/true).ok());
  // Port 1 on loopback: nobody listens (a lost worker).
  v1::RankAssignment assignment;
  assignment.set_job_id(kJob);
  assignment.add_ranks(0);
  assignment.set_resume_step(5);
  assignment.set_resume_resharded(true);  // another plan: every rank's shards are read
  assignment.set_attempt(1);
  assignment.set_shard_secret(kSecret);
  for (int rank : {0, 1}) {
    v1::ShardSource* s = assignment.add_resume_shards();
    s->set_rank(rank);
    s->add_addresses("127.0.0.1:1");
    s->add_addresses(b.server->address);
  }
  EXPECT_EQ(RanksToFetch(assignment), (std::vector<int>{0, 1}));
  const std::string checkpoints = a.dir + "/resumed";
  ASSERT_TRUE(FetchResumeShards(assignment, checkpoints, 30).ok());
  EXPECT_EQ(ReadLatestCheckpoint(checkpoints)->step(), 5);
  for (const char* f : {"rank_0.pb", "rank_1.pb"}) {
    EXPECT_EQ(*ReadFileToString(CheckpointStepDir(checkpoints, 5) + "/" + f), *ReadFileToString(step + "/" + f)) << f;
  }
  // Not resharded: only its own ranks' shards; none anywhere: UNAVAILABLE (a restart may find them), naming the rank.
  assignment.set_resume_resharded(false);
  EXPECT_EQ(RanksToFetch(assignment), (std::vector<int>{0}));
  assignment.set_attempt(2);
  assignment.mutable_resume_shards(0)->clear_addresses();
  const absl::Status st = FetchResumeShards(assignment, a.dir + "/none", 30);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("rank 0's shard of checkpoint step 5 is on no worker that answers"), std::string::npos) << st;
}

TEST(ShardReplicator, ReportsTheLastStepItsPeerKept) {
  Peer a("pa"), b("pb");
  const std::string step = CommittedStep(a.dir + "/run");
  const std::vector<std::string> files = ShardFiles({0, 1});
  ASSERT_TRUE(a.store->Keep(kJob, 5, step, files, /*link=*/true).ok());
  {
    ShardReplicator replicator(a.store.get(), b.server->address, {kJob, 0, kSecret}, files);
    replicator.Committed(5);
    replicator.Drain(30);
    EXPECT_EQ(replicator.replicated(), 5);
  }
  EXPECT_TRUE(b.store->PathOf(kJob, 5, "rank_0.pb").ok());
  ShardReplicator nowhere(a.store.get(), "127.0.0.1:1", {kJob, 0, kSecret}, files);
  nowhere.Committed(5);
  nowhere.Drain(30);
  EXPECT_EQ(nowhere.replicated(), 0);
}

}  // namespace
}  // namespace mapd

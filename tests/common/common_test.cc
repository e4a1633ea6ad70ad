// The common layer: byte sizes, whole-file I/O and the checkpoint commit.
#include <algorithm>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/allocator.h"
#include "common/bytes.h"
#include "common/checkpoint/checkpoint_commit.h"
#include "common/checkpoint/gather.h"
#include "common/data_spec.h"
#include "common/file_io.h"
#include "common/rpc/grpc_status.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace mapd {
namespace {

// RetainFreedMemory takes effect (it once compiled to nothing: its glibc test came before any
// libc header): a 4 MiB block comes from the heap rather than a fresh mapping, and freeing an
// 8 MiB block gives nothing back to the kernel — so a training step does not fault its
// activations in again every step.
TEST(Allocator, RetainFreedMemoryKeepsLargeBlocksInTheHeap) {
#if defined(__GLIBC__)
  RetainFreedMemory();
  const size_t mapped = mallinfo2().hblks;
  void* p = std::malloc(4 << 20);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(mallinfo2().hblks, mapped) << "a 4 MiB block was mapped on its own: the mmap threshold is not raised";
  std::free(p);
  void* q = std::malloc(8 << 20);
  ASSERT_NE(q, nullptr);
  const size_t heap = mallinfo2().arena;
  std::free(q);
  EXPECT_EQ(mallinfo2().arena, heap) << "freeing gave memory back to the kernel: trimming is on";
#else
  GTEST_SKIP() << "the C library is not glibc";
#endif
}

using ::testing::HasSubstr;

TEST(GrpcStatus, AWorkerRetriesABusyOrRestartingCoordinatorAndStopsOnlyOnRealRefusals) {
  // Probe of issue 18: 500 idle Watch streams took the coordinator's threads, and a worker's
  // heartbeat answered RESOURCE_EXHAUSTED made it exit for good.
  for (grpc::StatusCode code : {grpc::StatusCode::UNAVAILABLE, grpc::StatusCode::DEADLINE_EXCEEDED, grpc::StatusCode::CANCELLED,
                                grpc::StatusCode::RESOURCE_EXHAUSTED, grpc::StatusCode::ABORTED}) {
    EXPECT_TRUE(mapd::IsTransient(grpc::Status(code, ""))) << code;
  }
  for (grpc::StatusCode code : {grpc::StatusCode::OK, grpc::StatusCode::UNAUTHENTICATED, grpc::StatusCode::PERMISSION_DENIED,
                                grpc::StatusCode::INVALID_ARGUMENT, grpc::StatusCode::UNIMPLEMENTED, grpc::StatusCode::NOT_FOUND}) {
    EXPECT_FALSE(mapd::IsTransient(grpc::Status(code, ""))) << code;
  }
}

TEST(Bytes, ParsesBinaryAndDecimalUnitsInAnyCase) {
  EXPECT_EQ(*ParseBytes("80GiB"), 80LL << 30);
  EXPECT_EQ(*ParseBytes("40GB"), 40000000000LL);
  EXPECT_EQ(*ParseBytes("512 MiB"), 512LL << 20);
  EXPECT_EQ(*ParseBytes("1.5KiB"), 1536);
  EXPECT_EQ(*ParseBytes("1000"), 1000);
  EXPECT_EQ(*ParseBytes("64mb"), 64000000);  // the same meaning in every flag and file
  EXPECT_EQ(*ParseBytes("64mib"), 64LL << 20);
  EXPECT_EQ(*ParseBytes("7B"), 7);
  // Kubernetes' quantities: binary in any case, decimal as it spells them (its m is milli).
  EXPECT_EQ(*ParseBytes("80Gi"), 80LL << 30);
  EXPECT_EQ(*ParseBytes("512mi"), 512LL << 20);
  EXPECT_EQ(*ParseBytes("1.5Ti"), 3LL << 39);
  EXPECT_EQ(*ParseBytes("2Ki"), 2048);
  EXPECT_EQ(*ParseBytes("40G"), 40000000000LL);
  EXPECT_EQ(*ParseBytes("64M"), 64000000);
  EXPECT_EQ(*ParseBytes("3k"), 3000);
  EXPECT_EQ(ParseBytes("64m").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseBytes("5g").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Bytes, RefusesWhatIsNotAPositiveInt64Size) {
  EXPECT_THAT(std::string(ParseBytes("0GiB").status().message()), HasSubstr("positive number with a unit"));
  EXPECT_FALSE(ParseBytes("lots").ok());
  EXPECT_FALSE(ParseBytes("-1GiB").ok());
  EXPECT_FALSE(ParseBytes("nanGiB").ok());
  EXPECT_FALSE(ParseBytes("").ok());
  EXPECT_THAT(std::string(ParseBytes("1e30GiB").status().message()), HasSubstr("too large"));
  EXPECT_THAT(std::string(ParseBytes("9223372036854775808").status().message()), HasSubstr("too large"));
  EXPECT_EQ(ParseBytes("8EiB").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(ParseBytes("0.5B").status().message()), HasSubstr("less than one byte"));
}

TEST(Bytes, FormatsWithBinaryUnits) {
  EXPECT_EQ(FormatBytes(12), "12 B");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(320LL << 20), "320.0 MiB");
  EXPECT_EQ(FormatBytes(3LL << 39), "1.5 TiB");
}

TEST(DataSpec, KindsAndTheirFiles) {
  EXPECT_TRUE(ParseDataSpec("synthetic")->files.empty());
  EXPECT_EQ(ParseDataSpec("tokens:data/train.bin")->files, std::vector<std::string>{"data/train.bin"});
  EXPECT_EQ(ParseDataSpec("text:a,b.txt")->files, std::vector<std::string>{"a,b.txt"});  // one file: ',' is npy's
  auto npy = ParseDataSpec("npy:x.npy,y.npy");
  ASSERT_TRUE(npy.ok()) << npy.status();
  EXPECT_EQ(npy->kind, "npy");
  EXPECT_EQ(npy->files, (std::vector<std::string>{"x.npy", "y.npy"}));
  EXPECT_EQ(npy->JoinedFiles(), "x.npy,y.npy");
  EXPECT_EQ(SplitDataFiles("npy", npy->JoinedFiles()), npy->files);
  for (const char* bad : {"npy:x,y,z", "npy:", "npy:x,", "tokens", "text:", "synthetic:x", "images:x.npy", ""}) {
    auto st = ParseDataSpec(bad).status();
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(st.message()), ::testing::HasSubstr("npy:INPUTS.npy[,TARGETS.npy]")) << bad;
  }
  EXPECT_FALSE(ParseDataSpec("tokens:" + std::string(1025, 'a')).ok());
}

class CommonFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/common_test_" + std::to_string(getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(CommonFiles, WritesAtomicallyAndReadsBack) {
  const std::string path = dir_ + "/f.bin";
  ASSERT_TRUE(WriteStringToFileAtomic(path, std::string("a\0b", 3)).ok());
  EXPECT_EQ(*ReadFileToString(path), std::string("a\0b", 3));
  ASSERT_TRUE(WriteStringToFileAtomic(path, "second").ok());
  EXPECT_EQ(*ReadFileToString(path), "second");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_EQ(ReadFileToString(dir_ + "/missing").status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(WriteStringToFileAtomic(dir_ + "/no/such/dir/f", "x").ok());
}

TEST_F(CommonFiles, CommitsACheckpointStepAndPointsLatestAtIt) {
  EXPECT_EQ(ReadLatestCheckpoint(dir_).status().code(), absl::StatusCode::kNotFound);
  v1::CheckpointMeta meta;
  meta.set_step(10);
  std::filesystem::create_directories(CheckpointStepDir(dir_, 10) + ".tmp");
  ASSERT_TRUE(WriteStringToFileAtomic(CheckpointStepDir(dir_, 10) + ".tmp/rank_0.pb", "shard").ok());
  ASSERT_TRUE(CommitCheckpointStep(dir_, meta).ok());
  EXPECT_EQ(CheckpointStepDir(dir_, 10), dir_ + "/step-00000010");
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/step-00000010/rank_0.pb"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/step-00000010.tmp"));
  EXPECT_EQ(ReadLatestCheckpoint(dir_)->step(), 10);
  ASSERT_TRUE(WriteStringToFileAtomic(dir_ + "/LATEST", "11").ok());  // names a step never committed
  EXPECT_EQ(ReadLatestCheckpoint(dir_).status().code(), absl::StatusCode::kDataLoss);
}

TEST_F(CommonFiles, EachAttemptStagesAStepApartAndOnlyTheCommittingOnesShardsAreCommitted) {
  EXPECT_EQ(CheckpointStagingDir(dir_, 10, 0), dir_ + "/step-00000010.tmp");
  EXPECT_EQ(CheckpointStagingDir(dir_, 10, 2), dir_ + "/step-00000010.a2.tmp");
  // Attempt 2 writes its shard; a rank of attempt 1 that still runs (a paused host's) writes too.
  for (int attempt : {1, 2}) {
    std::filesystem::create_directories(CheckpointStagingDir(dir_, 10, attempt));
    ASSERT_TRUE(WriteStringToFileAtomic(CheckpointStagingDir(dir_, 10, attempt) + "/rank_0.pb", absl::StrCat("attempt ", attempt)).ok());
  }
  v1::CheckpointMeta meta;
  meta.set_step(10);
  ASSERT_TRUE(CommitCheckpointStep(dir_, meta, /*keep_steps=*/0, /*attempt=*/2).ok());
  EXPECT_EQ(*ReadFileToString(dir_ + "/step-00000010/rank_0.pb"), "attempt 2");
  EXPECT_TRUE(std::filesystem::exists(CheckpointStagingDir(dir_, 10, 1)));  // never committed
  // Once a later step commits, every attempt's staging of earlier steps goes.
  std::filesystem::create_directories(CheckpointStagingDir(dir_, 20, 2));
  meta.set_step(20);
  ASSERT_TRUE(CommitCheckpointStep(dir_, meta, /*keep_steps=*/5, /*attempt=*/2).ok());
  EXPECT_FALSE(std::filesystem::exists(CheckpointStagingDir(dir_, 10, 1)));
  EXPECT_EQ(ReadLatestCheckpoint(dir_)->step(), 20);
}

TEST_F(CommonFiles, OnlyTheNewestCheckpointStepsAreKeptAndNothingNotYetSuperseded) {
  auto write_step = [&](int64_t step) {
    std::filesystem::create_directories(CheckpointStepDir(dir_, step) + ".tmp");
    ASSERT_TRUE(WriteStringToFileAtomic(CheckpointStepDir(dir_, step) + ".tmp/rank_0.pb", "shard").ok());
  };
  write_step(5);  // abandoned: never committed, and a later step is
  for (int64_t step : {10, 20, 30, 40}) {
    write_step(step);
    if (step == 40) write_step(50);  // being written while 40 commits: not touched
    v1::CheckpointMeta meta;
    meta.set_step(step);
    ASSERT_TRUE(CommitCheckpointStep(dir_, meta, /*keep_steps=*/2).ok());
  }
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"LATEST", "step-00000030", "step-00000040", "step-00000050.tmp"}));
  EXPECT_EQ(ReadLatestCheckpoint(dir_)->step(), 40);
  // keep 1 keeps LATEST's step; a step after LATEST (committed out of order by hand) is not touched.
  ASSERT_TRUE(PruneCheckpointSteps(dir_, 40, 1).ok());
  EXPECT_FALSE(std::filesystem::exists(CheckpointStepDir(dir_, 30)));
  EXPECT_TRUE(std::filesystem::exists(CheckpointStepDir(dir_, 40)));
  EXPECT_TRUE(std::filesystem::exists(CheckpointStepDir(dir_, 50) + ".tmp"));
}


// A float32 piece of tensor `name` [4, 6]: `values` placed at `start` with `block` shape, or as
// the flat shard from `flat_start` of that block.
v1::TensorData Piece(const std::string& name, const std::vector<float>& values, std::vector<int64_t> start,
                     std::vector<int64_t> block, int64_t flat_start = -1) {
  v1::TensorData d;
  d.set_name(name);
  d.mutable_type()->set_dtype(v1::FLOAT32);
  if (flat_start >= 0) {
    d.mutable_type()->add_shape(static_cast<int64_t>(values.size()));
  } else {
    for (int64_t b : block) d.mutable_type()->add_shape(b);
  }
  d.set_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
  v1::BlockPlace* place = d.mutable_place();
  for (int64_t g : {4, 6}) place->add_global_shape(g);
  for (int64_t x : start) place->add_start(x);
  for (int64_t b : block) place->add_block_shape(b);
  if (flat_start >= 0) {
    place->set_flat_shard(true);
    place->set_flat_start(flat_start);
  }
  return d;
}

std::vector<float> Floats(const v1::TensorData& d) {
  std::vector<float> v(d.data().size() / sizeof(float));
  std::memcpy(v.data(), d.data().data(), d.data().size());
  return v;
}

TEST_F(CommonFiles, ACheckpointsBlocksAndShardsGatherIntoWholeTensorsFromSeveralDirectories) {
  // w [4, 6] = 0..23, split by columns over ranks 0-1 (blocks [4, 3]); ranks 2-3 replicate them.
  // Its optimizer buffer: each block flattened and sharded in two (ZeRO, the last shard padded).
  auto block_values = [](int64_t col0) {
    std::vector<float> v;
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 3; ++c) v.push_back(static_cast<float>(r * 6 + col0 + c));
    return v;
  };
  const std::string a = dir_ + "/worker-a", b = dir_ + "/worker-b";
  for (int rank = 0; rank < 4; ++rank) {
    const int64_t col0 = (rank % 2) * 3;
    std::vector<float> block = block_values(col0);
    v1::RankCheckpoint c;
    c.set_rank(rank);
    c.set_step(5);
    *c.add_parameters() = Piece("w", block, {0, col0}, {4, 3});
    c.mutable_parameters(0)->mutable_place()->add_aliases("tied.w");
    const int64_t half = rank / 2;  // ZeRO index among the two ranks of each column block
    std::vector<float> shard(block.begin() + half * 7, block.begin() + std::min<int64_t>(12, half * 7 + 7));
    shard.resize(7, -1.0f);  // padding past the block's 12 elements
    v1::OptimizerSlot* slot = c.add_optimizer();
    slot->set_name("w");
    slot->set_steps(5);
    *slot->mutable_buf1() = Piece("w", shard, {0, col0}, {4, 3}, half * 7);
    const std::string dir = rank < 2 ? a : b;  // two workers, two ranks each
    std::filesystem::create_directories(CheckpointStepDir(dir, 5) + ".tmp");
    ASSERT_TRUE(WriteStringToFileAtomic(absl::StrCat(CheckpointStepDir(dir, 5), ".tmp/rank_", rank, ".pb"), c.SerializeAsString()).ok());
  }
  for (const std::string& dir : {a, b}) ASSERT_TRUE(CommitCheckpointStep(dir, CheckpointMetaFor(5, 4, {2, 2}, "test")).ok());

  auto gathered = GatherCheckpoint({a, b});
  ASSERT_TRUE(gathered.ok()) << gathered.status();
  std::vector<float> whole(24);
  for (int i = 0; i < 24; ++i) whole[i] = static_cast<float>(i);
  ASSERT_EQ(gathered->whole.parameters_size(), 1);
  const v1::TensorData& w = gathered->whole.parameters(0);
  EXPECT_EQ(std::vector<int64_t>(w.type().shape().begin(), w.type().shape().end()), (std::vector<int64_t>{4, 6}));
  EXPECT_EQ(Floats(w), whole);
  EXPECT_EQ(w.place().aliases(0), "tied.w");
  ASSERT_EQ(gathered->whole.optimizer_size(), 1);
  EXPECT_EQ(Floats(gathered->whole.optimizer(0).buf1()), whole);
  EXPECT_EQ(gathered->meta.step(), 5);

  // One worker's directory alone lacks ranks 2 and 3 (and so half of each optimizer shard).
  auto one = GatherCheckpoint({a});
  EXPECT_EQ(one.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(one.status().message()), ::testing::HasSubstr("no directory given holds rank(s) 2, 3 of step 5"));
  EXPECT_EQ(GatherCheckpoint({a, b}, 6).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace mapd

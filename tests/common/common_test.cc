// The common layer: byte sizes, whole-file I/O and the checkpoint commit.
#include <algorithm>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "common/allocator.h"
#include "common/bytes.h"
#include "common/checkpoint/checkpoint_commit.h"
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

}  // namespace
}  // namespace mapd

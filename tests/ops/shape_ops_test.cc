// Layout ops: view/reshape/flatten/transpose/permute/(un)squeeze/expand/repeat_interleave/
// slice/select/split/chunk/cat/stack.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>

#include "tests/ops/op_test_util.h"

namespace mapd {
namespace {

using ::testing::HasSubstr;
using namespace mapd::testing;

TEST(ShapeOps, ViewReshapeFlatten) {
  EXPECT_EQ(Out("view", {F32({2, 16, 32})}, Attrs().Ints("shape", {2, 16, 4, 8})), "f32[2,16,4,8]");
  EXPECT_EQ(Out("reshape", {F32({2, 16, 32})}, Attrs().Ints("shape", {-1, 32})), "f32[32,32]");
  EXPECT_THAT(Out("view", {F32({2, 16, 32})}, Attrs().Ints("shape", {-1, -1})), HasSubstr("more than one -1"));
  // A product past int64 is refused, not computed (fuzz_job_spec found the overflow).
  EXPECT_THAT(Out("view", {F32({2, 16, 32})}, Attrs().Ints("shape", {2331711664260, 4194303, -1})),
              HasSubstr("has more elements than an int64 counts"));
  EXPECT_THAT(Out("view", {F32({2, 16, 32})}, Attrs().Ints("shape", {5, -1})), HasSubstr("cannot reshape"));
  EXPECT_THAT(Out("view", {F32({2, 3})}, Attrs().Ints("shape", {7})), HasSubstr("(6 elements) to [7] (7 elements)"));
  EXPECT_EQ(Out("flatten", {F32({2, 3, 4, 5})}, Attrs().Int("start_dim", 1)), "f32[2,60]");
  EXPECT_EQ(Out("flatten", {F32({2, 3, 4, 5})}, Attrs().Int("start_dim", 1).Int("end_dim", 2)), "f32[2,12,5]");
  EXPECT_THAT(Out("flatten", {F32({2, 3})}, Attrs().Int("start_dim", 1).Int("end_dim", 0)), HasSubstr("comes after"));
}

TEST(ShapeOps, TransposePermuteSqueeze) {
  EXPECT_EQ(Out("transpose", {F32({2, 16, 4, 8})}, Attrs().Int("dim0", 1).Int("dim1", 2)), "f32[2,4,16,8]");
  EXPECT_THAT(Out("transpose", {F32({2, 3})}, Attrs().Int("dim0", 0).Int("dim1", 5)), HasSubstr("out of range"));
  EXPECT_EQ(Out("permute", {F32({2, 3, 4})}, Attrs().Ints("dims", {2, 0, 1})), "f32[4,2,3]");
  EXPECT_THAT(Out("permute", {F32({2, 3, 4})}, Attrs().Ints("dims", {0, 1})), HasSubstr("must list all 3"));
  EXPECT_THAT(Out("permute", {F32({2, 3, 4})}, Attrs().Ints("dims", {0, 1, 1})), HasSubstr("more than once"));
  EXPECT_EQ(Out("contiguous", {F32({2, 3})}), "f32[2,3]");
  EXPECT_EQ(Out("unsqueeze", {F32({2, 3})}, Attrs().Int("dim", -1)), "f32[2,3,1]");
  EXPECT_EQ(Out("unsqueeze", {F32({2, 3})}, Attrs().Int("dim", 0)), "f32[1,2,3]");
  EXPECT_EQ(Out("squeeze", {F32({1, 2, 1, 3})}), "f32[2,3]");
  EXPECT_EQ(Out("squeeze", {F32({1, 2, 1, 3})}, Attrs().Ints("dims", {2})), "f32[1,2,3]");
}

TEST(ShapeOps, ExpandRepeatInterleave) {
  EXPECT_EQ(Out("expand", {F32({1, 1, 8})}, Attrs().Ints("shape", {4, -1, 8})), "f32[4,1,8]");
  EXPECT_EQ(Out("expand", {F32({3, 1})}, Attrs().Ints("shape", {2, 3, 4})), "f32[2,3,4]");
  EXPECT_THAT(Out("expand", {F32({3, 2})}, Attrs().Ints("shape", {3, 4})), HasSubstr("has size 2, not 1"));
  EXPECT_EQ(Out("repeat_interleave", {F32({2, 2, 16, 8})}, Attrs().Int("repeats", 4).Int("dim", 1)), "f32[2,8,16,8]");
  // A hostile count is refused, not overflowed.
  EXPECT_THAT(Out("repeat_interleave", {F32({2, 2, 16, 8})}, Attrs().Int("repeats", int64_t{1} << 61).Int("dim", 1)),
              HasSubstr("makes more elements than an int64 counts"));
  EXPECT_THAT(Out("repeat_interleave", {F32({2, 2, 16, 8})}, Attrs().Int("repeats", int64_t{1} << 60)),
              HasSubstr("makes more elements than an int64 counts"));
  EXPECT_EQ(Out("repeat_interleave", {F32({2, 3})}, Attrs().Int("repeats", 2)), "f32[12]");
}

TEST(ShapeOps, SliceSelect) {
  const int64_t kEnd = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(Out("slice", {F32({1, 1, 64, 64})}, Attrs().Int("dim", 2).Int("start", 0).Int("end", 16)), "f32[1,1,16,64]");
  EXPECT_EQ(Out("slice", {F32({2, 10})}, Attrs().Int("dim", 1).Int("start", 5).Int("end", kEnd)), "f32[2,5]");
  EXPECT_EQ(Out("slice", {F32({2, 10})}, Attrs().Int("dim", -1).Int("start", -3).Int("end", kEnd)), "f32[2,3]");
  EXPECT_EQ(Out("slice", {F32({2, 10})}, Attrs().Int("dim", 1).Int("start", 1).Int("end", 8).Int("step", 3)), "f32[2,3]");
  EXPECT_EQ(Out("slice", {F32({2, 10})}, Attrs().Int("dim", 1).Int("start", 8).Int("end", 2)), "f32[2,0]");
  EXPECT_THAT(Out("slice", {F32({2, 10})}, Attrs().Int("dim", 1).Int("step", 0)), HasSubstr("step must be positive"));
  EXPECT_EQ(Out("select", {F32({2, 17, 8})}, Attrs().Int("dim", 1).Int("index", 0)), "f32[2,8]");
  EXPECT_THAT(Out("select", {F32({2, 17, 8})}, Attrs().Int("dim", 1).Int("index", 17)), HasSubstr("out of range"));
}

TEST(ShapeOps, SplitChunkCatStack) {
  EXPECT_EQ(Out("split", {F32({2, 16, 96})}, Attrs().Int("split_size", 32).Int("dim", 2)),
            "f32[2,16,32] f32[2,16,32] f32[2,16,32]");
  EXPECT_EQ(Out("split", {F32({10})}, Attrs().Int("split_size", 4)), "f32[4] f32[4] f32[2]");
  EXPECT_EQ(Out("split", {F32({10})}, Attrs().Ints("sizes", {3, 7})), "f32[3] f32[7]");
  EXPECT_THAT(Out("split", {F32({10})}, Attrs().Ints("sizes", {3, 6})), HasSubstr("add up to 9, not 10"));
  EXPECT_EQ(Out("chunk", {F32({2, 10})}, Attrs().Int("chunks", 3).Int("dim", 1)), "f32[2,4] f32[2,4] f32[2,2]");
  EXPECT_EQ(Out("chunk", {F32({6})}, Attrs().Int("chunks", 4)), "f32[2] f32[2] f32[2]");  // torch gives 3 pieces
  // A zero-size dim: at::chunk gives `chunks` empty pieces (torch.zeros(2,0).chunk(3, dim=1) is
  // three [2,0] tensors in LibTorch 1.13), while split gives one.
  EXPECT_EQ(Out("chunk", {F32({2, 0})}, Attrs().Int("chunks", 3).Int("dim", 1)), "f32[2,0] f32[2,0] f32[2,0]");
  EXPECT_EQ(Out("chunk", {F32({0, 4})}, Attrs().Int("chunks", 2)), "f32[0,4] f32[0,4]");
  EXPECT_EQ(Out("chunk", {F32({2, 0})}, Attrs().Int("chunks", 1).Int("dim", 1)), "f32[2,0]");
  EXPECT_EQ(Out("split", {F32({2, 0})}, Attrs().Int("split_size", 2).Int("dim", 1)), "f32[2,0]");
  EXPECT_EQ(Out("cat", {F32({2, 3}), F32({2, 5})}, Attrs().Int("dim", 1)), "f32[2,8]");
  EXPECT_THAT(Out("cat", {F32({2, 3}), F32({3, 5})}, Attrs().Int("dim", 1)), HasSubstr("outside dimension 1"));
  EXPECT_EQ(Out("stack", {F32({2, 3}), F32({2, 3}), F32({2, 3})}, Attrs().Int("dim", 1)), "f32[2,3,3]");
  EXPECT_THAT(Out("stack", {F32({2, 3}), F32({2, 4})}), HasSubstr("differs in shape"));
}

}  // namespace
}  // namespace mapd

// WorstBlockDifference: each rank's final block against the same block of one device's tensor.
#include "worker/dist/reference_check.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "worker/runtime/parameters.h"

namespace mapd {
namespace {

// Rank r of 2 holds rows [2r, 2r + 2) of a [4, 3] weight.
v1::RankProgram Program(int rank) {
  v1::RankProgram p;
  p.set_rank(rank);
  p.add_mesh(2);
  v1::Shard* s = p.add_parameters();
  s->set_name("w");
  s->set_placement("S(0)");
  s->mutable_local_type()->set_dtype(v1::FLOAT32);
  s->mutable_local_type()->add_shape(2);
  s->mutable_local_type()->add_shape(3);
  s->mutable_offsets()->add_start(2 * rank);
  s->mutable_offsets()->add_start(0);
  return p;
}

v1::RankCheckpoint Final(int rank, const at::Tensor& block) {
  v1::RankCheckpoint c;
  c.set_rank(rank);
  *c.add_parameters() = TensorToProto("w", block);
  return c;
}

TEST(ReferenceCheck, EqualBlocksDifferByNothingAndAChangedOneIsFound) {
  const at::Tensor w = at::arange(12, at::kFloat).reshape({4, 3}) * 0.5;
  const std::vector<v1::TensorData> reference = {TensorToProto("w", w)};
  const std::vector<v1::RankProgram> programs = {Program(0), Program(1)};
  auto same = WorstBlockDifference(programs, {Final(0, w.narrow(0, 0, 2)), Final(1, w.narrow(0, 2, 2))}, reference);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(same->blocks, 2);
  EXPECT_EQ(same->relative, 0);

  at::Tensor changed = w.narrow(0, 2, 2).clone();
  changed[1][2] += 0.011;  // the largest value of the block is 5.5
  auto diff = WorstBlockDifference(programs, {Final(0, w.narrow(0, 0, 2)), Final(1, changed)}, reference);
  ASSERT_TRUE(diff.ok()) << diff.status();
  EXPECT_EQ(diff->rank, 1);
  EXPECT_EQ(diff->parameter, "w");
  EXPECT_NEAR(diff->relative, 0.011 / 5.5, 1e-6);
  // The wrong block (rank 0's rows as rank 1's) is a difference too.
  auto swapped = WorstBlockDifference(programs, {Final(0, w.narrow(0, 2, 2)), Final(1, w.narrow(0, 2, 2))}, reference);
  ASSERT_TRUE(swapped.ok());
  EXPECT_GT(swapped->relative, 0.5);
  EXPECT_EQ(swapped->rank, 0);
}

TEST(ReferenceCheck, BlocksThatDoNotFitAreErrors) {
  const at::Tensor w = at::zeros({4, 3});
  const std::vector<v1::RankProgram> programs = {Program(0), Program(1)};
  auto unknown = WorstBlockDifference(programs, {Final(0, w.narrow(0, 0, 2)), Final(1, w.narrow(0, 2, 2))},
                                      {TensorToProto("v", w)});
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("'w'"), std::string::npos) << unknown.status();
  auto too_big = WorstBlockDifference(programs, {Final(0, w.narrow(0, 0, 2)), Final(1, at::zeros({3, 3}))},
                                      {TensorToProto("w", w)});
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kInvalidArgument);
  auto count = WorstBlockDifference(programs, {Final(0, w)}, {TensorToProto("w", w)});
  EXPECT_EQ(count.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mapd

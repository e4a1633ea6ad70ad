// WorstBlockDifference: each rank's final block against the same block of one device's tensor
// (no LibTorch: blocks are the raw bytes ranks write).
#include "worker/rank/reference_check.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

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

// A row-major float tensor as ranks write it.
struct Floats {
  std::vector<int64_t> shape;
  std::vector<float> values;
  Floats Rows(int64_t from, int64_t count) const {  // rows [from, from + count)
    const int64_t row = values.size() / shape[0];
    return {{count, shape[1]}, std::vector<float>(values.begin() + from * row, values.begin() + (from + count) * row)};
  }
};

v1::TensorData Data(const std::string& name, const Floats& t) {
  v1::TensorData d;
  d.set_name(name);
  d.mutable_type()->set_dtype(v1::FLOAT32);
  for (int64_t s : t.shape) d.mutable_type()->add_shape(s);
  d.set_data(std::string(reinterpret_cast<const char*>(t.values.data()), t.values.size() * sizeof(float)));
  return d;
}

v1::RankCheckpoint Final(int rank, const Floats& block) {
  v1::RankCheckpoint c;
  c.set_rank(rank);
  *c.add_parameters() = Data("w", block);
  return c;
}

Floats Weight() {  // [4, 3]: 0, 0.5, ..., 5.5
  Floats w{{4, 3}, {}};
  for (int i = 0; i < 12; ++i) w.values.push_back(0.5f * i);
  return w;
}

TEST(ReferenceCheck, EqualBlocksDifferByNothingAndAChangedOneIsFound) {
  const Floats w = Weight();
  const std::vector<v1::TensorData> reference = {Data("w", w)};
  const std::vector<v1::RankProgram> programs = {Program(0), Program(1)};
  auto same = WorstBlockDifference(programs, {Final(0, w.Rows(0, 2)), Final(1, w.Rows(2, 2))}, reference);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(same->blocks, 2);
  EXPECT_EQ(same->relative, 0);

  Floats changed = w.Rows(2, 2);
  changed.values[5] += 0.011f;  // [1][2]; the largest value of the block is 5.5
  auto diff = WorstBlockDifference(programs, {Final(0, w.Rows(0, 2)), Final(1, changed)}, reference);
  ASSERT_TRUE(diff.ok()) << diff.status();
  EXPECT_EQ(diff->rank, 1);
  EXPECT_EQ(diff->parameter, "w");
  EXPECT_NEAR(diff->relative, 0.011 / 5.5, 1e-6);
  // The wrong block (rank 0's rows as rank 1's) is a difference too.
  auto swapped = WorstBlockDifference(programs, {Final(0, w.Rows(2, 2)), Final(1, w.Rows(2, 2))}, reference);
  ASSERT_TRUE(swapped.ok());
  EXPECT_GT(swapped->relative, 0.5);
  EXPECT_EQ(swapped->rank, 0);
}

TEST(ReferenceCheck, BlocksThatDoNotFitAreErrors) {
  const Floats w{{4, 3}, std::vector<float>(12, 0.f)};
  const std::vector<v1::RankProgram> programs = {Program(0), Program(1)};
  auto unknown = WorstBlockDifference(programs, {Final(0, w.Rows(0, 2)), Final(1, w.Rows(2, 2))}, {Data("v", w)});
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("'w'"), std::string::npos) << unknown.status();
  auto too_big = WorstBlockDifference(programs, {Final(0, w.Rows(0, 2)), Final(1, w.Rows(1, 3))}, {Data("w", w)});
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kInvalidArgument);
  auto count = WorstBlockDifference(programs, {Final(0, w)}, {Data("w", w)});
  EXPECT_EQ(count.status().code(), absl::StatusCode::kInvalidArgument);
  v1::TensorData short_data = Data("w", w);
  short_data.mutable_data()->resize(10);  // not [4, 3] of float32
  EXPECT_EQ(WorstBlockDifference(programs, {Final(0, w.Rows(0, 2)), Final(1, w.Rows(2, 2))}, {short_data}).status().code(),
            absl::StatusCode::kDataLoss);
}

// Adam's noise: an element whose one-device second moment is tiny beside its tensor's is
// compared against the absolute allowance and counted apart; the same difference where the
// gradient is real fails the strict measure; and past the allowance it is reported.
TEST(ReferenceCheck, NoiseDrivenElementsAreComparedWithinTheirAllowance) {
  const Floats w = Weight();
  const std::vector<v1::TensorData> reference = {Data("w", w)};
  const std::vector<v1::RankProgram> programs = {Program(0), Program(1)};
  Floats changed = w.Rows(2, 2);
  changed.values[5] += 0.011f;  // element [3][2]
  Floats moments{{4, 3}, std::vector<float>(12, 1e-4f)};
  NoiseModel noise;
  noise.tolerance = 0.02;  // 2 x lr 1e-3 x 10 steps
  // A real gradient there: the strict measure finds it.
  noise.second_moments = {Data("w", moments)};
  auto real = WorstBlockDifference(programs, {Final(0, w.Rows(0, 2)), Final(1, changed)}, reference, &noise);
  ASSERT_TRUE(real.ok()) << real.status();
  EXPECT_NEAR(real->relative, 0.011 / 5.5, 1e-6);
  EXPECT_EQ(real->noise_elements, 0);
  // A gradient of rounding noise there (second moment 1e-14, under 1e-8 of the tensor's 1e-4).
  moments.values[11] = 1e-14f;
  noise.second_moments = {Data("w", moments)};
  auto noisy = WorstBlockDifference(programs, {Final(0, w.Rows(0, 2)), Final(1, changed)}, reference, &noise);
  ASSERT_TRUE(noisy.ok()) << noisy.status();
  EXPECT_EQ(noisy->relative, 0);
  EXPECT_EQ(noisy->noise_elements, 1);
  EXPECT_NEAR(noisy->noise_difference, 0.011, 1e-6);
  EXPECT_EQ(noisy->noise_parameter, "w");
  // A whole tensor of noise is found against the model's largest second moment.
  NoiseModel two = noise;
  two.second_moments = {Data("w", Floats{{4, 3}, std::vector<float>(12, 1e-20f)}), Data("big", Floats{{1}, {1.0f}})};
  auto whole = WorstBlockDifference(programs, {Final(0, w.Rows(0, 2)), Final(1, changed)},
                                    {Data("w", w), Data("big", Floats{{1}, {0.f}})}, &two);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->noise_elements, 12);
  // A second moment of another shape is an error; so is a negative allowance.
  noise.second_moments = {Data("w", w.Rows(0, 2))};
  EXPECT_EQ(WorstBlockDifference(programs, {Final(0, w.Rows(0, 2)), Final(1, changed)}, reference, &noise).status().code(),
            absl::StatusCode::kInvalidArgument);
  noise.second_moments = {Data("w", moments)};
  noise.tolerance = -1;
  EXPECT_EQ(WorstBlockDifference(programs, {Final(0, w.Rows(0, 2)), Final(1, changed)}, reference, &noise).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ReferenceCheck, SixteenBitBlocksAreDecoded) {
  // bf16 1.5 is 0x3FC0; f16 1.5 is 0x3E00: the same value in both, no difference.
  v1::RankProgram p = Program(0);
  p.mutable_parameters(0)->mutable_local_type()->clear_shape();
  p.mutable_parameters(0)->mutable_local_type()->add_shape(1);
  p.mutable_parameters(0)->mutable_offsets()->Clear();
  p.mutable_parameters(0)->mutable_offsets()->add_start(0);
  auto one = [](v1::DType dtype, uint16_t bits) {
    v1::TensorData d;
    d.set_name("w");
    d.mutable_type()->set_dtype(dtype);
    d.mutable_type()->add_shape(1);
    d.set_data(std::string(reinterpret_cast<const char*>(&bits), 2));
    return d;
  };
  v1::RankCheckpoint c;
  *c.add_parameters() = one(v1::BFLOAT16, 0x3FC0);
  auto same = WorstBlockDifference({p}, {c}, {one(v1::FLOAT16, 0x3E00)});
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(same->relative, 0);
  *c.mutable_parameters(0) = one(v1::BFLOAT16, 0x4000);  // 2.0
  EXPECT_DOUBLE_EQ(WorstBlockDifference({p}, {c}, {one(v1::FLOAT16, 0x3E00)})->relative, 0.5 / 1.5);
}

}  // namespace
}  // namespace mapd

// ParseEinsum: labels per operand and output, the ellipsis, the implicit output, refusals.
#include "model/import/einsum.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace mapd {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(EinsumTest, ExplicitImplicitAndEllipsis) {
  auto e = ParseEinsum("bhqd, bhkd -> bhqk", {4, 4});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_THAT(e->operands, ElementsAre("bhqd", "bhkd"));
  EXPECT_EQ(e->output, "bhqk");
  // Implicit output: the labels used once, sorted.
  e = ParseEinsum("ij,jk", {2, 2});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->output, "ik");
  // The ellipsis stands for the leading dimensions, right-aligned across operands, and leads
  // an implicit output.
  e = ParseEinsum("...nd,hde->...hne", {4, 3});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->operands[0].substr(2), "nd");
  EXPECT_EQ(e->output, e->operands[0].substr(0, 2) + "hne");
  e = ParseEinsum("...ij,...jk", {3, 2});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->operands[0].size(), 3u);
  EXPECT_EQ(e->output.substr(1), "ik");
}

TEST(EinsumTest, RefusalsNameTheEquation) {
  EXPECT_THAT(ParseEinsum("ij,jk->ik", {2}).status().message(), HasSubstr("names 2 operands, 1 are given"));
  EXPECT_THAT(ParseEinsum("ijk->ik", {2}).status().message(), HasSubstr("has rank 2 but 3 labels"));
  EXPECT_THAT(ParseEinsum("ii->i", {2}).status().message(), HasSubstr("diagonal"));
  EXPECT_THAT(ParseEinsum("ij->iz", {2}).status().message(), HasSubstr("output label 'z' is in no operand"));
  EXPECT_THAT(ParseEinsum("i1->i", {2}).status().message(), HasSubstr("not a letter"));
}

}  // namespace
}  // namespace mapd

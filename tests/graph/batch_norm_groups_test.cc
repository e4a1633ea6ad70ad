// Batch norm over groups of the batch (model/graph/batch_norm_groups.h): what the transform
// sets, that the result verifies (every type inferred again agrees), where the running
// statistics go, and its refusals.
#include "model/graph/batch_norm_groups.h"

#include <google/protobuf/util/message_differencer.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "model/graph/loss.h"
#include "model/graph/verifier.h"
#include "model/zoo/zoo.h"

namespace mapd {
namespace {

using ::testing::HasSubstr;

v1::Graph ResNetTraining(int batch) {
  auto built = BuildZooModel("resnet50:image=32,batch=" + std::to_string(batch) + ",classes=10");
  EXPECT_TRUE(built.ok()) << built.status();
  auto g = WithTrainingLoss(*std::move(built), LossKind::kAuto);
  EXPECT_TRUE(g.ok()) << g.status();
  return *g;
}

int CountBatchNorms(const v1::Graph& graph) {
  int n = 0;
  for (const v1::Node& node : graph.nodes()) n += node.op() == "batch_norm_stats" ? 1 : 0;
  return n;
}

TEST(BatchNormGroups, EveryBatchNormOverTheGroupsAndTheRunningStatisticsLast) {
  const v1::Graph whole = ResNetTraining(8);
  const int batch_norms = CountBatchNorms(whole);
  ASSERT_GT(batch_norms, 10);
  auto grouped = GroupBatchNorms(whole, 4);
  ASSERT_TRUE(grouped.ok()) << grouped.status();
  auto verified = MakeVerifiedGraph(*grouped);
  ASSERT_TRUE(verified.ok()) << verified.status();
  int stats = 0, applies = 0, sums = 0;
  bool running_seen = false;
  for (const v1::Node& n : grouped->nodes()) {
    if (n.op() == "batch_norm_stats") {
      EXPECT_EQ(n.attrs().at("group_size").i(), 2) << n.name();
      EXPECT_EQ(verified->TypeOf(n.outputs(0)).shape[0], 4) << n.name();
      ++stats;
    }
    if (n.op() == "batch_norm_apply") {
      const auto& x = verified->TypeOf(n.inputs(0)).shape;
      EXPECT_EQ(n.attrs().at("count").i(), 2 * x[2] * x[3]) << n.name();  // one group's values per channel
      ++applies;
    }
    if (n.op() == "sum") ++sums;
    // The running statistics (and the sums of their groups) come after every other node.
    if (n.op() == "batch_norm_running_stats") running_seen = true;
    if (running_seen) EXPECT_TRUE(n.op() == "sum" || n.op() == "batch_norm_running_stats") << n.name() << " " << n.op();
  }
  EXPECT_EQ(stats, batch_norms);
  EXPECT_EQ(applies, batch_norms);
  EXPECT_EQ(sums, batch_norms);
  EXPECT_EQ(grouped->buffer_updates_size(), whole.buffer_updates_size());
  EXPECT_EQ(grouped->metadata().at("batch_norm_groups"), "4");
}

TEST(BatchNormGroups, OneGroupIsTheGraphAndBadCountsAreRefused) {
  const v1::Graph whole = ResNetTraining(6);
  auto one = GroupBatchNorms(whole, 1);
  ASSERT_TRUE(one.ok());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*one, whole));
  EXPECT_THAT(GroupBatchNorms(whole, 4).status().message(),
              HasSubstr("4 groups do not divide its batch of 6; give a batch that the ranks divide, or --batch-norm sync"));
  EXPECT_THAT(GroupBatchNorms(whole, 0).status().message(), HasSubstr("at least 1"));
  auto twice = GroupBatchNorms(*GroupBatchNorms(whole, 2), 3);
  EXPECT_THAT(twice.status().message(), HasSubstr("already over groups"));
}

}  // namespace
}  // namespace mapd

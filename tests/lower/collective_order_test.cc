// VerifyCollectiveOrder (planner/lower/collective_order.h): the programs a plan lowers to agree,
// and a program broken on purpose — two collectives swapped, one dropped, a kind changed — is
// rejected before it could deadlock a run.
#include "planner/lower/collective_order.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <utility>

#include "planner/lower/lowering.h"
#include "planner/plan/planner.h"
#include "tests/common/zoo_training_graph.h"

namespace mapd {
namespace {

using ::testing::HasSubstr;

// Megatron TP=2 x DP=2's programs: all-reduces, all-gathers and GRAD_SYNCs on both axes.
std::vector<v1::RankProgram> Lower(const Graph& g, const std::vector<int64_t>& mesh) {
  PlannerOptions o;
  o.cluster.mesh = mesh;
  o.cluster.device_type = "h100-80g";
  o.zero_stage = 0;
  auto r = SearchPlan(g, o);
  EXPECT_TRUE(r.ok()) << r.status();
  const PlanCandidate* megatron = nullptr;
  for (const auto& b : r->baselines) {
    if (b.name == "Megatron TP=2 x DP=2") megatron = &b;
  }
  EXPECT_NE(megatron, nullptr);
  std::vector<v1::RankProgram> programs;
  for (int rank = 0; rank < 4; ++rank) {
    auto p = LowerForRank(g, megatron->mesh, megatron->strategies, rank, 0);
    EXPECT_TRUE(p.ok()) << p.status();
    programs.push_back(*p);
  }
  return programs;
}

// The indices of rank `p`'s Communicate steps.
std::vector<int> Collectives(const v1::RankProgram& p) {
  std::vector<int> out;
  for (int i = 0; i < p.instructions_size(); ++i) {
    if (p.instructions(i).has_communicate()) out.push_back(i);
  }
  return out;
}

TEST(CollectiveOrder, LoweredPlansAgreeAndBrokenProgramsAreRejected) {
  const Graph g = ZooTrainingGraph("gpt2:layers=2,hidden=256,heads=4,vocab=512,seq=64,batch=2");
  const std::vector<int64_t> mesh = {2, 2};
  std::vector<v1::RankProgram> programs = Lower(g, mesh);
  ASSERT_TRUE(VerifyCollectiveOrder(programs, mesh).ok()) << VerifyCollectiveOrder(programs, mesh);
  // Two different collectives of rank 3 swapped.
  std::vector<int> steps = Collectives(programs[3]);
  ASSERT_GE(steps.size(), 2u);
  // Two collectives on one axis that differ (in kind or shape).
  int first = -1, second = -1;
  for (size_t i = 0; i < steps.size() && first < 0; ++i) {
    for (size_t j = i + 1; j < steps.size(); ++j) {
      const v1::Communicate& a = programs[3].instructions(steps[i]).communicate();
      const v1::Communicate& b = programs[3].instructions(steps[j]).communicate();
      if (a.axis() == b.axis() && (a.kind() != b.kind() || a.output_type().SerializeAsString() != b.output_type().SerializeAsString())) {
        first = steps[i];
        second = steps[j];
        break;
      }
    }
  }
  ASSERT_GE(first, 0) << "no two different collectives on one axis to swap";
  std::vector<v1::RankProgram> swapped = programs;
  std::swap(*swapped[3].mutable_instructions(first), *swapped[3].mutable_instructions(second));
  absl::Status st = VerifyCollectiveOrder(swapped, mesh);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(st.message()), HasSubstr("and 3 of a group on mesh axis"));
  EXPECT_THAT(std::string(st.message()), HasSubstr("would deadlock"));
  // One dropped.
  std::vector<v1::RankProgram> dropped = programs;
  dropped[1].mutable_instructions()->DeleteSubrange(Collectives(dropped[1]).back(), 1);
  EXPECT_THAT(std::string(VerifyCollectiveOrder(dropped, mesh).message()), HasSubstr("against nothing"));
  // Another step-end collective: the loss reduced over another axis.
  std::vector<v1::RankProgram> loss = programs;
  loss[2].add_loss_partial_axes(1);
  EXPECT_THAT(std::string(VerifyCollectiveOrder(loss, mesh).message()), HasSubstr("ranks 0 and 2 would end their steps"));
  EXPECT_EQ(VerifyCollectiveOrder({programs[0]}, mesh).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mapd

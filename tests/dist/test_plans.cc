#include "tests/dist/test_plans.h"

#include <gtest/gtest.h>

#include "planner/graph/loss.h"
#include "planner/graph/verifier.h"
#include "planner/plan/planner.h"
#include "planner/zoo/zoo.h"

namespace mapd {

Graph TrainingGraph(const std::string& spec) {
  auto trainable = WithTrainingLoss(*BuildZooModel(spec), LossKind::kAuto);
  EXPECT_TRUE(trainable.ok()) << trainable.status();
  auto g = MakeVerifiedGraph(*std::move(trainable));
  EXPECT_TRUE(g.ok()) << g.status();
  return *g;
}

std::vector<Strategy> PlanStrategies(const Graph& graph, const std::vector<int64_t>& mesh, const std::string& family) {
  PlannerOptions o;
  o.cluster.mesh = mesh;
  o.zero_stage = 0;
  auto r = SearchPlan(graph, o);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {};
  if (family == "MAP") return r->plan.strategies;
  for (const auto& b : r->baselines) {
    if (b.name != family) continue;
    EXPECT_TRUE(b.applicable) << family << ": " << b.note;
    return b.strategies;
  }
  ADD_FAILURE() << "no baseline " << family;
  return {};
}

}  // namespace mapd

#include "tests/dist/test_plans.h"

#include <gtest/gtest.h>

#include "planner/graph/builder.h"
#include "planner/graph/loss.h"
#include "planner/graph/verifier.h"
#include "planner/plan/planner.h"
#include "planner/zoo/zoo.h"

namespace mapd {


Graph DropoutMlpGraph() {
  GraphBuilder b("dropout_mlp");
  auto x = b.Input("x", {v1::FLOAT32, {8, 16}}, "features");
  auto labels = b.Input("labels", {v1::INT64, {8}}, "labels");
  v1::InitRule init;
  init.set_kind(v1::InitRule::KAIMING_UNIFORM);
  init.set_fan_in(16);
  auto w1 = b.Param("fc1.weight", {v1::FLOAT32, {64, 16}}, init);
  init.set_fan_in(64);
  auto w2 = b.Param("fc2.weight", {v1::FLOAT32, {8, 64}}, init);
  auto h = b.Op("relu", {b.Op("linear", {x, w1})});
  auto d = b.Op("dropout", {h}, Attrs().Float("p", 0.25));
  b.Output(b.Op("cross_entropy", {b.Op("linear", {d, w2}), labels}));
  auto g = MakeVerifiedGraph(*b.Build());
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

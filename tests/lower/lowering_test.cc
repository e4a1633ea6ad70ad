// Lowering plans to rank programs: blocks of parameters and inputs, the communication inserted
// between producers and consumers, gradient syncs for data parallelism, local view targets,
// scaled means, and re-layouts through a dimension split by two axes.
#include "planner/lower/lowering.h"

#include <gtest/gtest.h>

#include <numeric>

#include "model/graph/builder.h"
#include "model/graph/loss.h"
#include "model/graph/verifier.h"
#include "planner/plan/planner.h"
#include "model/zoo/zoo.h"
#include "tests/common/mlp_graph.h"
#include "tests/common/zoo_training_graph.h"

namespace mapd {
namespace {

Graph Mlp(int64_t batch, int64_t hidden, int64_t ffn, int64_t classes) {
  return TwoLayerMlp(batch, hidden, ffn, classes);
}

PlanResult Plan(const Graph& g, std::vector<int64_t> mesh) {
  PlannerOptions o;
  o.cluster.mesh = mesh;
  o.cluster.device_type = "h100-80g";
  o.zero_stage = 0;
  o.baselines = false;
  auto r = SearchPlan(g, o);
  EXPECT_TRUE(r.ok()) << r.status();
  return *r;
}

int Count(const v1::RankProgram& p, v1::Communicate::Kind kind) {
  int n = 0;
  for (const auto& i : p.instructions()) n += i.has_communicate() && i.communicate().kind() == kind;
  return n;
}

const v1::Shard* Param(const v1::RankProgram& p, const std::string& name) {
  for (const auto& s : p.parameters()) {
    if (s.name() == name) return &s;
  }
  return nullptr;
}

TEST(Lowering, CoordinatesAndBlocks) {
  EXPECT_EQ(RankCoords({2, 3}, 4), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(RankCoords({4}, 3), (std::vector<int64_t>{3}));
  // A dimension split by both axes: the first axis is outermost (block = c0 * n1 + c1).
  auto p = ParsePlacement("S(0)S(0)");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*BlockStart({8, 3}, *p, {2, 2}, {1, 0}), (std::vector<int64_t>{4, 0}));
  EXPECT_EQ(*BlockStart({8, 3}, *p, {2, 2}, {0, 1}), (std::vector<int64_t>{2, 0}));
  EXPECT_EQ(*BlockStart({8, 3}, *ParsePlacement("RS(1)"), {2, 3}, {1, 2}), (std::vector<int64_t>{0, 2}));
}

TEST(Lowering, MegatronMlpHasOneAllReduceAndShardedWeights) {
  const Graph g = Mlp(/*batch=*/4, /*hidden=*/8192, /*ffn=*/32768, /*classes=*/10);
  // 8 devices: batch 4 and 10 classes do not split, so fc2's partial output is all-reduced.
  const PlanResult r = Plan(g, {8});
  for (int rank = 0; rank < 8; rank += 7) {
    auto p = LowerForRank(g, {8}, r.plan.strategies, rank);
    ASSERT_TRUE(p.ok()) << p.status();
    const v1::Shard* w1 = Param(*p, "fc1.weight");
    const v1::Shard* w2 = Param(*p, "fc2.weight");
    ASSERT_TRUE(w1 && w2);
    EXPECT_EQ(w1->placement(), "S(0)");
    EXPECT_EQ(w1->local_type().shape(0), 4096);
    EXPECT_EQ(w1->offsets().start(0), rank * 4096);
    EXPECT_EQ(w2->placement(), "S(1)");
    EXPECT_EQ(w2->offsets().start(1), rank * 4096);
    EXPECT_EQ(Count(*p, v1::Communicate::ALL_REDUCE), 1);  // fc2's partial output, once
    EXPECT_EQ(Count(*p, v1::Communicate::GRAD_SYNC), 0);   // no replicated weight feeds split work
    EXPECT_EQ(p->loss_partial_axes_size(), 0);
  }
}

TEST(Lowering, DataParallelSlicesTheBatchAndSyncsEveryWeightGradient) {
  const Graph g = Mlp(/*batch=*/65536, /*hidden=*/64, /*ffn=*/256, /*classes=*/8);
  const PlanResult r = Plan(g, {4});
  auto p = LowerForRank(g, {4}, r.plan.strategies, 3);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->inputs_size(), 2);
  EXPECT_EQ(p->inputs(0).placement(), "S(0)");
  EXPECT_EQ(p->inputs(0).offsets().start(0), 3 * 16384);
  EXPECT_EQ(Param(*p, "fc1.weight")->placement(), "R");
  // fc1.weight, fc1.bias, fc2.weight: each all-reduced in backward.
  EXPECT_EQ(Count(*p, v1::Communicate::GRAD_SYNC), 3);
  // The loss is a mean over the split batch: a Partial scaled by 1/4.
  ASSERT_EQ(p->loss_partial_axes_size(), 1);
  const auto& last = p->instructions(p->instructions_size() - 1);
  ASSERT_TRUE(last.has_compute());
  EXPECT_EQ(g.node(last.compute().node()).op(), "cross_entropy");
  EXPECT_DOUBLE_EQ(last.compute().output_scale(), 0.25);
}

TEST(Lowering, EveryRankOfA2x2PlanGetsLocalShapesAndLocalViewTargets) {
  const Graph g = ZooTrainingGraph("gpt2:layers=2,hidden=64,heads=4,vocab=128,seq=16,batch=4");
  const PlanResult r = Plan(g, {2, 2});
  for (int rank = 0; rank < 4; ++rank) {
    auto p = LowerForRank(g, {2, 2}, r.plan.strategies, rank);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->coords(0) * 2 + p->coords(1), rank);
    int views = 0;
    for (const auto& i : p->instructions()) {
      if (!i.has_compute()) continue;
      const auto& c = i.compute();
      ASSERT_EQ(c.output_types_size(), g.node(c.node()).outputs_size());
      // One block start per output, one entry per dimension.
      ASSERT_EQ(c.output_offsets_size(), c.output_types_size());
      for (int o = 0; o < c.output_types_size(); ++o) {
        EXPECT_EQ(c.output_offsets(o).start_size(), c.output_types(o).shape_size()) << g.node(c.node()).name();
      }
      auto it = c.attrs().find("shape");
      const std::string& op = g.node(c.node()).op();
      if (it == c.attrs().end() || (op != "reshape" && op != "view")) continue;
      ++views;
      int64_t target = 1, local = 1;
      for (int64_t d : it->second.ints().values()) target *= d;
      for (int64_t d : c.output_types(0).shape()) local *= d;
      EXPECT_EQ(target, local) << g.node(c.node()).name();
    }
    EXPECT_GT(views, 0);
  }
}

TEST(Lowering, ReLayoutThroughATwoAxisSplitGathersAndSlices) {
  // x → relu (held R S(0)) → relu (wants S(0) R): going axis by axis would pass through
  // S(0)S(0) in the wrong block order, so the value is gathered and sliced again.
  GraphBuilder b("relus");
  auto x = b.Input("x", {v1::FLOAT32, {8, 4}}, "x");
  auto h = b.Op("relu", {x});
  b.Output(b.Op("relu", {h}));
  auto g = MakeVerifiedGraph(*b.Build());
  ASSERT_TRUE(g.ok());
  Strategy first, second;
  first.axis_label = {0, 'a'};
  first.inputs = {*ParsePlacement("RS(0)")};
  first.outputs = {*ParsePlacement("RS(0)")};
  second.axis_label = {'a', 0};
  second.inputs = {*ParsePlacement("S(0)R")};
  second.outputs = {*ParsePlacement("S(0)R")};
  auto p = LowerForRank(*g, {2, 2}, {first, second}, 2);
  ASSERT_TRUE(p.ok()) << p.status();
  std::vector<std::string> steps;
  for (const auto& i : p->instructions()) {
    if (i.has_communicate()) steps.push_back(v1::Communicate::Kind_Name(i.communicate().kind()) + "@" + std::to_string(i.communicate().axis()));
  }
  EXPECT_EQ(steps, (std::vector<std::string>{"ALL_GATHER@1", "SLICE@0"}));
}

TEST(Lowering, SavedPlansGiveBackTheirStrategies) {
  const Graph g = Mlp(8, 64, 256, 8);
  PlannerOptions o;
  o.cluster.mesh = {2, 2};
  o.baselines = false;
  auto r = SearchPlan(g, o);
  ASSERT_TRUE(r.ok());
  auto back = StrategiesFromPlan(ToPlanProto(g, *r, o), g);
  ASSERT_TRUE(back.ok()) << back.status();
  for (int n = 0; n < g.num_nodes(); ++n) {
    EXPECT_EQ((*back)[n].PlacementsString(), r->plan.strategies[n].PlacementsString());
    EXPECT_EQ((*back)[n].axis_label, r->plan.strategies[n].axis_label);
  }
  EXPECT_EQ(LowerForRank(g, {2, 2}, *back, 4).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mapd

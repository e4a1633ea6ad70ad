// Known answers of the planner's cost graph + ILP on a two-layer MLP: a large hidden size and a
// tiny batch get Megatron's column-then-row split; a huge batch and a small hidden size get data
// parallelism.
#include "planner/plan/cost_graph.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "model/graph/builder.h"
#include "model/graph/verifier.h"
#include "planner/plan/baselines.h"
#include "planner/plan/batch_dims.h"
#include "planner/plan/folded_bound.h"
#include "planner/plan/prepared_graph.h"
#include "planner/plan/recompute_groups.h"
#include "planner/solver/strategy_solver.h"
#include "model/zoo/zoo.h"
#include "tests/common/mlp_graph.h"

namespace mapd {
namespace {

Graph Mlp(int64_t batch, int64_t hidden, int64_t ffn, int64_t classes) {
  return TwoLayerMlp(batch, hidden, ffn, classes);
}

Cluster EightH100() {
  ClusterOptions o;
  o.devices = 8;
  o.device_type = "h100-80g";
  return *MakeCluster(o);
}

// H100s in the mesh `mesh`.
Cluster H100Mesh(const std::vector<int64_t>& mesh) {
  ClusterOptions o;
  o.mesh = mesh;
  o.device_type = "h100-80g";
  return *MakeCluster(o);
}

struct Choice {
  std::string fc1_weight, fc2_weight, x;
  ChoiceCost cost;
};

Choice Plan(const Graph& g, const Cluster& c) {
  auto cg = BuildCostGraph(g, c, ProfileOptions());
  EXPECT_TRUE(cg.ok()) << cg.status();
  auto resp = SolveStrategies(cg->SolverRequest());
  EXPECT_TRUE(resp.ok()) << resp.status();
  EXPECT_EQ(resp->status(), v1::SolverResponse::OPTIMAL);
  const Strategy& fc1 = cg->strategies[0][resp->choice(0)];
  const Strategy& fc2 = cg->strategies[2][resp->choice(2)];
  auto cost = CostChoice(g, c, *cg, std::vector<int>(resp->choice().begin(), resp->choice().end()));
  EXPECT_TRUE(cost.ok()) << cost.status();
  return {PlacementToString(fc1.inputs[1]), PlacementToString(fc2.inputs[1]), PlacementToString(fc1.inputs[0]), *cost};
}

TEST(CostGraph, LargeHiddenTinyBatchIsMegatron) {
  // Batch 4 and 10 classes divide over no 8-device axis, so fc2's partial output cannot be
  // reduce-scattered instead (with batch 8 MAP reduce-scatters it along the batch: half the
  // traffic of Megatron's all-reduce).
  const Choice c = Plan(Mlp(/*batch=*/4, /*hidden=*/8192, /*ffn=*/32768, /*classes=*/10), EightH100());
  EXPECT_EQ(c.fc1_weight, "S(0)");  // column-parallel: output features split
  EXPECT_EQ(c.fc2_weight, "S(1)");  // row-parallel: input features split, output partial
  EXPECT_EQ(c.x, "R");
  // One all-reduce: fc2's partial output [4, 10] in f32, summed once; nothing else moves.
  EXPECT_EQ(c.cost.comm_bytes[static_cast<int>(CollectiveKind::kAllReduce)], 4 * 10 * 4);
  EXPECT_EQ(c.cost.comm_bytes[static_cast<int>(CollectiveKind::kAllGather)], 0);
  EXPECT_EQ(c.cost.comm_bytes[static_cast<int>(CollectiveKind::kReduceScatter)], 0);
  EXPECT_EQ(c.cost.comm_bytes[static_cast<int>(CollectiveKind::kAllToAll)], 0);
}

TEST(CostGraph, HugeBatchSmallHiddenIsDataParallel) {
  const Choice c = Plan(Mlp(/*batch=*/65536, /*hidden=*/64, /*ffn=*/256, /*classes=*/8), EightH100());
  EXPECT_EQ(c.fc1_weight, "R");
  EXPECT_EQ(c.fc2_weight, "R");
  EXPECT_EQ(c.x, "S(0)");  // batch split
}

TEST(CostGraph, ZooModelsBuildAndSolve) {
  for (const char* spec : {"gpt2:layers=2,hidden=256,heads=8,vocab=1024,seq=128,batch=8",
                           "llama2-7b:layers=2,hidden=256,heads=8,kv_heads=2,ffn=688,vocab=1024,seq=128,batch=8"}) {
    SCOPED_TRACE(spec);
    auto g = MakeVerifiedGraph(*BuildZooModel(spec));
    ASSERT_TRUE(g.ok());
    auto cg = BuildCostGraph(*g, EightH100(), ProfileOptions());
    ASSERT_TRUE(cg.ok()) << cg.status();
    EXPECT_EQ(static_cast<int>(cg->costs.size()), g->num_nodes());
    auto resp = SolveStrategies(cg->SolverRequest());
    ASSERT_TRUE(resp.ok()) << resp.status();
    EXPECT_NE(resp->status(), v1::SolverResponse::INFEASIBLE);
    EXPECT_GT(resp->objective(), 0);
    // The plan is never slower than keeping everything replicated (strategy 0 everywhere).
    std::vector<int> replicated(static_cast<int>(cg->costs.size()), 0);
    EXPECT_LE(resp->objective(), ObjectiveOf(cg->SolverRequest(), replicated) + 1e-12);
  }
}

}  // namespace
}  // namespace mapd

namespace mapd {
namespace {

TEST(CostGraph, RepeatedLayersFoldIntoOneDecisionEach) {
  auto g = MakeVerifiedGraph(*BuildZooModel("llama2-7b:layers=6,hidden=256,heads=8,kv_heads=2,ffn=688,vocab=1024,seq=128,batch=8"));
  ASSERT_TRUE(g.ok());
  auto cg = BuildCostGraph(*g, EightH100(), ProfileOptions());
  ASSERT_TRUE(cg.ok()) << cg.status();
  const FoldedCostGraph folded = FoldRepeatedLayers(*g, *cg);
  // Six identical layers solve as one: far fewer decisions than nodes.
  EXPECT_LT(folded.request.nodes_size() * 4, static_cast<int>(cg->costs.size()));
  auto resp = SolveStrategies(folded.request);
  ASSERT_TRUE(resp.ok()) << resp.status();
  ASSERT_NE(resp->status(), v1::SolverResponse::INFEASIBLE);
  // The folded answer, expanded to every node, costs exactly what the folded objective says.
  const std::vector<int> expanded = folded.Expand(std::vector<int>(resp->choice().begin(), resp->choice().end()));
  EXPECT_NEAR(ObjectiveOf(cg->SolverRequest(), expanded), resp->objective(), 1e-9 * resp->objective());
  EXPECT_NEAR(MemoryOf(cg->SolverRequest(), expanded), resp->memory(), 1e-6 * resp->memory());
}

// One case of the kinds' bounds: a zoo model's graph, its prepared nodes, layer keys and
// skeleton, costed whole (its cost graph) and by kinds on one mesh at one ZeRO stage.
struct KindsCase {
  const char* spec;
  const Graph& graph;
  const std::vector<std::unique_ptr<PreparedNode>>& prepared;
  const std::vector<std::string>& keys;
  const FoldSkeleton& skeleton;
  const Cluster& cluster;
  int stage;
  const CostGraph& cost_graph;
  const SkeletonCosts& kinds;
};

// Every (spec, 1-D and 2-D mesh of 8 H100s, ZeRO stage 0–3) as a KindsCase.
void ForEachKindsCase(const std::vector<const char*>& specs, const std::function<void(const KindsCase&)>& check) {
  for (const char* spec : specs) {
    auto g = MakeVerifiedGraph(*BuildZooModel(spec));
    ASSERT_TRUE(g.ok()) << spec;
    auto prepared = PrepareNodes(*g);
    ASSERT_TRUE(prepared.ok());
    const auto keys = LayerKeys(*g);
    const FoldSkeleton skeleton = MakeFoldSkeleton(*g, *prepared, *keys, IndexLayers(*g));
    for (const std::vector<int64_t>& mesh : {std::vector<int64_t>{8}, std::vector<int64_t>{2, 4}}) {
      const Cluster cluster = H100Mesh(mesh);
      for (int stage = 0; stage < 4; ++stage) {
        CostGraphOptions cgo;
        cgo.zero_stage = stage;
        auto cg = BuildCostGraph(*g, *prepared, cluster, ProfileOptions(), cgo, keys);
        ASSERT_TRUE(cg.ok()) << cg.status();
        auto kinds = CostSkeleton(*g, *prepared, skeleton, cluster, ProfileOptions(), cgo, nullptr);
        ASSERT_TRUE(kinds.ok()) << kinds.status();
        SCOPED_TRACE(absl::StrCat(spec, " mesh ", mesh.size(), "-D ZeRO-", stage));
        check(KindsCase{spec, *g, *prepared, *keys, skeleton, cluster, stage, *cg, *kinds});
      }
    }
  }
}

// The bound phase's problem from the kinds alone (folded_bound.h) against the cost graph's own
// fold, on a LLaMA (its first layer reads the rotary tables, a kind of its own) and a GPT, on
// 1-D and 2-D meshes, at every ZeRO stage: the least state memory is the cost graph's exactly,
// and the unconstrained optimum never above the folded cost graph's, and equal where no two
// kinds of one name cost alike (nothing to tie).
TEST(CostGraph, TheKindsBoundIsTheFoldedOptimumOrBelowIt) {
  int untied = 0;  // cases where the fold tied no kinds: the two optima equal
  ForEachKindsCase({"llama2-7b:layers=6,hidden=256,heads=8,kv_heads=2,ffn=688,vocab=1024,seq=128,batch=8",
                    "gpt2:layers=4,hidden=256,heads=8,vocab=1024,seq=128,batch=8"},
                   [&](const KindsCase& k) {
    const Graph& g = k.graph;
    EXPECT_LT(k.skeleton.classes.size() * 3, static_cast<size_t>(g.num_nodes()));
    const int stage = k.stage;
    EXPECT_NEAR(LeastStateMemory(k.skeleton, k.kinds, stage), LeastStateMemory(k.cost_graph, stage),
                1e-9 * LeastStateMemory(k.cost_graph, stage));
    auto by_kinds = SolveStrategies(FoldedRequest(k.skeleton, k.kinds, stage));
    const FoldedCostGraph folded = FoldRepeatedLayers(g, k.cost_graph);
    auto by_graph = SolveStrategies(folded.request);
    ASSERT_TRUE(by_kinds.ok() && by_graph.ok());
    EXPECT_LE(by_kinds->objective(), by_graph->objective() * (1 + 1e-9));
    if (static_cast<size_t>(folded.request.nodes_size()) == k.skeleton.classes.size()) {
      ++untied;
      EXPECT_NEAR(by_kinds->objective(), by_graph->objective(), 1e-9 * by_graph->objective());
    }
    // The kinds' choice is a plan of the whole graph that costs what its objective says.
    std::vector<int> expanded(g.num_nodes());
    std::map<std::pair<std::string, std::string>, int> choice_of;
    for (size_t c = 0; c < k.skeleton.classes.size(); ++c) {
      const int node = k.skeleton.classes[c].node;
      choice_of[{k.keys[node], k.prepared[node]->signature}] = by_kinds->choice(static_cast<int>(c));
    }
    for (int n = 0; n < g.num_nodes(); ++n) expanded[n] = choice_of.at({k.keys[n], k.prepared[n]->signature});
    const v1::SolverRequest whole = k.cost_graph.SolverRequest();
    EXPECT_NEAR(ObjectiveOf(whole, expanded), by_kinds->objective(), 1e-9 * by_kinds->objective());
    const std::vector<int> choice(by_kinds->choice().begin(), by_kinds->choice().end());
    EXPECT_NEAR(MemoryOf(whole, expanded), ChoiceMemory(k.skeleton, k.kinds, choice, stage), 1e-6 * MemoryOf(whole, expanded));
  });
  EXPECT_GT(untied, 0);
}

// The kinds' bound under a budget (BudgetedBound, the Lagrangian of the budget with every node
// of a repeated layer free to recompute on its own) against the budgeted optimum of the folded
// cost graph with its recompute groups, solved exactly: never above it, at budgets a tenth and
// 40% of the way from the least memory to the unconstrained choice's, on a LLaMA and a GPT, 1-D
// and 2-D meshes, every ZeRO stage — and above the unconstrained bound where the budget binds.
TEST(CostGraph, TheBudgetedKindsBoundIsTheBudgetedOptimumOrBelowIt) {
  int cases = 0, tighter = 0;
  ForEachKindsCase({"llama2-7b:layers=6,hidden=256,heads=8,kv_heads=2,ffn=688,vocab=1024,seq=512,batch=16",
                    "gpt2:layers=4,hidden=256,heads=8,vocab=1024,seq=512,batch=16"},
                   [&](const KindsCase& k) {
    FoldedCostGraph folded = FoldRepeatedLayers(k.graph, k.cost_graph);
    AddRecomputeGroups(k.graph, k.cluster, k.cost_graph, &folded);
    auto free = SolveStrategies(FoldedRequest(k.skeleton, k.kinds, k.stage));
    ASSERT_TRUE(free.ok());
    const double least = LeastMemory(folded.request);
    for (double f : {0.1, 0.4}) {
      const double budget = least + f * (free->memory() - least);
      v1::SolverRequest budgeted = folded.request;
      budgeted.set_memory_budget(budget);
      budgeted.set_time_limit_seconds(30);
      auto best = SolveStrategies(budgeted);
      ASSERT_TRUE(best.ok());
      if (best->status() != v1::SolverResponse::OPTIMAL) continue;
      ++cases;
      const double bound = BudgetedBound(k.skeleton, k.kinds, k.stage, budget, 0);
      EXPECT_LE(bound, best->objective() * (1 + 1e-9)) << "budget at " << f;
      if (bound > free->objective() * (1 + 1e-6)) ++tighter;
    }
  });
  EXPECT_GT(cases, 16);
  EXPECT_GT(tighter, 4);
}

// A baseline's family built with only its strategies costed is the whole cost graph restricted
// to them: every kept strategy's costs and every edge's matrix the same, on a LLaMA and a GPT, on
// a 2-D mesh with data and tensor axes and a 1-D tensor mesh, at every ZeRO stage.
TEST(CostGraph, ARestrictedBuildIsTheWholeGraphRestricted) {
  for (const char* spec : {"llama2-7b:layers=3,hidden=256,heads=8,kv_heads=2,ffn=688,vocab=1024,seq=128,batch=8",
                           "gpt2:layers=3,hidden=256,heads=8,vocab=1024,seq=128,batch=8"}) {
    auto g = MakeVerifiedGraph(*BuildZooModel(spec));
    ASSERT_TRUE(g.ok()) << spec;
    auto prepared = PrepareNodes(*g);
    ASSERT_TRUE(prepared.ok());
    auto batch = FindBatch(*g, *prepared);
    ASSERT_TRUE(batch.ok());
    for (const auto& [mesh, roles] : std::vector<std::pair<std::vector<int64_t>, std::vector<AxisRole>>>{
             {{2, 4}, {AxisRole::kData, AxisRole::kTensor}}, {{8}, {AxisRole::kTensor}}}) {
      const Cluster cluster = H100Mesh(mesh);
      const StrategyFilter family = [&](int n, const SharedList<Strategy>& s) {
        return FamilyMask(*(*prepared)[n], batch->label[n], s, roles);
      };
      for (int stage = 0; stage < 4; ++stage) {
        CostGraphOptions cgo;
        cgo.zero_stage = stage;
        auto whole = BuildCostGraph(*g, *prepared, cluster, ProfileOptions(), cgo);
        ASSERT_TRUE(whole.ok());
        std::vector<std::vector<bool>> masks;
        for (int n = 0; n < g->num_nodes(); ++n) masks.push_back(family(n, whole->strategies[n]));
        auto restricted = RestrictStrategies(*whole, *g, masks);
        auto built = BuildRestrictedCostGraph(*g, *prepared, cluster, ProfileOptions(), cgo, nullptr, nullptr, family);
        ASSERT_TRUE(restricted.ok() && built.ok()) << built.status();
        ASSERT_EQ(built->costs.size(), restricted->costs.size());
        size_t kept = 0, total = 0;
        for (size_t n = 0; n < built->costs.size(); ++n) {
          ASSERT_EQ(built->costs[n].size(), restricted->costs[n].size()) << g->node(static_cast<int>(n)).name();
          kept += built->costs[n].size();
          total += whole->costs[n].size();
          for (size_t k = 0; k < built->costs[n].size(); ++k) {
            EXPECT_EQ(built->costs[n][k].seconds(), restricted->costs[n][k].seconds());
            EXPECT_EQ(built->costs[n][k].memory(), restricted->costs[n][k].memory());
            EXPECT_EQ(PlacementToString(built->strategies[n][k].inputs[0]), PlacementToString(restricted->strategies[n][k].inputs[0]));
          }
        }
        if (mesh.size() == 2) EXPECT_LT(kept * 2, total) << "the family keeps few of a 2-D mesh's strategies";
        ASSERT_EQ(built->edge_costs.size(), restricted->edge_costs.size());
        for (size_t e = 0; e < built->edge_costs.size(); ++e) {
          ASSERT_EQ(built->edge_costs[e].size(), restricted->edge_costs[e].size());
          for (size_t ij = 0; ij < built->edge_costs[e].size(); ++ij) EXPECT_EQ(built->edge_costs[e][ij], restricted->edge_costs[e][ij]);
        }
        EXPECT_EQ(built->memory_fixed, restricted->memory_fixed);
      }
    }
  }
}

}  // namespace
}  // namespace mapd

// The planner's search: mesh shapes, ZeRO stages, baselines on the same cost model, the plan
// never slower than a baseline that fits, and the least memory that fits when nothing does.
#include "common/bytes.h"
#include "planner/plan/planner.h"

#include <gtest/gtest.h>

#include <cmath>

#include "model/graph/builder.h"
#include "model/graph/loss.h"
#include "planner/profile/profiler.h"
#include "model/graph/verifier.h"
#include "planner/plan/baselines.h"
#include "planner/plan/describe.h"
#include "planner/solver/strategy_solver.h"
#include "model/zoo/zoo.h"
#include "tests/common/zoo_training_graph.h"

namespace mapd {
namespace {

constexpr const char* kSmallLlama = "llama2-7b:layers=2,hidden=256,heads=8,kv_heads=2,ffn=688,vocab=1024,seq=128,batch=16";
constexpr const char* kSmallGpt = "gpt2:layers=2,hidden=256,heads=8,vocab=1024,seq=128,batch=16";

Graph Zoo(const std::string& spec) {
  auto g = MakeVerifiedGraph(*BuildZooModel(spec));
  EXPECT_TRUE(g.ok()) << g.status();
  return *g;
}

PlannerOptions Options(int64_t devices, const std::string& memory = "") {
  PlannerOptions o;
  o.cluster.devices = devices;
  o.cluster.device_type = "h100-80g";
  o.micro_batches = 0;  // the search chooses
  if (!memory.empty()) o.cluster.memory_per_device = *ParseBytes(memory);
  return o;
}

const PlanCandidate* Baseline(const PlanResult& r, const std::string& name) {
  for (const auto& b : r.baselines) {
    if (b.name == name) return &b;
  }
  return nullptr;
}

TEST(Planner, MeshShapesAreEveryFactorisation) {
  EXPECT_EQ(MeshShapes(8, 2), (std::vector<std::vector<int64_t>>{{8}, {2, 4}, {4, 2}}));
  EXPECT_EQ(MeshShapes(8, 1), (std::vector<std::vector<int64_t>>{{8}}));
  EXPECT_EQ(MeshShapes(7, 2), (std::vector<std::vector<int64_t>>{{7}}));
}

TEST(Planner, OptionsAreValidated) {
  PlannerOptions o = Options(8);
  o.zero_stage = 4;
  EXPECT_EQ(o.Validate().code(), absl::StatusCode::kInvalidArgument);
  o = Options(8);
  o.time_limit_seconds = 0;
  EXPECT_EQ(o.Validate().code(), absl::StatusCode::kInvalidArgument);
  o = Options(0);
  EXPECT_EQ(SearchPlan(Zoo(kSmallGpt), o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Planner, EveryBaselineIsReportedAndThePlanIsNeverSlowerThanOneThatFits) {
  for (const char* spec : {kSmallGpt, kSmallLlama}) {
    SCOPED_TRACE(spec);
    const Graph g = Zoo(spec);
    auto r = SearchPlan(g, Options(8));
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(r->fits);
    // data parallel, ZeRO-3, Megatron TP=2/4/8.
    ASSERT_EQ(r->baselines.size(), 5u);
    for (const char* name : {"data parallel", "ZeRO-3 (FSDP)", "Megatron TP=2 x DP=4", "Megatron TP=4 x DP=2", "Megatron TP=8"}) {
      ASSERT_NE(Baseline(*r, name), nullptr) << name;
    }
    for (const auto& b : r->baselines) {
      ASSERT_TRUE(b.applicable) << b.name << ": " << b.note;
      EXPECT_GT(b.cost.step_seconds, 0) << b.name;
      if (b.fits) {
        EXPECT_LE(r->plan.cost.step_seconds, b.cost.step_seconds * (1 + 1e-9)) << b.name;
      }
    }
    EXPECT_EQ(static_cast<int>(r->plan.strategies.size()), g.num_nodes());
    EXPECT_GT(r->meshes_solved, 0);
    // Every (mesh shape, micro-batch count) pair is solved or pruned: 3 meshes × the divisors of 16.
    EXPECT_EQ(r->micro_batch_counts, (std::vector<int64_t>{1, 2, 4, 8, 16}));
    EXPECT_EQ(r->meshes_solved + r->meshes_pruned, 3 * 5);
  }
}

TEST(Planner, BaselinesAreWhatTheirNamesSay) {
  const Graph g = Zoo(kSmallGpt);
  auto r = SearchPlan(g, Options(8));
  ASSERT_TRUE(r.ok()) << r.status();
  const PlanCandidate* dp = Baseline(*r, "data parallel");
  const PlanCandidate* zero3 = Baseline(*r, "ZeRO-3 (FSDP)");
  const PlanCandidate* tp = Baseline(*r, "Megatron TP=8");
  ASSERT_TRUE(dp && zero3 && tp);
  int matrices = 0;
  for (int n = 0; n < g.num_nodes(); ++n) {
    const v1::Node& node = g.node(n);
    if (node.op() != "linear") continue;
    ++matrices;
    // Data parallel: weights replicated, the batch split.
    EXPECT_EQ(PlacementToString(dp->strategies[n].inputs[1]), "R") << node.name();
    EXPECT_EQ(PlacementToString(dp->strategies[n].inputs[0]), "S(0)") << node.name();
    // Megatron: every weight column- or row-parallel.
    const std::string w = PlacementToString(tp->strategies[n].inputs[1]);
    EXPECT_TRUE(w == "S(0)" || w == "S(1)") << node.name() << " " << w;
  }
  EXPECT_GT(matrices, 4);
  // ZeRO-3 makes the same choices as data parallel, in a third of the state memory or less,
  // and pays for gathering the parameters.
  EXPECT_EQ(zero3->zero_stage, 3);
  EXPECT_LT(zero3->cost.parameter_bytes + zero3->cost.gradient_bytes + zero3->cost.optimizer_bytes,
            (dp->cost.parameter_bytes + dp->cost.gradient_bytes + dp->cost.optimizer_bytes) / 3);
  EXPECT_GT(zero3->cost.comm_bytes[static_cast<int>(CollectiveKind::kAllGather)], 0);
  EXPECT_GT(zero3->cost.step_seconds, dp->cost.step_seconds);
}

TEST(Planner, BatchThatDoesNotSplitMakesDataParallelNotApplicable) {
  auto r = SearchPlan(Zoo("gpt2:layers=2,hidden=256,heads=8,vocab=1024,seq=128,batch=2"), Options(8));
  ASSERT_TRUE(r.ok()) << r.status();
  const PlanCandidate* dp = Baseline(*r, "data parallel");
  ASSERT_NE(dp, nullptr);
  EXPECT_FALSE(dp->applicable);
  EXPECT_NE(dp->note.find("batch of 2 does not split over 8 devices"), std::string::npos) << dp->note;
  EXPECT_TRUE(Baseline(*r, "Megatron TP=8")->applicable);
}

TEST(Planner, TightMemoryTurnsOnZero) {
  // A wide MLP-like model with a big batch on a pinned 1-D mesh: data parallel is fastest but
  // its replicated optimizer states do not fit; sharding them (ZeRO) does.
  const Graph g = Zoo(kSmallGpt);
  PlannerOptions o = Options(8);
  o.cluster.mesh = {8};
  o.cluster.devices = 8;
  auto free = SearchPlan(g, o);
  ASSERT_TRUE(free.ok()) << free.status();
  EXPECT_EQ(free->plan.zero_stage, 0);
  const double states = free->plan.cost.parameter_bytes + free->plan.cost.gradient_bytes + free->plan.cost.optimizer_bytes;
  // Just under the unconstrained plan's peak, above what sharding its optimizer states saves.
  o.cluster.memory_per_device = static_cast<int64_t>(free->plan.cost.peak_bytes() - 0.01 * states);
  auto tight = SearchPlan(g, o);
  ASSERT_TRUE(tight.ok()) << tight.status();
  ASSERT_TRUE(tight->fits);
  EXPECT_LE(tight->plan.cost.peak_bytes(), static_cast<double>(o.cluster.memory_per_device));
  // ZeRO 1 or 2 shards the states at no extra time in the cost model: same step time.
  EXPECT_GE(tight->plan.zero_stage, 1);
  EXPECT_LE(tight->plan.zero_stage, 2);
  EXPECT_NEAR(tight->plan.cost.step_seconds, free->plan.cost.step_seconds, 1e-9 * free->plan.cost.step_seconds);
  // Pinning ZeRO off at that budget finds a slower plan or none.
  o.zero_stage = 0;
  auto off = SearchPlan(g, o);
  ASSERT_TRUE(off.ok()) << off.status();
  if (off->fits) {
    EXPECT_GE(off->plan.cost.step_seconds, tight->plan.cost.step_seconds * (1 - 1e-9));
  }
}

TEST(Planner, NothingFitsReportsTheLeastMemoryThatWould) {
  const Graph g = Zoo(kSmallLlama);
  auto r = SearchPlan(g, Options(8, "64KiB"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->fits);
  ASSERT_GT(r->min_memory_bytes, 64 * 1024);
  // That much memory is enough: the search then finds a plan within it.
  PlannerOptions o = Options(8);
  o.cluster.memory_per_device = static_cast<int64_t>(std::ceil(r->min_memory_bytes)) + 1;
  auto enough = SearchPlan(g, o);
  ASSERT_TRUE(enough.ok()) << enough.status();
  EXPECT_TRUE(enough->fits);
  EXPECT_LE(enough->plan.cost.peak_bytes(), static_cast<double>(o.cluster.memory_per_device));
}

TEST(Planner, ATightBudgetRecomputesLayersInsteadOfFailing) {
  // 4 layers, sequence 64: activations dominate. At 1 MiB per device nothing fits without
  // recomputation (the least is over the budget); with it the search fits by recomputing some
  // layers, and pays the forward again.
  const Graph g = Zoo("gpt2:layers=4,hidden=32,heads=4,vocab=64,seq=64,batch=8");
  PlannerOptions o = Options(4, "1MiB");
  o.cluster.device_type = "cpu";
  o.micro_batches = 1;  // micro-batches would fit it too (below)
  o.recompute = false;
  auto without = SearchPlan(g, o);
  ASSERT_TRUE(without.ok()) << without.status();
  EXPECT_FALSE(without->fits);
  EXPECT_GT(without->min_memory_bytes, 1 << 20);
  o.recompute = true;
  auto with = SearchPlan(g, o);
  ASSERT_TRUE(with.ok()) << with.status();
  ASSERT_TRUE(with->fits);
  EXPECT_LE(with->plan.cost.peak_bytes(), 1 << 20);
  EXPECT_FALSE(with->plan.recomputed_layers.empty());
  for (const std::string& layer : with->plan.recomputed_layers) EXPECT_EQ(layer.rfind("h.", 0), 0u) << layer;
  EXPECT_GT(with->plan.cost.recompute_seconds, 0);
  EXPECT_LT(with->plan.cost.recompute_bytes, 0);
  // A generous budget needs none.
  o.cluster.memory_per_device = 64 << 20;
  auto loose = SearchPlan(g, o);
  ASSERT_TRUE(loose.ok()) << loose.status();
  EXPECT_TRUE(loose->plan.recomputed_layers.empty());
  EXPECT_LT(loose->plan.cost.step_seconds, with->plan.cost.step_seconds);
  // The saved plan names the layers.
  o.cluster.memory_per_device = 1 << 20;
  const v1::Plan plan = ToPlanProto(g, *with, o);
  EXPECT_EQ(std::vector<std::string>(plan.recomputed_layers().begin(), plan.recomputed_layers().end()),
            with->plan.recomputed_layers);
}

TEST(Planner, MixedPrecisionHalvesWeightsAndActivationsAndUsesBf16Rates) {
  const Graph g = Zoo(kSmallGpt);
  PlannerOptions o = Options(4);
  o.cluster.mesh = {4};
  o.zero_stage = 0;
  auto fp32 = SearchPlan(g, o);
  o.profile.precision = Precision::kBf16Mixed;
  // The bf16 search plans the bf16 graph, whose nodes are the ones that run.
  EXPECT_EQ(SearchPlan(g, o).status().code(), absl::StatusCode::kInvalidArgument);
  auto mixed = GraphAtPrecision(g, Precision::kBf16Mixed);
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  auto bf16 = SearchPlan(*mixed, o);
  ASSERT_TRUE(fp32.ok() && bf16.ok());
  const ChoiceCost& a = fp32->plan.cost;
  const ChoiceCost& b = bf16->plan.cost;
  // bf16 weights and gradients (half), fp32 master weights beside the AdamW states (3 × 4 bytes
  // per parameter instead of 2 × 4), bf16 activations.
  const double params = a.parameter_bytes;  // fp32: 4 bytes a parameter
  EXPECT_NEAR(b.parameter_bytes, params / 2, 1e-6 * params);
  EXPECT_NEAR(b.gradient_bytes, a.gradient_bytes / 2, 1e-6 * params);
  EXPECT_NEAR(b.optimizer_bytes, a.optimizer_bytes * 1.5, 1e-6 * params);
  EXPECT_LT(b.activation_bytes, 0.6 * a.activation_bytes);
  EXPECT_LT(b.step_seconds, a.step_seconds);
  EXPECT_EQ(ToPlanProto(*mixed, *bf16, o).precision(), "bf16");
}

TEST(Planner, DumpedRequestReplaysToThePlansObjective) {
  auto r = SearchPlan(Zoo(kSmallLlama), Options(4));
  ASSERT_TRUE(r.ok()) << r.status();
  v1::SolverRequest replayed;
  ASSERT_NE(r->plan.request, nullptr);
  ASSERT_TRUE(replayed.ParseFromString(r->plan.request->SerializeAsString()));
  auto resp = SolveStrategies(replayed);
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_NEAR(resp->objective(), r->plan.cost.step_seconds, 1e-9 * r->plan.cost.step_seconds);
}

TEST(Planner, PlanProtoHasEveryNodeAndTheGraph) {
  const Graph g = Zoo(kSmallGpt);
  PlannerOptions o = Options(4);
  auto r = SearchPlan(g, o);
  ASSERT_TRUE(r.ok()) << r.status();
  const v1::Plan plan = ToPlanProto(g, *r, o);
  EXPECT_EQ(plan.nodes_size(), g.num_nodes());
  EXPECT_EQ(plan.graph().nodes_size(), g.num_nodes());
  EXPECT_EQ(std::vector<int64_t>(plan.mesh().begin(), plan.mesh().end()), r->plan.mesh);
  for (const auto& ns : plan.nodes()) {
    for (const auto& p : ns.output_placements()) EXPECT_TRUE(ParsePlacement(p).ok()) << ns.node() << " " << p;
  }
}

TEST(Describe, NamesSplitsInWords) {
  EXPECT_EQ(LayerFreeName("layers.12.attention/linear_2"), "layers.#.attention/linear_2");
  EXPECT_EQ(LayerFreeName("h.3.mlp.c_fc/linear"), "h.#.mlp.c_fc/linear");
  const Graph g = Zoo(kSmallGpt);
  auto r = SearchPlan(g, Options(8));
  ASSERT_TRUE(r.ok());
  const PlanCandidate* tp = Baseline(*r, "Megatron TP=8");
  bool column = false, row = false;
  for (int n = 0; n < g.num_nodes(); ++n) {
    if (g.node(n).op() != "linear") continue;
    const std::string words = DescribeStrategy(g, n, tp->strategies[n]);
    column = column || words == "column-parallel over axis 0";
    row = row || words == "row-parallel over axis 0";
  }
  EXPECT_TRUE(column && row);
}

}  // namespace
}  // namespace mapd

namespace mapd {
namespace {

// On one device the cost graph's memory is the profiler's: the same parameters and optimizer
// states, and the same saved activations (each storage once) where the profiler's peak is at
// the start of the backward (the loss), as it is for GPT-2.
TEST(CostGraphMemory, OneDeviceMatchesTheProfiler) {
  for (const char* spec : {"gpt2:layers=2,hidden=256,heads=8,vocab=1024,seq=128,batch=16", "resnet50:batch=4,image=64"}) {
    SCOPED_TRACE(spec);
    const Graph g = ZooTrainingGraph(spec);
    ClusterOptions co;
    co.devices = 1;
    auto cluster = MakeCluster(co);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    ProfileOptions po;
    po.device = cluster->device;
    auto cg = BuildCostGraph(g, *cluster, po);
    ASSERT_TRUE(cg.ok()) << cg.status();
    auto cost = CostChoice(g, *cluster, *cg, std::vector<int>(g.num_nodes(), 0));
    ASSERT_TRUE(cost.ok());
    auto profile = ProfileTrainingStep(g, po);
    ASSERT_TRUE(profile.ok()) << profile.status();
    const MemoryBreakdown& peak = profile->peak_breakdown;
    EXPECT_EQ(static_cast<int64_t>(cost->parameter_bytes), peak.parameters);
    EXPECT_EQ(static_cast<int64_t>(cost->optimizer_bytes), peak.optimizer_states);
    if (std::string(spec).rfind("gpt2", 0) == 0) {
      EXPECT_EQ(static_cast<int64_t>(cost->activation_bytes), peak.saved_activations);
    } else {
      // ResNet's peak is inside the backward, after some saved tensors were freed: the cost
      // graph's start-of-backward sum bounds it from above; the whole step's memory closely.
      EXPECT_GE(cost->activation_bytes, static_cast<double>(peak.saved_activations));
      const double predicted = static_cast<double>(profile->predicted_peak_bytes);
      EXPECT_GE(cost->peak_bytes(), 0.95 * predicted);
      EXPECT_LE(cost->peak_bytes(), 1.05 * predicted);
    }
  }
}

}  // namespace
}  // namespace mapd

// Micro-batches (planner/plan/micro_batch.h, DESIGN §6a): the graph of one micro-batch, the
// cost graph's accounting of m passes, and the search choosing m under a budget.
#include "planner/plan/micro_batch.h"

#include <gtest/gtest.h>

#include "model/graph/builder.h"
#include "model/graph/verifier.h"
#include "planner/plan/cost_graph.h"
#include "planner/plan/planner.h"
#include "planner/profile/profiler.h"
#include "planner/sharding/strategies.h"
#include "model/zoo/zoo.h"

namespace mapd {
namespace {

constexpr const char* kGpt = "gpt2:layers=2,hidden=64,heads=4,vocab=128,seq=32,batch=8";

Graph Zoo(const std::string& spec) {
  auto g = MakeVerifiedGraph(*BuildZooModel(spec));
  EXPECT_TRUE(g.ok()) << g.status();
  return *g;
}

TEST(MicroBatch, TheMicroBatchGraphIsTheModelAtASmallerBatch) {
  const Graph g = Zoo(kGpt);
  auto info = AnalyzeMicroBatching(g);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_TRUE(info->possible()) << info->refusal;
  EXPECT_EQ(info->batch, 8);
  EXPECT_TRUE(info->averaged);  // cross-entropy's mean
  EXPECT_EQ(info->Counts(), (std::vector<int64_t>{1, 2, 4, 8}));
  auto micro = MicroBatchGraph(g, 4);
  ASSERT_TRUE(micro.ok()) << micro.status();
  // The same nodes; every value's type is the one the zoo gives the model at batch 2.
  const Graph two = Zoo("gpt2:layers=2,hidden=64,heads=4,vocab=128,seq=32,batch=2");
  ASSERT_EQ(micro->num_nodes(), two.num_nodes());
  for (int n = 0; n < g.num_nodes(); ++n) {
    ASSERT_EQ(micro->node(n).name(), g.node(n).name());
    for (const std::string& out : micro->node(n).outputs()) {
      EXPECT_EQ(micro->TypeOf(out).ToString(), two.TypeOf(out).ToString()) << out;
    }
  }
  // Its profile is the batch-2 model's: a quarter of the activations, the same parameters.
  ProfileOptions po;
  po.timeline = false;
  auto a = ProfileTrainingStep(*micro, po);
  auto b = ProfileTrainingStep(two, po);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->predicted_peak_bytes, b->predicted_peak_bytes);
  EXPECT_EQ(a->parameter_bytes, b->parameter_bytes);
}

// A tensor made from attributes at the batch's size (MoE routing's zeros_like(logits).scatter)
// carries the batch: its shape is divided with the rest.
TEST(MicroBatch, BatchSizedCreationsAreDivided) {
  GraphBuilder b("routing");
  v1::InitRule init;
  init.set_kind(v1::InitRule::NORMAL);
  const std::string x = b.Input("x", {v1::FLOAT32, {8, 16, 8}});
  const std::string w = b.Param("router.weight", {v1::FLOAT32, {4, 8}}, init);
  const std::string logits = b.Node("linear", {x, w}, {})[0];
  const std::vector<std::string> top = b.Node("topk", {logits}, Attrs().Int("k", 2).Int("dim", -1));
  const std::string zeros = b.Node("zeros", {}, Attrs().Ints("shape", {8, 16, 4}))[0];
  const std::string combine = b.Node("scatter", {zeros, top[1], top[0]}, Attrs().Int("dim", -1))[0];
  b.Output(b.Node("mean", {b.Node("mul", {logits, combine}, {})[0]}, {})[0]);
  auto proto = b.Build();
  ASSERT_TRUE(proto.ok()) << proto.status();
  auto g = MakeVerifiedGraph(*proto);
  ASSERT_TRUE(g.ok()) << g.status();
  auto micro = MicroBatchGraph(*g, 4);
  ASSERT_TRUE(micro.ok()) << micro.status();
  EXPECT_EQ(micro->TypeOf(zeros).ToString(), "f32[2,16,4]");
  EXPECT_EQ(micro->TypeOf(combine).ToString(), "f32[2,16,4]");
}

TEST(MicroBatch, ATokenBroadcastToTheBatchIsDivided) {
  // ViT's class token: a [1, 1, h] parameter expanded to [B, 1, h] and concatenated with the
  // patches — the expand's target follows the micro-batch (it did not, and ViTs could not be
  // micro-batched: "cat: input 1 [32,196,768] differs from input 0 [64,1,768]").
  const Graph g = Zoo("vit-base:layers=1,hidden=32,heads=4,patch=16,image=32,classes=10,batch=8");
  auto micro = MicroBatchGraph(g, 4);
  ASSERT_TRUE(micro.ok()) << micro.status();
  int expands = 0;
  for (int n = 0; n < micro->num_nodes(); ++n) {
    const v1::Node& node = micro->node(n);
    if (node.op() != "expand") continue;
    ++expands;
    EXPECT_EQ(micro->TypeOf(node.outputs(0)).shape[0], 2) << node.name();
    EXPECT_EQ(node.attrs().at("shape").ints().values(0), 2) << node.name();
  }
  EXPECT_EQ(expands, 1);
}

TEST(MicroBatch, CountsThatDoNotDivideAndBatchNormsAreRefused) {
  const Graph g = Zoo(kGpt);
  EXPECT_EQ(MicroBatchGraph(g, 3).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MicroBatchGraph(g, 0).status().code(), absl::StatusCode::kInvalidArgument);
  const Graph resnet = Zoo("resnet50:batch=4,image=32");
  auto info = AnalyzeMicroBatching(resnet);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_FALSE(info->possible());
  EXPECT_NE(info->refusal.find("batch_norm"), std::string::npos) << info->refusal;
  EXPECT_EQ(info->Counts(), (std::vector<int64_t>{1}));
  auto refused = MicroBatchGraph(resnet, 2);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("batch_norm"), std::string::npos) << refused.status();
  // The planner refuses a pinned count for it, and searches only 1 on auto.
  PlannerOptions o;
  o.cluster.devices = 2;
  o.cluster.device_type = "h100-80g";
  o.baselines = false;
  o.micro_batches = 2;
  EXPECT_EQ(SearchPlan(resnet, o).status().code(), absl::StatusCode::kFailedPrecondition);
  o.micro_batches = 0;
  auto r = SearchPlan(resnet, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->micro_batch_counts, (std::vector<int64_t>{1}));
  EXPECT_NE(r->micro_batch_note.find("batch_norm"), std::string::npos);
}

// m passes: compute and activation resharding m times, parameter gradients reduced once.
TEST(MicroBatch, TheCostGraphCountsComputePerPassAndGradientReductionsPerStep) {
  const Graph g = Zoo(kGpt);
  auto micro = MicroBatchGraph(g, 4);
  ASSERT_TRUE(micro.ok());
  ClusterOptions co;
  co.devices = 2;
  co.device_type = "h100-80g";
  auto cluster = MakeCluster(co);
  ASSERT_TRUE(cluster.ok());
  ProfileOptions po;
  po.device = cluster->device;
  CostGraphOptions once, four;
  four.micro_batches = 4;
  for (int zero : {0, 1, 2, 3}) {
    SCOPED_TRACE(zero);
    once.zero_stage = four.zero_stage = zero;
    auto a = BuildCostGraph(*micro, *cluster, po, once);
    auto b = BuildCostGraph(*micro, *cluster, po, four);
    ASSERT_TRUE(a.ok() && b.ok());
    for (int n = 0; n < g.num_nodes(); ++n) {
      for (size_t k = 0; k < a->costs[n].size(); ++k) {
        const StrategyCost& x = a->costs[n][k];
        const StrategyCost& y = b->costs[n][k];
        EXPECT_NEAR(y.compute_seconds, 4 * x.compute_seconds, 1e-15);
        EXPECT_EQ(y.memory(), x.memory());  // one micro-batch's activations, the same states
        // Parameter gradients: all-reduce (ZeRO 0) and ZeRO 1's reduce-scatter + gather once; ZeRO 2
        // reduce-scatters every pass, ZeRO 3 also gathers twice per pass.
        const double ar = x.comm_bytes[static_cast<int>(CollectiveKind::kAllReduce)];
        const double rs = x.comm_bytes[static_cast<int>(CollectiveKind::kReduceScatter)];
        const double ag = x.comm_bytes[static_cast<int>(CollectiveKind::kAllGather)];
        // All-reduces are of activations' gradients (every pass) or, under ZeRO 0, of parameters' (once).
        const double y_ar = y.comm_bytes[static_cast<int>(CollectiveKind::kAllReduce)];
        EXPECT_TRUE(y_ar >= ar && y_ar <= 4 * ar) << y_ar << " vs " << ar;
        const Strategy& s = a->strategies[n][k];
        if (g.node(n).name() == "h.0.attn.c_attn/linear" && s.inputs[0][0].kind == AxisPlacement::Kind::kShard &&
            s.inputs[0][0].dim == 0) {
          // Data parallel: the activation is split, the weight and bias replicated — their
          // gradients all-reduced once a step at ZeRO 0.
          EXPECT_EQ(y_ar, ar);
          EXPECT_EQ(ar > 0, zero == 0);
        }
        EXPECT_EQ(y.comm_bytes[static_cast<int>(CollectiveKind::kReduceScatter)], (zero >= 2 ? 4 : 1) * rs);
        EXPECT_EQ(y.comm_bytes[static_cast<int>(CollectiveKind::kAllGather)], (zero == 3 ? 4 : 1) * ag);
      }
    }
    for (int e = 0; e < static_cast<int>(a->edge_ports.size()); ++e) {
      for (size_t ij = 0; ij < a->edge_costs[e].size(); ++ij) {
        const double x = a->edge_costs[e][ij];
        if (x < 1e5) EXPECT_NEAR(b->edge_costs[e][ij], 4 * x, 1e-12);
      }
    }
  }
}

// Under a budget at which the whole batch does not fit without recomputation, the search fits by
// running micro-batches — and without recomputation, which costs more than the passes do.
TEST(MicroBatch, ATightBudgetIsMetByMicroBatches) {
  const Graph g = Zoo("gpt2:layers=4,hidden=32,heads=4,vocab=64,seq=64,batch=8");
  PlannerOptions o;
  o.cluster.devices = 4;
  o.cluster.device_type = "cpu";
  o.cluster.memory_per_device = 1 << 20;
  o.recompute = false;
  o.micro_batches = 1;
  auto whole = SearchPlan(g, o);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_FALSE(whole->fits);
  o.micro_batches = 0;
  auto micro = SearchPlan(g, o);
  ASSERT_TRUE(micro.ok()) << micro.status();
  ASSERT_TRUE(micro->fits);
  EXPECT_GT(micro->plan.micro_batches, 1);
  EXPECT_EQ(micro->global_batch, 8);
  EXPECT_LE(micro->plan.cost.peak_bytes(), 1 << 20);
  EXPECT_TRUE(micro->plan.recomputed_layers.empty());
  // The saved plan carries the count.
  const v1::Plan plan = ToPlanProto(g, *micro, o);
  EXPECT_EQ(plan.micro_batches(), micro->plan.micro_batches);
  EXPECT_EQ(plan.global_batch(), 8);
  // A pinned count that does not divide the batch is refused.
  o.micro_batches = 3;
  EXPECT_EQ(SearchPlan(g, o).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mapd

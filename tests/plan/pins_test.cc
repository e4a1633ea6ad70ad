// Pins (planner/plan/pins.h): parsing, the degrees they fix, the search cut to them, the pinned
// configuration costed beside MAP's plan — interleaved 1F1B included — and a pin that cannot fit.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/bytes.h"
#include "planner/plan/pins.h"
#include "planner/plan/planner.h"
#include "tests/common/zoo_training_graph.h"

namespace mapd {
namespace {

constexpr const char* kGpt = "gpt2:layers=4,hidden=32,heads=4,vocab=64,seq=64,batch=8";

PlannerOptions CpuOptions(int64_t devices, const std::string& memory, const std::string& pins) {
  PlannerOptions o;
  o.cluster.devices = devices;
  o.cluster.device_type = "cpu";
  o.cluster.memory_per_device = *ParseBytes(memory);
  o.micro_batches = 0;
  o.pipeline_stages = 0;
  auto p = ParsePins(pins);
  EXPECT_TRUE(p.ok()) << p.status();
  if (p.ok()) o.pins = *p;
  return o;
}

TEST(Pins, ParseEveryKeyAndNameTheOneAtFault) {
  auto p = ParsePins("tp=8,pp=16,dp=15,mbs=1,recompute=full,schedule=interleaved:2,zero=1");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->tp, 8);
  EXPECT_EQ(p->pp, 16);
  EXPECT_EQ(p->dp, 15);
  EXPECT_EQ(p->mbs, 1);
  EXPECT_EQ(p->recompute, PlanPins::Recompute::kFull);
  EXPECT_EQ(p->virtual_stages, 2);
  EXPECT_EQ(p->zero, 1);
  EXPECT_EQ(p->ToString(), "tp=8,pp=16,dp=15,mbs=1,recompute=full,schedule=interleaved:2,zero=1");
  EXPECT_TRUE(ParsePins("")->empty());
  EXPECT_EQ(ParsePins("schedule=interleaved")->virtual_stages, -1);
  EXPECT_EQ(ParsePins("schedule=1f1b")->virtual_stages, 1);

  for (const auto& [text, names] : std::vector<std::pair<std::string, std::string>>{
           {"tq=8", "tq"}, {"tp=0", "tp=0"}, {"tp=eight", "tp=eight"}, {"tp=8,tp=4", "tp"}, {"recompute=some", "recompute=some"},
           {"schedule=interleaved:1", "schedule=interleaved:1"}, {"zero=4", "zero=4"}, {"tp", "tp"},
           {"pp=1,schedule=interleaved:2", "pp=1"}}) {
    auto bad = ParsePins(text);
    ASSERT_FALSE(bad.ok()) << text;
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_NE(bad.status().message().find(names), std::string::npos) << bad.status();
  }
}

TEST(Pins, DegreesHoldTogetherOrSayWhy) {
  auto all = ParsePins("tp=8,pp=16,dp=15");
  auto d = all->Resolve(1920);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->dp, 15);
  auto wrong = all->Resolve(1024);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("1920"), std::string::npos) << wrong.status();
  // Two pinned: the third follows.
  auto two = ParsePins("tp=8,pp=16")->Resolve(1920);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->dp, 15);
  EXPECT_FALSE(ParsePins("tp=7")->Resolve(64).ok());
  // One pinned over every device: the other two are 1; over fewer, they stay free.
  auto every = ParsePins("pp=2")->Resolve(2);
  ASSERT_TRUE(every.ok());
  EXPECT_EQ(every->tp, 1);
  EXPECT_EQ(every->dp, 1);
  EXPECT_EQ(ParsePins("pp=2")->Resolve(8)->dp, 0);

  PlanPins tp8 = *ParsePins("tp=8");
  EXPECT_TRUE(tp8.AllowsStageMesh({4, 8}));
  EXPECT_TRUE(tp8.AllowsStageMesh({8}));
  EXPECT_FALSE(tp8.AllowsStageMesh({8, 4}));
  EXPECT_FALSE(tp8.AllowsStageMesh({32}));
  PlanPins dp4 = *ParsePins("dp=4");
  EXPECT_TRUE(dp4.AllowsStageMesh({4}));
  EXPECT_TRUE(dp4.AllowsStageMesh({4, 2}));
  EXPECT_FALSE(dp4.AllowsStageMesh({2, 4}));
  // Without stages a pinned dp spans the stages' devices.
  EXPECT_EQ(ParsePins("dp=4,pp=2")->WithoutStages().dp, 8);
}

TEST(Pins, APartialPinCutsTheSearchAndTheBaselinesToIt) {
  const Graph g = ZooTrainingGraph(kGpt);
  PlannerOptions o = CpuOptions(8, "64MiB", "tp=2");
  o.pipeline_stages = 1;
  auto r = SearchPlan(g, o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->fits);
  EXPECT_EQ(r->plan.mesh, (std::vector<int64_t>{4, 2}));
  for (const PlanCandidate& a : r->alternatives) EXPECT_EQ(a.mesh, (std::vector<int64_t>{4, 2}));
  ASSERT_FALSE(r->baselines.empty());
  for (const PlanCandidate& b : r->baselines) EXPECT_EQ(b.name.rfind("Megatron TP=2 x DP=4", 0), 0u) << b.name;
  EXPECT_EQ(r->pinned_name.rfind("Megatron TP=2 x DP=4", 0), 0u) << r->pinned_name;
}

TEST(Pins, AWholeConfigurationIsCostedAsPinned) {
  const Graph g = ZooTrainingGraph(kGpt);
  auto r = SearchPlan(g, CpuOptions(8, "64MiB", "tp=2,pp=2,dp=2,mbs=1,recompute=full,schedule=1f1b"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->micro_batch_counts, (std::vector<int64_t>{4}));  // 8 samples / (dp 2 × 1)
  ASSERT_TRUE(r->pipeline.has_value());
  EXPECT_EQ(r->pinned_name, "Megatron TP=2 x PP=2 x DP=2 + full recompute");
  const PipelinePlan* pinned = nullptr;
  for (const PipelinePlan& b : r->pipeline_baselines) {
    if (b.name == r->pinned_name) pinned = &b;
  }
  ASSERT_NE(pinned, nullptr);
  EXPECT_EQ(pinned->micro_batches, 4);
  EXPECT_EQ(pinned->stage_mesh, (std::vector<int64_t>{2, 2}));
  for (const StagePlan& s : pinned->stage_plans) EXPECT_EQ(s.plan.recomputed_layers.size(), 2u) << s.LayerRange();
  // MAP's pipeline keeps the pins too: two stages on 2x2 at four micro-batches, every layer recomputed.
  EXPECT_EQ(r->pipeline->stages, 2);
  EXPECT_EQ(r->pipeline->stage_mesh, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(r->pipeline->micro_batches, 4);
  for (const StagePlan& s : r->pipeline->stage_plans) EXPECT_EQ(s.plan.recomputed_layers.size(), 2u) << s.LayerRange();
}

TEST(Pins, InterleavedChunksShrinkTheBubbleAndSendMore) {
  const Graph g = ZooTrainingGraph("gpt2:layers=8,hidden=32,heads=4,vocab=64,seq=64,batch=8");
  auto plain = SearchPlan(g, CpuOptions(4, "1GiB", "tp=1,pp=2,dp=2,mbs=1,schedule=1f1b"));
  auto inter = SearchPlan(g, CpuOptions(4, "1GiB", "tp=1,pp=2,dp=2,mbs=1,schedule=interleaved:2"));
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_TRUE(inter.ok()) << inter.status();
  const PipelinePlan* a = nullptr;
  const PipelinePlan* b = nullptr;
  for (const PipelinePlan& p : plain->pipeline_baselines) a = p.name == plain->pinned_name ? &p : a;
  for (const PipelinePlan& p : inter->pipeline_baselines) b = p.name == inter->pinned_name ? &p : b;
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr) << inter->pinned_name;
  EXPECT_EQ(a->virtual_stages, 1);
  EXPECT_EQ(b->virtual_stages, 2);
  ASSERT_EQ(b->stage_plans.size(), 4u);  // chunks h.0-1, h.2-3 on stage 0's devices, h.4-5, h.6-7 on stage 1's
  EXPECT_EQ(b->stage_plans[2].first_name, "h.4");
  // The fill and drain are a chunk's pass, not a stage's: a smaller bubble.
  EXPECT_LT(b->bubble_fraction, a->bubble_fraction);
  // Three boundaries crossed per micro-batch instead of one.
  double sends_a = 0, sends_b = 0;
  for (const StagePlan& s : a->stage_plans) sends_a += s.send_seconds;
  for (const StagePlan& s : b->stage_plans) sends_b += s.send_seconds;
  EXPECT_NEAR(sends_b, 3 * sends_a, 1e-9 + 1e-6 * sends_a);
  // T = Σ_d u_d / V + (m − 1/V) · max u_d + max g_d, from the chunks' own costs.
  std::vector<double> u(2, 0), once(2, 0);
  for (size_t c = 0; c < b->stage_plans.size(); ++c) {
    u[c % 2] += b->stage_plans[c].pass_seconds;
    once[c % 2] += b->stage_plans[c].once_seconds;
  }
  const double expect = (u[0] + u[1]) / 2 + (4 - 0.5) * std::max(u[0], u[1]) + std::max(once[0], once[1]);
  EXPECT_NEAR(b->step_seconds, expect, 1e-12 + 1e-9 * expect);
  // Interleaving keeps more activations in flight on the first device (Megatron-LM's warm-up):
  // 2(p − 1) + (v − 1)p + 1 = 5 chunk passes over its 2 chunks, 3 each.
  EXPECT_EQ(b->stage_plans[0].in_flight, 3);
}

TEST(Pins, ASendIsOneMicroBatchs) {
  // A stage sends one micro-batch's activations per pass: s(m) = α + C/m, so with 2, 4 and 8
  // micro-batches s(2) − s(4) = 2 (s(4) − s(8)) — the bytes halve as the micro-batches double.
  const Graph g = ZooTrainingGraph("gpt2:layers=4,hidden=32,heads=4,vocab=64,seq=64,batch=16");
  std::vector<double> sends;
  for (const char* mbs : {"4", "2", "1"}) {
    auto r = SearchPlan(g, CpuOptions(4, "1GiB", absl::StrCat("tp=1,pp=2,dp=2,schedule=1f1b,mbs=", mbs)));
    ASSERT_TRUE(r.ok()) << r.status();
    for (const PipelinePlan& p : r->pipeline_baselines) {
      if (p.name == r->pinned_name) sends.push_back(p.stage_plans.front().send_seconds);
    }
  }
  ASSERT_EQ(sends.size(), 3u);
  ASSERT_GT(sends[0] - sends[1], 0);
  EXPECT_NEAR(sends[0] - sends[1], 2 * (sends[1] - sends[2]), 1e-9 * sends[0]);
}

TEST(Pins, APinThatCannotFitNamesTheMemoryTerm) {
  const Graph g = ZooTrainingGraph(kGpt);
  auto r = SearchPlan(g, CpuOptions(4, "300KiB", "tp=1,pp=2,dp=2,mbs=1,recompute=off,schedule=1f1b"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  EXPECT_NE(r.status().message().find("the largest term is its"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("Megatron TP=1 x PP=2 x DP=2"), std::string::npos) << r.status();
  // Without stages too: the pinned flat configuration's terms, not only the least memory of all.
  auto flat = SearchPlan(g, CpuOptions(4, "300KiB", "tp=2,dp=2,recompute=off"));
  ASSERT_FALSE(flat.ok());
  EXPECT_EQ(flat.status().code(), absl::StatusCode::kResourceExhausted) << flat.status();
  EXPECT_NE(flat.status().message().find("the pinned configuration 'Megatron TP=2 x DP=2'"), std::string::npos) << flat.status();
  EXPECT_NE(flat.status().message().find("the largest term is its"), std::string::npos) << flat.status();
}

TEST(Pins, MicroBatchSizeNeedsTheDataDegree) {
  const Graph g = ZooTrainingGraph(kGpt);
  auto r = SearchPlan(g, CpuOptions(8, "64MiB", "mbs=1"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("pin dp too"), std::string::npos) << r.status();
  auto odd = SearchPlan(g, CpuOptions(8, "64MiB", "dp=8,mbs=3"));
  ASSERT_FALSE(odd.ok());
  EXPECT_NE(odd.status().message().find("does not divide the global batch of 8"), std::string::npos) << odd.status();
}

}  // namespace
}  // namespace mapd

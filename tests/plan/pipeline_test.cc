// Pipeline stages (DESIGN §6b): the layer sequence and the stage graphs, the activations a stage
// keeps in flight, and the pipeline search's step time, memory, cut and Megatron baselines.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "common/bytes.h"
#include "model/graph/builder.h"
#include "model/graph/loss.h"
#include "model/graph/verifier.h"
#include "planner/plan/cost_graph.h"
#include "planner/plan/pipeline_search.h"
#include "planner/plan/planner.h"
#include "planner/plan/schedule_svg.h"
#include "planner/plan/stages.h"
#include "tests/common/zoo_training_graph.h"

namespace mapd {
namespace {

constexpr const char* kGpt = "gpt2:layers=4,hidden=32,heads=4,vocab=64,seq=64,batch=8";

PlannerOptions CpuOptions(int64_t devices, int stages, const std::string& memory) {
  PlannerOptions o;
  o.cluster.devices = devices;
  o.cluster.device_type = "cpu";
  o.cluster.memory_per_device = *ParseBytes(memory);
  o.micro_batches = 0;
  o.pipeline_stages = stages;
  o.recompute = false;
  return o;
}

TEST(Stages, AGptCutsIntoStagesThatTogetherHoldEveryNodeOnce) {
  const Graph g = ZooTrainingGraph(kGpt);
  auto seq = FindLayerSequence(g);
  ASSERT_TRUE(seq.ok()) << seq.status();
  ASSERT_EQ(seq->layers, (std::vector<std::string>{"h.0", "h.1", "h.2", "h.3"}));
  // Alike layers have one kind.
  EXPECT_EQ(seq->layer_kind[1], seq->layer_kind[2]);
  auto first = StageGraph(g, *seq, 0, 2);
  auto last = StageGraph(g, *seq, 2, 4);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(last.ok()) << last.status();

  // Every node not made again in each stage (replicable) is in exactly one stage.
  std::multiset<std::string> held;
  for (const Graph* s : {&*first, &*last}) {
    for (int n = 0; n < s->num_nodes(); ++n) held.insert(s->node(n).name());
  }
  for (int n = 0; n < g.num_nodes(); ++n) {
    if (!seq->replicable[n]) EXPECT_EQ(held.count(g.node(n).name()), 1u) << g.node(n).name();
  }
  // What the first stage sends is what the last receives, a gradient going back.
  ASSERT_GE(first->proto().outputs_size(), 1);
  for (const std::string& out : first->proto().outputs()) {
    bool received = false;
    for (const auto& in : last->proto().inputs()) {
      if (in.name() != out) continue;
      received = true;
      EXPECT_EQ(in.role(), kActivationRole) << out;
      EXPECT_EQ(TensorType::FromProto(in.type()), first->TypeOf(out)) << out;
    }
    EXPECT_TRUE(received) << out;
  }
  // The loss stays the last stage's output 0; the tokens feed the first, the targets the last.
  EXPECT_EQ(last->proto().outputs(0), g.proto().outputs(0));
  auto has_input = [](const Graph& s, const std::string& role) {
    for (const auto& in : s.proto().inputs()) {
      if (in.role() == role) return true;
    }
    return false;
  };
  EXPECT_TRUE(has_input(*first, "tokens"));
  EXPECT_TRUE(has_input(*last, "targets"));
  EXPECT_FALSE(has_input(*first, "targets"));
  // The embedding tied to the LM head is in both stages.
  EXPECT_EQ(SharedParameters(*first, *last), (std::vector<std::string>{"wte.weight"}));

  EXPECT_EQ(StageGraph(g, *seq, 2, 2).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(StageGraph(g, *seq, 0, 5).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Stages, AGraphWithoutRepeatedLayersHasNoSequence) {
  GraphBuilder b("one-linear");
  const std::string x = b.Input("x", TensorType{v1::FLOAT32, {4, 8}});
  v1::InitRule init;
  init.set_kind(v1::InitRule::NORMAL);
  init.set_std(0.02);
  b.Output(b.Op("linear", {x, b.Param("fc.weight", TensorType{v1::FLOAT32, {3, 8}}, init)}));
  auto model = b.Build();
  ASSERT_TRUE(model.ok()) << model.status();
  auto trainable = WithTrainingLoss(*model, LossKind::kAuto);
  ASSERT_TRUE(trainable.ok()) << trainable.status();
  auto g = MakeVerifiedGraph(*trainable);
  ASSERT_TRUE(g.ok()) << g.status();
  auto seq = FindLayerSequence(*g);
  EXPECT_EQ(seq.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(seq.status().message().find("--pipeline-stages 1"), std::string::npos) << seq.status();
}

TEST(CostGraph, ActivationsInFlightMultiplyWhatAStageKeeps) {
  const Graph g = ZooTrainingGraph("gpt2:layers=2,hidden=32,heads=4,vocab=64,seq=16,batch=4");
  ClusterOptions co;
  co.mesh = {2};
  co.device_type = "cpu";
  auto cluster = MakeCluster(co);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ProfileOptions po;
  po.device = cluster->device;
  CostGraphOptions one, two;
  one.micro_batches = two.micro_batches = 2;
  two.activations_in_flight = 2;
  auto a = BuildCostGraph(g, *cluster, po, one);
  auto b = BuildCostGraph(g, *cluster, po, two);
  ASSERT_TRUE(a.ok() && b.ok());
  double kept = 0;
  for (size_t n = 0; n < a->costs.size(); ++n) {
    for (size_t k = 0; k < a->costs[n].size(); ++k) {
      const StrategyCost& x = a->costs[n][k];
      const StrategyCost& y = b->costs[n][k];
      EXPECT_DOUBLE_EQ(y.activation_bytes, 2 * x.activation_bytes);
      EXPECT_DOUBLE_EQ(y.parameter_bytes + y.gradient_bytes + y.optimizer_bytes,
                       x.parameter_bytes + x.gradient_bytes + x.optimizer_bytes);
      EXPECT_DOUBLE_EQ(y.seconds(), x.seconds());
      EXPECT_LE(x.once_seconds, x.comm_seconds + 1e-15);
      kept += x.activation_bytes;
    }
  }
  EXPECT_GT(kept, 0);
  CostGraphOptions bad;
  bad.micro_batches = 2;
  bad.activations_in_flight = 3;
  EXPECT_EQ(bad.Validate().code(), absl::StatusCode::kInvalidArgument);
}

TEST(PipelineSearch, StepIsFillDrainAndTheSlowestStageAndEachStageKeepsItsMicroBatches) {
  const Graph g = ZooTrainingGraph(kGpt);
  const PlannerOptions o = CpuOptions(4, 2, "1MiB");
  auto r = SearchPlan(g, o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->pipeline.has_value());
  const PipelinePlan& p = *r->pipeline;
  ASSERT_EQ(p.stages, 2);
  ASSERT_EQ(p.stage_plans.size(), 2u);
  EXPECT_EQ(p.devices(), 4);
  const int64_t m = p.micro_batches;
  EXPECT_GE(m, 2);
  EXPECT_EQ(8 % m, 0);
  double sum = 0, slowest = 0, once = 0, peak = 0;
  int next = 0;
  for (int i = 0; i < p.stages; ++i) {
    const StagePlan& s = p.stage_plans[i];
    EXPECT_EQ(s.first_layer, next) << i;  // contiguous, in order, covering every layer
    EXPECT_GT(s.end_layer, s.first_layer) << i;
    next = s.end_layer;
    EXPECT_EQ(s.in_flight, std::min<int64_t>(p.stages - i, m)) << i;
    EXPECT_TRUE(s.plan.fits) << i;
    EXPECT_LE(s.plan.cost.peak_bytes(), static_cast<double>(o.cluster.memory_per_device)) << i;
    ASSERT_NE(s.graph, nullptr);
    EXPECT_EQ(s.plan.strategies.size(), static_cast<size_t>(s.graph->num_nodes())) << i;
    sum += s.pass_seconds;
    slowest = std::max(slowest, s.pass_seconds);
    once = std::max(once, s.once_seconds);
    peak = std::max(peak, s.plan.cost.peak_bytes());
  }
  EXPECT_EQ(next, 4);
  EXPECT_GT(p.stage_plans[0].send_seconds, 0);   // activations forward, gradients back
  EXPECT_EQ(p.stage_plans[1].send_seconds, 0);   // the last stage sends nothing
  const double pipeline = sum + static_cast<double>(m - 1) * slowest;
  EXPECT_NEAR(p.step_seconds, pipeline + once, 1e-12);
  EXPECT_NEAR(p.bubble_fraction, 1 - static_cast<double>(m) * sum / (p.stages * pipeline), 1e-12);
  EXPECT_GT(p.bubble_fraction, 0);
  EXPECT_LT(p.bubble_fraction, 1);
  EXPECT_DOUBLE_EQ(p.peak_bytes, peak);
}

TEST(PipelineSearch, StageZeroKeepsAsManyMicroBatchesOfActivationsAsItsDepth) {
  // The first stage's graph planned alone at depth 1 and 2 (no budget to speak of, so the same
  // choice): its activations double, nothing else changes.
  const Graph g = ZooTrainingGraph(kGpt);
  auto seq = FindLayerSequence(g);
  ASSERT_TRUE(seq.ok());
  auto stage = StageGraph(g, *seq, 0, 2);
  ASSERT_TRUE(stage.ok()) << stage.status();
  PlannerOptions o = CpuOptions(2, 1, "64GiB");
  o.cluster.mesh = {2};
  o.cluster.devices = 0;
  o.micro_batches = 4;
  o.zero_stage = 0;
  o.baselines = false;
  auto one = SearchPlan(*stage, o);
  o.pipeline_depth = 2;
  auto two = SearchPlan(*stage, o);
  ASSERT_TRUE(one.ok() && two.ok());
  EXPECT_GT(one->plan.cost.activation_bytes, 0);
  EXPECT_DOUBLE_EQ(two->plan.cost.activation_bytes, 2 * one->plan.cost.activation_bytes);
  EXPECT_DOUBLE_EQ(two->plan.cost.parameter_bytes, one->plan.cost.parameter_bytes);
  EXPECT_DOUBLE_EQ(two->plan.cost.step_seconds, one->plan.cost.step_seconds);
}

TEST(PipelineSearch, AutoIsNeverSlowerThanAFittingMegatronPipelineOrThePlanWithoutStages) {
  const Graph g = ZooTrainingGraph(kGpt);
  const PlannerOptions o = CpuOptions(8, 0, "2MiB");
  auto r = SearchPlan(g, o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_FALSE(r->pipeline_baselines.empty());
  std::set<int> stage_counts;
  for (const PipelinePlan& b : r->pipeline_baselines) {
    stage_counts.insert(b.stages);
    EXPECT_EQ(b.name.rfind("Megatron TP=", 0), 0u) << b.name;
    EXPECT_EQ(4 % b.stages, 0) << b.name;  // PP divides the layers
    EXPECT_EQ(b.devices(), 8) << b.name;
  }
  EXPECT_EQ(stage_counts, (std::set<int>{2, 4}));
  const double best = r->pipeline ? r->pipeline->step_seconds : r->plan.cost.step_seconds;
  ASSERT_TRUE(r->fits || r->pipeline);
  for (const PipelinePlan& b : r->pipeline_baselines) {
    if (b.applicable && b.fits) EXPECT_LE(best, b.step_seconds * (1 + 1e-9)) << b.name;
  }
  if (r->pipeline) {
    EXPECT_TRUE(r->pipeline->fits);
    if (r->fits) EXPECT_LT(r->pipeline->step_seconds, r->plan.cost.step_seconds);
  }
}

TEST(PipelineSearch, MegatronPipelinesPrunedByTheirBoundAreNeverTheFastest) {
  // 8 devices, 16 layers: PP 2, 4, 8 with TP 1 to 8/PP — some pruned by their lower bound, which
  // must be below what solving them gives, and the fastest Megatron plan must be the same.
  const Graph g = ZooTrainingGraph("gpt2:layers=16,hidden=32,heads=4,vocab=64,seq=64,batch=16");
  PlannerOptions o = CpuOptions(8, 0, "64MiB");
  auto pruned = SearchPlan(g, o);
  ASSERT_TRUE(pruned.ok()) << pruned.status();
  o.prune_pipeline_baselines = false;
  auto all = SearchPlan(g, o);
  ASSERT_TRUE(all.ok()) << all.status();
  std::map<std::string, const PipelinePlan*> solved;
  for (const PipelinePlan& b : all->pipeline_baselines) {
    EXPECT_FALSE(b.pruned) << b.name;
    solved[b.name] = &b;
  }
  auto fastest = [](const PlanResult& r) {
    double best = 1e300;
    for (const PipelinePlan& b : r.pipeline_baselines) {
      if (b.applicable && b.fits && !b.pruned) best = std::min(best, b.step_seconds);
    }
    for (const PlanCandidate& b : r.baselines) {
      if (b.applicable && b.fits && b.name.rfind("Megatron", 0) == 0) best = std::min(best, b.cost.step_seconds);
    }
    return best;
  };
  int pruned_count = 0;
  for (const PipelinePlan& b : pruned->pipeline_baselines) {
    ASSERT_TRUE(solved.count(b.name)) << b.name;
    if (!b.pruned) continue;
    ++pruned_count;
    const PipelinePlan& real = *solved[b.name];
    if (real.applicable) EXPECT_LE(b.step_seconds, real.step_seconds * (1 + 1e-9)) << b.name << ": the bound is over the plan";
    EXPECT_GE(b.step_seconds, fastest(*pruned)) << b.name;
  }
  EXPECT_GT(pruned_count, 0);
  EXPECT_EQ(pruned->pipeline_baselines.size(), all->pipeline_baselines.size());
  EXPECT_DOUBLE_EQ(fastest(*pruned), fastest(*all));
}

TEST(PipelineSearch, OneThreadAndTwoGiveTheSameResult) {
  // With two threads the pipeline search's bounds and exploration run beside the search without
  // stages; each step reads what the sequential order gives it, so nothing may differ.
  // (At 2 MiB with recomputation: some (stages, mesh, micro-batches) solved, others pruned, and a
  // pipeline chosen over the plan without stages.)
  const Graph g = ZooTrainingGraph("gpt2:layers=8,hidden=64,heads=4,vocab=64,seq=128,batch=16");
  PlannerOptions o = CpuOptions(8, 0, "2MiB");
  o.recompute = true;
  o.threads = 1;
  auto one = SearchPlan(g, o);
  ASSERT_TRUE(one.ok()) << one.status();
  o.threads = 2;
  auto two = SearchPlan(g, o);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(one->pipeline_configs_solved, two->pipeline_configs_solved);
  EXPECT_EQ(one->pipeline_configs_pruned, two->pipeline_configs_pruned);
  EXPECT_GT(one->pipeline_configs_solved, 0);
  EXPECT_GT(one->pipeline_configs_pruned, 0);
  ASSERT_TRUE(one->pipeline.has_value());
  ASSERT_TRUE(two->pipeline.has_value());
  {
    EXPECT_EQ(one->pipeline->MeshString(), two->pipeline->MeshString());
    EXPECT_EQ(one->pipeline->micro_batches, two->pipeline->micro_batches);
    EXPECT_DOUBLE_EQ(one->pipeline->step_seconds, two->pipeline->step_seconds);
  }
  EXPECT_DOUBLE_EQ(one->plan.cost.step_seconds, two->plan.cost.step_seconds);
  auto listed = [](const PlanResult& r) {
    std::vector<std::tuple<std::string, bool, double>> out;
    for (const PipelinePlan& p : r.pipelines) out.emplace_back(p.MeshString(), p.fits, p.step_seconds);
    for (const PipelinePlan& b : r.pipeline_baselines) out.emplace_back(b.name, b.pruned, b.step_seconds);
    return out;
  };
  EXPECT_EQ(listed(*one), listed(*two));
  PlannerOptions bad = o;
  bad.threads = 3;
  EXPECT_EQ(bad.Validate().code(), absl::StatusCode::kInvalidArgument);
}

TEST(PipelineSearch, ATaskDroppedUnfinishedStopsAndFinishWantsThePlanWithoutStages) {
  // The planner drops its task on any error of its own search: before the plan without stages is
  // known (the thread waits for it), or while exploring (the thread stops at the next triple).
  const Graph g = ZooTrainingGraph("gpt2:layers=8,hidden=64,heads=4,vocab=64,seq=128,batch=16");
  PlannerOptions o = CpuOptions(8, 0, "2MiB");
  o.recompute = true;
  const std::vector<int64_t> counts = {1, 2, 4, 8, 16};
  for (int threads : {1, 2}) {
    o.threads = threads;
    {
      auto waiting = PipelineSearchTask::Start(g, o, counts);
      ASSERT_TRUE(waiting.ok()) << waiting.status();
      PlanResult r;
      const absl::Status early = (*waiting)->Finish(r);
      EXPECT_EQ(early.code(), absl::StatusCode::kInternal) << early;
    }  // dropped while waiting for the plan without stages
    {
      auto exploring = PipelineSearchTask::Start(g, o, counts);
      ASSERT_TRUE(exploring.ok()) << exploring.status();
      (*exploring)->ExploreBelow(std::numeric_limits<double>::infinity());
    }  // dropped while (or after) exploring
    auto whole = PipelineSearchTask::Start(g, o, counts);
    ASSERT_TRUE(whole.ok()) << whole.status();
    (*whole)->ExploreBelow(std::numeric_limits<double>::infinity());
    PlanResult r;
    r.global_batch = 16;
    ASSERT_TRUE((*whole)->Finish(r).ok());
    EXPECT_FALSE(r.pipelines.empty()) << "threads " << threads;
  }
}

TEST(PipelineSearch, StagesThatCannotBeAreRefusedNamingWhy) {
  const Graph g = ZooTrainingGraph(kGpt);
  auto odd = SearchPlan(g, CpuOptions(4, 3, "1GiB"));
  EXPECT_EQ(odd.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(odd.status().message().find("do not divide 4 devices"), std::string::npos) << odd.status();
  auto many = SearchPlan(g, CpuOptions(8, 8, "1GiB"));
  EXPECT_EQ(many.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(many.status().message().find("for 4 layers"), std::string::npos) << many.status();
  const Graph one = ZooTrainingGraph("gpt2:layers=4,hidden=32,heads=4,vocab=64,seq=64,batch=1");
  auto tiny = SearchPlan(one, CpuOptions(4, 2, "1GiB"));
  EXPECT_EQ(tiny.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(tiny.status().message().find("at least 2 micro-batches"), std::string::npos) << tiny.status();
  PlannerOptions negative = CpuOptions(4, 2, "1GiB");
  negative.pipeline_stages = -1;
  EXPECT_EQ(negative.Validate().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mapd

namespace mapd {
namespace {

TEST(Schedule, OneFOneBOfEqualStagesTakesMPlusPMinusOnePasses) {
  const int p = 4;
  const int64_t m = 6;
  const std::vector<double> passes(p, 3.0);
  const std::vector<ScheduleSlot> slots = OneFOneBSchedule(passes, m);
  ASSERT_EQ(slots.size(), static_cast<size_t>(2 * p * m));
  double makespan = 0;
  std::map<std::tuple<int, int64_t, bool>, const ScheduleSlot*> at;
  for (const ScheduleSlot& s : slots) {
    makespan = std::max(makespan, s.end);
    at[{s.stage, s.micro_batch, s.backward}] = &s;
    EXPECT_DOUBLE_EQ(s.end - s.start, s.backward ? 2.0 : 1.0);
  }
  EXPECT_DOUBLE_EQ(makespan, (m + p - 1) * 3.0);
  for (int i = 0; i < p; ++i) {
    int64_t in_flight = 0, most = 0;
    double busy_until = 0;
    for (const ScheduleSlot& s : slots) {
      if (s.stage != i) continue;
      EXPECT_GE(s.start, busy_until - 1e-12);  // one slot at a time, in order
      busy_until = s.end;
      in_flight += s.backward ? -1 : 1;
      most = std::max(most, in_flight);
      const int64_t j = s.micro_batch;
      if (!s.backward && i > 0) EXPECT_GE(s.start, at.at({i - 1, j, false})->end - 1e-12);
      if (s.backward && i + 1 < p) EXPECT_GE(s.start, at.at({i + 1, j, true})->end - 1e-12);
      if (s.backward) EXPECT_GE(s.start, at.at({i, j, false})->end - 1e-12);
    }
    EXPECT_EQ(most, std::min<int64_t>(p - i, m)) << "stage " << i;  // what the planner charges
  }
}

TEST(Schedule, TheDrawnTimelineHasEverySlotOrSaysHowManyItShows) {
  PipelinePlan plan;
  plan.stages = 2;
  plan.micro_batches = 3;
  plan.stage_plans.resize(2);
  plan.stage_plans[0].pass_seconds = 0.003;
  plan.stage_plans[1].pass_seconds = 0.006;
  const std::string svg = ScheduleSvg(plan);
  EXPECT_EQ(svg.rfind("<svg id=\"schedule\"", 0), 0u);
  size_t rects = 0;
  for (size_t at = svg.find("<rect"); at != std::string::npos; at = svg.find("<rect", at + 1)) ++rects;
  EXPECT_EQ(rects, 2u * 2 * 3 + 2);  // every slot and the two legend squares
  const std::string few = ScheduleSvg(plan, 4);
  EXPECT_NE(few.find("the first 1 drawn"), std::string::npos) << few;
}

}  // namespace
}  // namespace mapd

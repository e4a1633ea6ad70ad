// Pipeline stages run (DESIGN §6b): the 1F1B order, the stages' programs (who sends what to
// whom, tied weights), and — ranks as threads of this process over real Gloo groups — pipeline
// plans that give the losses and final parameters of one device: PP=2 x DP=2, PP=4 and
// PP=2 x TP=2, with 4 micro-batches, on a GPT with its embedding tied to the LM head and on a
// LLaMA.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <thread>

#include "tests/rank/one_device.h"
#include "tests/rank/test_plans.h"
#include "worker/transport/gloo_communicator.h"
#include "worker/rank/one_f_one_b.h"
#include "worker/rank/pipeline_rank.h"

namespace mapd {
namespace {

constexpr char kGpt[] = "gpt2:layers=4,hidden=32,heads=4,vocab=64,seq=8,batch=8";
constexpr char kLlama[] = "llama2-7b:layers=4,hidden=32,heads=4,kv_heads=2,ffn=64,vocab=64,seq=8,batch=8";

TEST(OneFOneB, WarmUpSteadyStateAndCoolDown) {
  EXPECT_EQ(DescribeSchedule(OneFOneBSchedule(0, 2, 4)), "F0 F1 B0 F2 B1 F3 B2 B3");
  EXPECT_EQ(DescribeSchedule(OneFOneBSchedule(1, 2, 4)), "F0 B0 F1 B1 F2 B2 F3 B3");
  EXPECT_EQ(DescribeSchedule(OneFOneBSchedule(0, 4, 2)), "F0 F1 B0 B1");  // fewer micro-batches than stages
  for (int p : {1, 2, 3, 4, 8}) {
    for (int64_t m : {1, 2, 3, 4, 7, 16}) {
      for (int i = 0; i < p; ++i) {
        const auto actions = OneFOneBSchedule(i, p, m);
        ASSERT_EQ(actions.size(), static_cast<size_t>(2 * m));
        std::set<int64_t> in_flight;
        size_t most = 0;
        int64_t next_f = 0, next_b = 0;
        for (const PassAction& a : actions) {
          if (a.forward) {
            EXPECT_EQ(a.micro_batch, next_f++);  // forwards in order
            in_flight.insert(a.micro_batch);
          } else {
            EXPECT_EQ(a.micro_batch, next_b++);  // backwards in order, each after its forward
            EXPECT_EQ(in_flight.erase(a.micro_batch), 1u);
          }
          most = std::max(most, in_flight.size());
        }
        // What the planner charges stage i: min(p − i, m) micro-batches' activations.
        EXPECT_EQ(most, static_cast<size_t>(std::min<int64_t>(p - i, m))) << "stage " << i << " of " << p << ", m " << m;
      }
    }
  }
}

TEST(PipelineLowering, SendsMatchReceivesAndTheTiedEmbedding) {
  const Graph g = ZooTrainingGraph(kGpt);
  auto plan = PipelinePlanToRun(g, 4, 2, 4);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->programs.size(), 4u);
  std::map<std::pair<int, int>, std::string> sent;  // (stage, tag) → value, and its receiver
  for (size_t r = 0; r < plan->programs.size(); ++r) {
    const v1::RankProgram& p = plan->programs[r];
    const v1::PipelineRole& role = p.pipeline();
    EXPECT_EQ(role.stages(), 2);
    EXPECT_EQ(role.stage(), static_cast<int>(r) / 2);
    EXPECT_EQ(PipelineGlobalRank(p), static_cast<int>(r));
    EXPECT_EQ(p.micro_batches(), 4);
    EXPECT_EQ(p.loss().empty(), role.stage() == 0) << "only the last stage computes the loss";
    for (const auto& t : role.sends()) sent[{role.stage(), t.tag()}] = t.value();
    // GPT-2's token embedding is its LM head: both stages hold it.
    ASSERT_EQ(role.tied_size(), 1) << "rank " << r;
    EXPECT_EQ(role.tied(0).name(), "wte.weight");
    EXPECT_EQ(role.tied(0).peer_stage(), 1 - role.stage());
  }
  const v1::PipelineRole& last = plan->programs[2].pipeline();
  ASSERT_GT(last.receives_size(), 0);
  for (const auto& t : last.receives()) {
    EXPECT_EQ(t.peer_stage(), 0);
    EXPECT_EQ(sent[std::make_pair(0, t.tag())], t.value()) << "stage 0 sends with the tag stage 1 receives";
    EXPECT_TRUE(t.gradient()) << t.value();
  }
}

// Runs the pipeline's programs on threads and checks them against one device.
void ExpectPipelineSameAsOneDevice(const Graph& g, const std::vector<v1::RankProgram>& programs, const Reference& ref,
                                   double tolerance) {
  std::vector<RankOutcome> ranks;
  auto mesh_of = [&](int rank) { return PipelineWorldMesh(programs[rank]); };
  RunRanksOnThreads(static_cast<int>(programs.size()), mesh_of, [&](int rank, std::vector<Communicator*> groups, RankOutcome& out) {
    RankTrainerOptions o;
    o.seed = 5;
    o.optimizer = Sgd();
    o.optimizer.max_grad_norm = 1.0;  // clipped over every stage
    auto stage = PipelineRank::Create(g, programs[rank], groups, o);
    if (!stage.ok()) return void(out.error = stage.status().ToString());
    TrainLikeTheReference(**stage, ref, out);
  }, ranks);
  ExpectRanksMatch(programs, ranks, ref, tolerance);
}

class PipelineEquivalence : public ::testing::TestWithParam<const char*> {};

TEST_P(PipelineEquivalence, Pp2Dp2Pp4Pp2Tp2ZeroAndRecomputeWith4MicroBatches) {
  const Graph g = ZooTrainingGraph(GetParam());
  OptimizerOptions clipped = Sgd();
  clipped.max_grad_norm = 1.0;
  const Reference ref = SingleDevice(g, clipped, /*repeat=*/true);
  ASSERT_LT(ref.losses.back(), ref.losses.front());  // the runs really train
  struct Config {
    const char* name;
    int stages;
    int64_t tensor_parallel;  // 0: MAP's own pipeline
    int zero_stage;
    const char* recompute;
  };
  for (const Config& c : {Config{"PP=2 x DP=2 (MAP)", 2, 0, 0, "off"}, Config{"PP=4", 4, 0, 0, "off"},
                          Config{"PP=2 x TP=2 (Megatron)", 2, 2, 0, "off"},
                          Config{"PP=2, ZeRO-2 within the stages, every layer recomputed", 2, 0, 2, "all"},
                          Config{"PP=2, ZeRO-3", 2, 0, 3, "off"}}) {
    SCOPED_TRACE(c.name);
    auto plan = PipelinePlanToRun(g, 4, c.stages, 4, c.tensor_parallel, c.zero_stage, c.recompute);
    ASSERT_TRUE(plan.ok()) << plan.status();
    SCOPED_TRACE(plan->summary);
    ExpectPipelineSameAsOneDevice(g, plan->programs, ref, 1e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, PipelineEquivalence, ::testing::Values(kGpt, kLlama),
                         [](const auto& info) { return std::string(info.param).substr(0, 4); });

}  // namespace
}  // namespace mapd

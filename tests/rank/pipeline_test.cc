// Pipeline stages run (DESIGN §6b): the 1F1B order, the stages' programs (who sends what to
// whom, tied weights), and — ranks as threads of this process over real Gloo groups — pipeline
// plans that give the losses and final parameters of one device: PP=2 x DP=2, PP=4, PP=2 x TP=2
// and interleaved PP=2 x 2 chunks x DP=2, with 4 micro-batches, on a GPT with its embedding tied
// to the LM head and on a LLaMA.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <thread>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "tests/rank/one_device.h"
#include "tests/rank/test_plans.h"
#include "worker/transport/gloo_communicator.h"
#include "planner/plan/one_f_one_b.h"
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

// The makespan of every stage running its actions in order, each chunk's forward of a
// micro-batch after the previous chunk's (on the stage before, the last stage's chunk v − 1
// before stage 0's chunk v) and each backward after the next chunk's: forwards take 1, backwards
// 2. -1 when the stages deadlock.
double SimulatedMakespan(int p, int v, int64_t m) {
  std::vector<std::vector<PassAction>> order(p);
  for (int d = 0; d < p; ++d) order[d] = InterleavedSchedule(d, p, v, m);
  std::map<std::tuple<bool, int, int64_t>, double> done;  // (forward, model chunk, micro-batch) → end
  std::vector<size_t> next(p, 0);
  std::vector<double> free_at(p, 0);
  const int chunks = p * v;
  for (bool progress = true; progress;) {
    progress = false;
    for (int d = 0; d < p; ++d) {
      while (next[d] < order[d].size()) {
        const PassAction& a = order[d][next[d]];
        const int c = a.chunk * p + d;
        double ready = free_at[d];
        if (a.forward && c > 0) {
          auto it = done.find({true, c - 1, a.micro_batch});
          if (it == done.end()) break;
          ready = std::max(ready, it->second);
        }
        if (!a.forward) {
          auto own = done.find({true, c, a.micro_batch});
          if (own == done.end()) break;
          ready = std::max(ready, own->second);
          if (c + 1 < chunks) {
            auto it = done.find({false, c + 1, a.micro_batch});
            if (it == done.end()) break;
            ready = std::max(ready, it->second);
          }
        }
        free_at[d] = ready + (a.forward ? 1 : 2);
        done[{a.forward, c, a.micro_batch}] = free_at[d];
        ++next[d];
        progress = true;
      }
    }
  }
  for (int d = 0; d < p; ++d) {
    if (next[d] < order[d].size()) return -1;
  }
  return *std::max_element(free_at.begin(), free_at.end());
}

TEST(InterleavedOneFOneB, EveryChunkPassOnceKeepsWhatThePlannerChargesAndTakesMVPlusPMinusOnePasses) {
  EXPECT_EQ(DescribeSchedule(InterleavedSchedule(0, 2, 2, 2)), "F0.0 F1.0 F0.1 F1.1 B0.1 B1.1 B0.0 B1.0");
  EXPECT_EQ(DescribeSchedule(InterleavedSchedule(1, 2, 2, 2)), "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 B0.0 B1.0");
  EXPECT_EQ(InterleavedSchedule(1, 4, 1, 8), OneFOneBSchedule(1, 4, 8));
  for (int p : {2, 3, 4}) {
    for (int v : {2, 3}) {
      for (int64_t m : {int64_t{p}, int64_t{2} * p, int64_t{3} * p}) {
        for (int d = 0; d < p; ++d) {
          const auto actions = InterleavedSchedule(d, p, v, m);
          ASSERT_EQ(actions.size(), static_cast<size_t>(2 * m * v));
          std::set<std::pair<int64_t, int>> in_flight, backward_done;
          size_t most = 0;
          for (const PassAction& a : actions) {
            if (a.forward) {
              EXPECT_TRUE(in_flight.insert({a.micro_batch, a.chunk}).second);
            } else {
              EXPECT_EQ(in_flight.erase({a.micro_batch, a.chunk}), 1u) << "a backward before its forward";
              EXPECT_TRUE(backward_done.insert({a.micro_batch, a.chunk}).second);
            }
            most = std::max(most, in_flight.size());
          }
          EXPECT_EQ(backward_done.size(), static_cast<size_t>(m * v));
          // What the planner charges device stage d (pipeline_search.cc, InterleavedInFlight): its
          // warm-up and one more chunk-passes of activations, at most all m·V.
          const int64_t charged = std::min<int64_t>(m * v, 2 * (p - d - 1) + (v - 1) * p + 1);
          EXPECT_EQ(static_cast<int64_t>(most), charged) << "stage " << d << " of " << p << ", V " << v << ", m " << m;
        }
        // The step of equal chunks (a chunk pass 3): the planner's T = Σ u/V + (m − 1/V)·max u with
        // u = 3V per stage is 3(mV + p − 1).
        EXPECT_DOUBLE_EQ(SimulatedMakespan(p, v, m), 3.0 * static_cast<double>(m * v + p - 1)) << "p " << p << ", V " << v << ", m " << m;
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

TEST(PipelineLowering, InterleavedChunksWrapAroundAndTieTheFirstChunkToTheLast) {
  const Graph g = ZooTrainingGraph(kGpt);
  auto plan = PipelinePlanToRun(g, 4, 2, 4, /*tensor_parallel=*/1, 0, "off", /*virtual_stages=*/2);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->programs.size(), 4u);
  std::map<int, std::pair<int, std::string>> sent;  // tag → (device stage, value)
  std::set<std::pair<int, int>> layers;             // every chunk's [first, end)
  for (size_t r = 0; r < plan->programs.size(); ++r) {
    const v1::RankProgram& top = plan->programs[r];
    EXPECT_EQ(PipelineGlobalRank(top), static_cast<int>(r));
    ASSERT_EQ(top.later_chunks_size(), 1) << "rank " << r;
    std::vector<const v1::RankProgram*> chunks{&top, &top.later_chunks(0)};
    for (int v = 0; v < 2; ++v) {
      const v1::PipelineRole& role = chunks[v]->pipeline();
      EXPECT_EQ(role.stages(), 2);
      EXPECT_EQ(role.stage(), static_cast<int>(r) / 2);
      EXPECT_EQ(role.chunk(), v);
      EXPECT_EQ(role.chunks(), 2);
      EXPECT_EQ(role.schedule(), "interleaved 1F1B");
      EXPECT_EQ(chunks[v]->micro_batches(), 4);
      const bool last = role.stage() == 1 && v == 1;  // the model's chunk 3 of 4
      EXPECT_EQ(chunks[v]->loss().empty(), !last);
      layers.insert({role.first_layer(), role.end_layer()});
      for (const auto& t : role.sends()) {
        sent[t.tag()] = {role.stage(), t.value()};
        EXPECT_EQ(t.peer_stage(), 1 - role.stage()) << "the next chunk is on the other device (stage 1's chunk 0 wraps to stage 0)";
      }
      for (const auto& t : role.receives()) EXPECT_EQ(t.peer_stage(), 1 - role.stage());
      // GPT-2's embedding (the model's chunk 0, stage 0's chunk 0) is its LM head (the last chunk).
      const bool ties = (role.stage() == 0 && v == 0) || last;
      ASSERT_EQ(role.tied_size(), ties ? 1 : 0) << "rank " << r << " chunk " << v;
      if (ties) EXPECT_EQ(role.tied(0).peer_stage(), 1 - role.stage());
    }
  }
  EXPECT_EQ(layers.size(), 4u) << "four chunks of layers";
  for (const v1::RankProgram& top : plan->programs) {
    for (const v1::RankProgram* p : {&top, &top.later_chunks(0)}) {
      for (const auto& t : p->pipeline().receives()) {
        ASSERT_TRUE(sent.count(t.tag())) << t.value();
        EXPECT_EQ(sent[t.tag()], std::make_pair(t.peer_stage(), t.value())) << "the sender's tag is the receiver's";
      }
    }
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

// Interleaved 1F1B: 2 stages x 2 chunks a device over a data-parallel pair, the embedding of
// chunk 0 (stage 0) tied to the LM head of chunk 3 (stage 1), the activations of stage 1's chunk 0
// wrapping around to stage 0's chunk 1; without recomputation and with every layer recomputed.
TEST_P(PipelineEquivalence, InterleavedTwoStagesTimesTwoChunks) {
  const Graph g = ZooTrainingGraph(GetParam());
  OptimizerOptions clipped = Sgd();
  clipped.max_grad_norm = 1.0;
  const Reference ref = SingleDevice(g, clipped, /*repeat=*/true);
  for (const char* recompute : {"off", "all"}) {
    SCOPED_TRACE(absl::StrCat("recompute ", recompute));
    auto plan = PipelinePlanToRun(g, 4, 2, 4, /*tensor_parallel=*/1, 0, recompute, /*virtual_stages=*/2);
    ASSERT_TRUE(plan.ok()) << plan.status();
    SCOPED_TRACE(plan->summary);
    ASSERT_EQ(plan->programs.front().later_chunks_size(), 1);
    ExpectPipelineSameAsOneDevice(g, plan->programs, ref, 1e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, PipelineEquivalence, ::testing::Values(kGpt, kLlama),
                         [](const auto& info) { return std::string(info.param).substr(0, 4); });

}  // namespace
}  // namespace mapd

// What a rank program is predicted to cost: its collectives on the cluster's links, as the
// runtime runs them, and its memory and compute from profiling it as a local graph.
#include "planner/lower/rank_cost.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <string>
#include <iterator>
#include <vector>

#include "planner/lower/local_graph.h"
#include "planner/lower/recompute.h"
#include "planner/lower/lowered_plan.h"
#include "planner/lower/lowering.h"
#include "planner/lower/zero.h"
#include "planner/plan/planner.h"
#include "planner/profile/bucket_size.h"
#include "planner/profile/profiler.h"
#include "planner/sharding/collectives.h"
#include "tests/common/mlp_graph.h"
#include "tests/common/zoo_training_graph.h"

namespace mapd {
namespace {

struct Lowered {
  Graph graph;
  v1::RankProgram program;
  Cluster cluster;
};

Lowered LowerMlp(int64_t batch, int64_t hidden, int64_t ffn, int64_t classes, int64_t devices) {
  Graph g = TwoLayerMlp(batch, hidden, ffn, classes);
  PlannerOptions o;
  o.cluster.mesh = {devices};
  o.cluster.device_type = "h100-80g";
  o.zero_stage = 0;
  o.baselines = false;
  auto r = SearchPlan(g, o);
  EXPECT_TRUE(r.ok()) << r.status();
  auto p = LowerForRank(g, {devices}, r->plan.strategies, 0);
  EXPECT_TRUE(p.ok()) << p.status();
  return {g, *p, r->cluster};
}

// The data-parallel baseline for `g` on 4 devices of `device_type`: its strategies (empty if
// none) and the cluster.
struct DataParallel {
  std::vector<Strategy> strategies;
  Cluster cluster;
};
DataParallel DataParallelOnFour(const Graph& g, const std::string& device_type) {
  PlannerOptions o;
  o.cluster.mesh = {4};
  o.cluster.device_type = device_type;
  o.zero_stage = 0;
  auto r = SearchPlan(g, o);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {};
  for (const PlanCandidate& b : r->baselines) {
    if (b.name == "data parallel") return {b.strategies, r->cluster};
  }
  return {};
}

TEST(RankCost, MegatronMlpPaysOneAllReduceOfTheLogits) {
  const Lowered l = LowerMlp(/*batch=*/4, /*hidden=*/8192, /*ffn=*/32768, /*classes=*/10, 8);
  auto s = CommunicationSeconds(l.program, l.cluster);
  ASSERT_TRUE(s.ok()) << s.status();
  // fc2's partial [4, 10] f32 output (160 bytes), all-reduced over 8 devices, and nothing else.
  EXPECT_DOUBLE_EQ(*s, CollectiveSeconds(CollectiveKind::kAllReduce, 160, 8, l.cluster.links[0]));
}

// The runtime all-reduces data parallelism's gradients a bucket at a time (25 MiB; here all of
// them, one dtype, in one) and the step's loss once: a collective each, not one per weight.
TEST(RankCost, DataParallelPaysAnAllReducePerBucketAndOneForTheLoss) {
  const Lowered l = LowerMlp(/*batch=*/65536, /*hidden=*/64, /*ffn=*/256, /*classes=*/8, 4);
  auto s = CommunicationSeconds(l.program, l.cluster);
  ASSERT_TRUE(s.ok()) << s.status();
  int64_t bytes = 0;
  for (const auto& shard : l.program.parameters()) bytes += TensorType::FromProto(shard.local_type()).NumBytes();
  ASSERT_EQ(l.program.loss_partial_axes_size(), 1);
  const double want = CollectiveSeconds(CollectiveKind::kAllReduce, bytes, 4, l.cluster.links[0]) +
                      CollectiveSeconds(CollectiveKind::kAllReduce, 8, 4, l.cluster.links[0]);
  EXPECT_GT(bytes, 0);
  EXPECT_DOUBLE_EQ(*s, want);
}

TEST(RankCost, PredictionIsTheLocalGraphsProfilePlusCommunication) {
  const Lowered l = LowerMlp(/*batch=*/64, /*hidden=*/64, /*ffn=*/256, /*classes=*/8, 4);
  ProfileOptions po;
  po.timeline = false;
  auto p = PredictRank(l.graph, l.program, l.cluster, po);
  ASSERT_TRUE(p.ok()) << p.status();
  auto local = LocalGraph(l.graph, l.program);
  ASSERT_TRUE(local.ok()) << local.status();
  po.device = l.cluster.device;
  auto report = ProfileTrainingStep(*local, po);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(p->peak_bytes, report->predicted_peak_bytes);
  EXPECT_DOUBLE_EQ(p->compute_seconds, report->predicted_step_seconds());
  EXPECT_DOUBLE_EQ(p->step_seconds(), p->compute_seconds + *CommunicationSeconds(l.program, l.cluster));
}

TEST(RankCost, AStepOnAnAxisTheClusterLacksIsAnError) {
  Lowered l = LowerMlp(/*batch=*/65536, /*hidden=*/64, /*ffn=*/256, /*classes=*/8, 4);
  for (auto& ins : *l.program.mutable_instructions()) {
    if (ins.has_communicate()) ins.mutable_communicate()->set_axis(3);
  }
  auto s = CommunicationSeconds(l.program, l.cluster);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("axis 3"), std::string::npos) << s.status();
}

// Activation checkpointing: a segment per repeated layer, covering every instruction of the
// layer (its GRAD_SYNCs included); the prediction keeps less and computes more.
TEST(Recompute, ASegmentPerLayerThatKeepsLessAndComputesMore) {
  const Graph g = ZooTrainingGraph("gpt2:layers=2,hidden=32,heads=4,vocab=64,seq=64,batch=8");
  const DataParallel dp = DataParallelOnFour(g, "cpu");
  ASSERT_FALSE(dp.strategies.empty());
  auto plain = LowerForRank(g, {4}, dp.strategies, 0);
  ASSERT_TRUE(plain.ok()) << plain.status();
  v1::RankProgram program = *plain;
  ASSERT_EQ(RepeatedLayers(g), (std::vector<std::string>{"h.0", "h.1"}));
  ASSERT_TRUE(MarkRecompute(g, RepeatedLayers(g), &program).ok());
  ASSERT_EQ(program.recompute_size(), 2);
  for (const auto& seg : program.recompute()) {
    int syncs = 0;
    for (int i = 0; i < program.instructions_size(); ++i) {
      const auto& ins = program.instructions(i);
      const bool inside = i >= seg.first() && i <= seg.last();
      if (ins.has_compute() && LayerOfScope(g.node(ins.compute().node()).scope()) == seg.layer()) EXPECT_TRUE(inside) << i;
      if (inside && ins.has_communicate()) ++syncs;
    }
    EXPECT_GT(syncs, 0) << seg.layer();  // the layer's weights' GRAD_SYNCs are inside
  }
  ProfileOptions po;
  po.timeline = false;
  auto without = PredictRank(g, *plain, dp.cluster, po);
  auto with = PredictRank(g, program, dp.cluster, po);
  ASSERT_TRUE(without.ok() && with.ok());
  EXPECT_LT(with->peak_bytes, 0.75 * without->peak_bytes);
  EXPECT_GT(with->compute_seconds, without->compute_seconds);
  v1::RankProgram bad = *plain;
  EXPECT_EQ(MarkRecompute(g, {"h.7"}, &bad).code(), absl::StatusCode::kInvalidArgument);
}

// ZeRO-2's buckets keep buffers (up to two staging buffers of a bucket, planner/lower/zero.h):
// one bucket of all the parameters by default. Where a rank's program is over the budget, the
// lowering makes the buckets smaller — halves, thirds, ... (kZeroBucketFitParts), the fewest that
// fit — then turns them off, and every program says which.
TEST(RankCost, ZeroBucketsAreMadeSmallerAndThenTurnedOffToFitTheBudget) {
  const Graph g = ZooTrainingGraph("gpt2:layers=2,hidden=32,heads=4,vocab=64,seq=8,batch=4");
  const DataParallel dp = DataParallelOnFour(g, "h100-80g");
  ASSERT_FALSE(dp.strategies.empty());
  auto lower = [&](int64_t budget) { return LowerAndPredict(g, {4}, dp.strategies, 2, {}, "h100-80g", ProfileOptions(), 1, budget); };
  auto one = lower(0);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->programs[0].zero_bucket_parts(), 0);
  const auto sets = ZeroGradientBuckets(one->programs[0], kDefaultBucketBytes);
  ASSERT_EQ(sets.size(), 1u);
  EXPECT_EQ(sets[0].buckets.size(), 1u);
  EXPECT_EQ(sets[0].staging_buffers, 1);
  const std::vector<int> fit(std::begin(kZeroBucketFitParts), std::end(kZeroBucketFitParts));
  auto smaller = lower(one->WorstPeak() - 1);
  ASSERT_TRUE(smaller.ok()) << smaller.status();
  const int parts = smaller->programs[3].zero_bucket_parts();
  auto at = std::find(fit.begin(), fit.end(), parts);
  ASSERT_NE(at, fit.end()) << parts;
  EXPECT_LT(smaller->WorstPeak(), one->WorstPeak());
  // At most `parts` buckets, balanced: none over 1/parts of the set by more than its largest parameter.
  const ZeroBucketSet cut = ZeroGradientBuckets(smaller->programs[3], kDefaultBucketBytes)[0];
  EXPECT_LE(cut.buckets.size(), static_cast<size_t>(parts));
  EXPECT_GT(cut.buckets.size(), 1u);
  int64_t total = 0, largest_param = 0;
  for (const ZeroParam& z : cut.params) {
    total += z.chunk;
    largest_param = std::max(largest_param, z.chunk);
  }
  for (const ZeroBucket& b : cut.buckets) EXPECT_LE(b.segment, (total + parts - 1) / parts + largest_param);
  // Just under that: more parts (or none), and a lower peak.
  auto tighter = lower(smaller->WorstPeak() - 1);
  ASSERT_TRUE(tighter.ok()) << tighter.status();
  const int tighter_parts = tighter->programs[0].zero_bucket_parts();
  EXPECT_TRUE(tighter_parts == -1 || tighter_parts > parts) << tighter_parts;
  EXPECT_LT(tighter->WorstPeak(), smaller->WorstPeak());
  auto none = lower(1);  // nothing fits: the last, no buckets
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->programs[0].zero_bucket_parts(), -1);
  EXPECT_TRUE(ZeroGradientBuckets(none->programs[0], kDefaultBucketBytes).empty());
  EXPECT_LT(none->WorstPeak(), smaller->WorstPeak());
}


// ZeRO-3 reduces each bucket once and gathers it in forward; backward gathers again only the
// buckets the two gather buffers no longer hold (all but gradient order's first two). With
// exchanges of latency 1 and no bandwidth term, the communication is their count: the loss's
// all-reduce (one exchange), k bucket reductions (reduce-scatters, one exchange each: NCCL's, or
// through shared memory on a CPU host) and k + max(0, k - 2) all-gathers.
TEST(RankCost, ZeroThreeGathersInBackwardOnlyWhatItsBuffersNoLongerHold) {
  const Graph g = ZooTrainingGraph("gpt2:layers=2,hidden=32,heads=4,vocab=64,seq=8,batch=4");
  DataParallel dp = DataParallelOnFour(g, "h100-80g");
  ASSERT_FALSE(dp.strategies.empty());
  auto lowered = LowerAndPredict(g, {4}, dp.strategies, 3, {}, "h100-80g", ProfileOptions(), 1, 0);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  dp.cluster.links[0] = AxisLink{1.0, 0.0, false};
  for (int parts : {1, 2, 4}) {
    v1::RankProgram program = lowered->programs[0];
    program.set_zero_bucket_parts(parts);
    const auto sets = ZeroGradientBuckets(program, kDefaultBucketBytes);
    ASSERT_EQ(sets.size(), 1u);
    const int64_t k = static_cast<int64_t>(sets[0].buckets.size());
    EXPECT_EQ(k, parts);
    auto s = CommunicationSeconds(program, dp.cluster);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_DOUBLE_EQ(*s, static_cast<double>(1 + k + k + std::max<int64_t>(0, k - 2))) << parts << " parts";
    Cluster host = dp.cluster;
    host.device.accelerator = false;
    auto cpu = CommunicationSeconds(program, host);
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    EXPECT_DOUBLE_EQ(*cpu, static_cast<double>(1 + k + k + std::max<int64_t>(0, k - 2))) << parts << " parts";
  }
}

// Data parallelism over both axes of a 2x2 mesh: each parameter's gradient is a chain of two
// GRAD_SYNCs, bucketed (zero.h BucketedGradSyncs) — one bucket, all-reduced over each axis —
// and the loss summed over each: with exchanges of latency 1 and no bandwidth term, 2 x 2 for
// the bucket and 1 + 1 for the loss, not an all-reduce per parameter per axis (56 here). The
// targets' slices cost nothing: an integer tensor has no gradient to gather back.
TEST(RankCost, DataParallelOverTwoAxesPaysABucketAllReducePerAxis) {
  const Graph g = ZooTrainingGraph("gpt2:layers=2,hidden=32,heads=4,vocab=64,seq=8,batch=8");
  PlannerOptions o;
  o.cluster.mesh = {2, 2};
  o.cluster.device_type = "cpu";
  o.zero_stage = 0;
  o.baselines = false;
  auto r = SearchPlan(g, o);  // MAP's plan for this small model: data parallel over both axes
  ASSERT_TRUE(r.ok()) << r.status();
  auto program = LowerForRank(g, {2, 2}, r->plan.strategies, 0);
  ASSERT_TRUE(program.ok()) << program.status();
  const std::vector<ZeroParam> chains = BucketedGradSyncs(*program);
  ASSERT_FALSE(chains.empty());
  for (const ZeroParam& z : chains) EXPECT_EQ(z.axes, (std::vector<int>{0, 1})) << z.name;
  Cluster cluster = r->cluster;
  cluster.links = {AxisLink{1.0, 0.0, false}, AxisLink{1.0, 0.0, false}};
  auto s = CommunicationSeconds(*program, cluster);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_DOUBLE_EQ(*s, 2 * 2 + 2);
}

// A ZeRO set is cut into k contiguous buckets whose largest segment is the least any cut into at
// most k contiguous groups allows (planner/lower/zero.cc), checked against every such cut.
TEST(RankCost, ZeroBucketsAreTheBalancedCutBruteForceFinds) {
  const Graph g = ZooTrainingGraph("gpt2:layers=2,hidden=32,heads=4,vocab=64,seq=8,batch=4");
  const DataParallel dp = DataParallelOnFour(g, "h100-80g");
  ASSERT_FALSE(dp.strategies.empty());
  auto lowered = LowerAndPredict(g, {4}, dp.strategies, 3, {}, "h100-80g", ProfileOptions(), 1, 0);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  v1::RankProgram program = lowered->programs[0];
  for (int parts : {2, 3, 4}) {
    SCOPED_TRACE("parts " + std::to_string(parts));
    program.set_zero_bucket_parts(parts);
    const auto sets = ZeroGradientBuckets(program, kDefaultBucketBytes);
    ASSERT_EQ(sets.size(), 1u);
    const ZeroBucketSet& set = sets[0];
    std::vector<int64_t> chunks;
    for (const ZeroParam& z : set.params) chunks.push_back(z.chunk);
    ASSERT_GE(chunks.size(), 8u);
    // Every cut into at most `parts` groups: choose parts - 1 cut points among the n - 1 gaps.
    int64_t best = INT64_MAX;
    const size_t n = chunks.size();
    std::vector<bool> cut(n - 1, false);
    std::fill(cut.begin(), cut.begin() + (parts - 1), true);
    std::sort(cut.begin(), cut.end());
    do {
      int64_t sum = 0, largest = 0;
      for (size_t i = 0; i < n; ++i) {
        sum += chunks[i];
        if (i + 1 == n || cut[i]) {
          largest = std::max(largest, sum);
          sum = 0;
        }
      }
      best = std::min(best, largest);
    } while (std::next_permutation(cut.begin(), cut.end()));
    int64_t segment = 0;
    size_t params = 0;
    for (const ZeroBucket& b : set.buckets) {
      segment = std::max(segment, b.segment);
      params += b.params.size();
    }
    EXPECT_EQ(segment, best);
    EXPECT_LE(set.buckets.size(), static_cast<size_t>(parts));
    EXPECT_EQ(params, n);
    EXPECT_EQ(set.staging_elements, set.ranks * best);
  }
}

}  // namespace
}  // namespace mapd

// N ranks reproduce one device (DESIGN §7's correctness bar): for a plan, every rank runs its
// lowered program on real Gloo process groups — ranks as threads of this process, a TCPStore on
// a free port — and the losses of 10 steps and the final parameters (each rank's block against
// the same block of the single-device result) match single-device training from the same seed
// and data.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "model/graph/batch_norm_groups.h"
#include "model/graph/loss.h"
#include "model/graph/mixed_precision.h"
#include "model/zoo/zoo.h"
#include "model/graph/verifier.h"
#include "planner/lower/lowering.h"
#include "planner/lower/recompute.h"
#include "planner/lower/zero.h"
#include "planner/plan/micro_batch.h"
#include "tests/rank/one_device.h"
#include "tests/rank/test_plans.h"
#include "worker/transport/gloo_communicator.h"
#include "worker/rank/rank_trainer.h"
#include "worker/runtime/data.h"
#include "worker/runtime/trainer.h"

namespace mapd {
namespace {

// Runs the plan on mesh.size() ranks (threads) and checks them against the reference.
// With `micro_batches` > 1 the strategies are the micro-batch graph's (micro_batch.h), the
// programs are lowered from it, and each step runs that many passes.
void ExpectSameAsOneDevice(const Graph& g, const std::vector<int64_t>& mesh, const std::vector<Strategy>& strategies,
                           const Reference& ref, const OptimizerOptions& optimizer = Sgd(), int zero_stage = 0,
                           bool recompute = false, int64_t micro_batches = 1, double tolerance = 1e-4,
                           int64_t bucket_bytes = RankTrainerOptions{}.bucket_bytes) {
  auto micro = MicroBatchGraph(g, micro_batches);
  ASSERT_TRUE(micro.ok()) << micro.status();
  int world = 1;
  for (int64_t d : mesh) world *= static_cast<int>(d);
  std::vector<RankOutcome> ranks;
  std::vector<v1::RankProgram> programs(world);
  RunRanksOnThreads(world, [&](int) { return mesh; }, [&](int rank, std::vector<Communicator*> groups, RankOutcome& out) {
    auto program = LowerForRank(*micro, mesh, strategies, rank, zero_stage);
    if (!program.ok()) return void(out.error = program.status().ToString());
    program->set_micro_batches(micro_batches);
    if (recompute) {
      if (auto st = MarkRecompute(*micro, RepeatedLayers(*micro), &*program); !st.ok()) return void(out.error = st.ToString());
      if (program->recompute_size() == 0) return void(out.error = "no recompute segment");
    }
    programs[rank] = *program;
    RankTrainerOptions o;
    o.seed = 5;
    o.optimizer = optimizer;
    o.bucket_bytes = bucket_bytes;
    auto trainer = RankTrainer::Create(g, *program, groups, o);
    if (!trainer.ok()) return void(out.error = trainer.status().ToString());
    TrainLikeTheReference(**trainer, ref, out);
  }, ranks);
  ExpectRanksMatch(programs, ranks, ref, tolerance);
}

class Equivalence : public ::testing::TestWithParam<const char*> {};

TEST_P(Equivalence, DataParallelTensorParallel2x2AndThePlannersPlan) {
  const Graph g = ZooTrainingGraph(GetParam());
  const Reference ref = SingleDevice(g, Sgd(), /*repeat=*/true);
  ASSERT_LT(ref.losses.back(), ref.losses.front());  // the runs really train
  const std::vector<std::pair<std::vector<int64_t>, std::string>> plans = {
      {{4}, "data parallel"}, {{4}, "Megatron TP=4"}, {{2, 2}, "Megatron TP=2 x DP=2"}, {{2, 2}, "MAP"}, {{4}, "MAP"}};
  for (const auto& [mesh, family] : plans) {
    SCOPED_TRACE(family + " on " + std::to_string(mesh.size()) + "-axis mesh");
    ExpectSameAsOneDevice(g, mesh, PlanStrategies(g, mesh, family), ref);
  }
}

// Gradient buckets (grad_buckets.h) change no result: many small buckets (a few parameters each,
// all-reduced while backward goes on), one bucket, and none (a blocking all-reduce per
// parameter) give one device's losses and parameters, under data parallelism and on the
// data-parallel axis of a 2x2 mesh.
TEST(EquivalenceBuckets, SmallBucketsOneBucketAndNone) {
  const Graph g = ZooTrainingGraph("gpt2:layers=2,hidden=32,heads=4,vocab=64,seq=8,batch=4");
  const Reference ref = SingleDevice(g, Sgd(), /*repeat=*/true);
  for (int64_t bucket_bytes : {int64_t{2048}, RankTrainerOptions{}.bucket_bytes, int64_t{0}}) {
    SCOPED_TRACE("bucket bytes " + std::to_string(bucket_bytes));
    ExpectSameAsOneDevice(g, {4}, PlanStrategies(g, {4}, "data parallel"), ref, Sgd(), 0, false, 1, 1e-5, bucket_bytes);
    ExpectSameAsOneDevice(g, {2, 2}, PlanStrategies(g, {2, 2}, "Megatron TP=2 x DP=2"), ref, Sgd(), 0, false, 1, 1e-5,
                          bucket_bytes);
  }
}

// ResNet under data parallelism: batch norms are synchronised (each rank's per-channel sums are
// all-reduced, and so are their gradients), so the statistics are those of the whole batch, as
// on one device, without gathering a batch norm's input. ResNet-50 on
// 32x32 images is ill-conditioned (the last stage's batch norms see 8 values per channel):
// rounding differences grow by one to two orders of magnitude per step once the loss falls
// fast, so one device against itself with 1 and 2 threads drifts by percents within 10 random
// batches. In f64, on one repeated batch at lr 3e-3, the 4 ranks stay within 1e-10 of one device
// for 10 steps (at lr 1e-2 they reach 1e-4 at step 9), so the plan itself is exact.
TEST(EquivalenceResNet, DataParallel) {
  const Graph g = ZooTrainingGraph("resnet50:image=32,batch=8,classes=10,dtype=f64");
  const Reference ref = SingleDevice(g, Sgd(0.003), /*repeat=*/true);
  ASSERT_LT(ref.losses.back(), ref.losses.front());
  ExpectSameAsOneDevice(g, {4}, PlanStrategies(g, {4}, "data parallel"), ref, Sgd(0.003));
}

// Batch norm over each rank's share of the batch (--batch-norm local, batch_norm_groups.h): the
// grouped graph on 2 data-parallel ranks — no rank reads another's statistics, the groups' sums
// added only for the running statistics — equals one device running the same grouped graph.
// Eight samples a group, as the synchronised test's batch: the last stage's maps are 1x1, and
// batch norms over fewer values grow the last bits by which one process and the ranks differ
// (the same sums in another order) too fast to compare ten steps (groups of four at lr 3e-3:
// 2e-14, 2e-11, 2e-8 after 2, 3, 4 steps; of two, 1e-3 after one).
TEST(EquivalenceResNet, BatchNormPerRank) {
  auto built = BuildZooModel("resnet50:image=32,batch=16,classes=10,dtype=f64");
  ASSERT_TRUE(built.ok()) << built.status();
  auto trainable = WithTrainingLoss(*std::move(built), LossKind::kAuto);
  ASSERT_TRUE(trainable.ok()) << trainable.status();
  auto grouped = GroupBatchNorms(*std::move(trainable), 2);
  ASSERT_TRUE(grouped.ok()) << grouped.status();
  auto g = MakeVerifiedGraph(*std::move(grouped));
  ASSERT_TRUE(g.ok()) << g.status();
  const Reference ref = SingleDevice(*g, Sgd(0.003), /*repeat=*/true);
  ASSERT_LT(ref.losses.back(), ref.losses.front());
  ExpectSameAsOneDevice(*g, {2}, PlanStrategies(*g, {2}, "data parallel"), ref, Sgd(0.003));
}

// Dropout: every rank draws the global mask as one device does and keeps its block, so data and
// tensor parallelism reproduce one device's losses with dropout on.
TEST(EquivalenceDropout, DataAndTensorParallel) {
  const Graph g = DropoutMlpGraph();
  const Reference ref = SingleDevice(g, Sgd(), /*repeat=*/true);
  ASSERT_LT(ref.losses.back(), ref.losses.front());
  for (const char* family : {"data parallel", "Megatron TP=4"}) {
    SCOPED_TRACE(family);
    ExpectSameAsOneDevice(g, {4}, PlanStrategies(g, {4}, family), ref);
  }
}

// Attention dropout (sdpa's dropout_p): every rank draws the noise over the global attention
// probabilities [b, h, l, s] as one device does and keeps the block of its batch rows and heads,
// so data parallelism (batch split), Megatron (heads split) and MAP's 2x2 plan match one device.
TEST(EquivalenceDropout, AttentionUnderDataTensorAnd2x2) {
  v1::Graph proto = ZooTrainingGraph("gpt2:layers=2,hidden=32,heads=4,vocab=64,seq=8,batch=4").proto();
  int attention = 0;
  for (v1::Node& node : *proto.mutable_nodes()) {
    if (node.op() != "scaled_dot_product_attention") continue;
    (*node.mutable_attrs())["dropout_p"].set_f(0.2);
    ++attention;
  }
  ASSERT_EQ(attention, 2);
  auto g = MakeVerifiedGraph(proto);
  ASSERT_TRUE(g.ok()) << g.status();
  const Reference ref = SingleDevice(*g, Sgd(), /*repeat=*/true);
  // Dropout is active: the losses differ from the same model without it.
  ASSERT_GT(std::abs(SingleDevice(ZooTrainingGraph("gpt2:layers=2,hidden=32,heads=4,vocab=64,seq=8,batch=4"), Sgd(), true).losses[0] -
                     ref.losses[0]), 1e-4);
  const std::vector<std::pair<std::vector<int64_t>, std::string>> plans = {
      {{4}, "data parallel"}, {{4}, "Megatron TP=4"}, {{2, 2}, "MAP"}};
  for (const auto& [mesh, family] : plans) {
    SCOPED_TRACE(family);
    ExpectSameAsOneDevice(*g, mesh, PlanStrategies(*g, mesh, family), ref);
  }
}

// Gradient clipping across shards: the norm over every rank's blocks (replicated ones counted
// once) equals one device's, so clipped runs match too.
TEST(EquivalenceClipping, DataTensorAnd2x2) {
  const Graph g = ZooTrainingGraph("gpt2:layers=2,hidden=32,heads=4,vocab=64,seq=8,batch=4");
  OptimizerOptions clipped = Sgd();
  clipped.max_grad_norm = 0.05;  // well below the gradients' norm: every step clips
  const Reference ref = SingleDevice(g, clipped, /*repeat=*/true);
  ASSERT_LT(ref.losses.back(), ref.losses.front());
  // Clipping is active: the second step's loss differs from an unclipped run's.
  ASSERT_GT(std::abs(SingleDevice(g, Sgd(), /*repeat=*/true).losses[1] - ref.losses[1]), 1e-3);
  const std::vector<std::pair<std::vector<int64_t>, std::string>> plans = {
      {{4}, "data parallel"}, {{4}, "Megatron TP=4"}, {{2, 2}, "MAP"}};
  for (const auto& [mesh, family] : plans) {
    SCOPED_TRACE(family);
    ExpectSameAsOneDevice(g, mesh, PlanStrategies(g, mesh, family), ref, clipped);
  }
}

// ZeRO stages 1 and 2: each rank updates only its shard of every data-parallel parameter (its
// optimizer state a quarter or half the size) and the blocks are gathered back; stage 2 also
// reduce-scatters the gradients. Under data parallelism on 4 ranks, on a 2x2 mesh (parameters
// sharded over one or both axes), and with AdamW and clipping, which read the shards' norms.
TEST(EquivalenceZero, Stages1To3UnderDataParallelAnd2x2) {
  const Graph g = ZooTrainingGraph("gpt2:layers=2,hidden=32,heads=4,vocab=64,seq=8,batch=4");
  const Reference ref = SingleDevice(g, Sgd(), /*repeat=*/true);
  ASSERT_LT(ref.losses.back(), ref.losses.front());
  const std::vector<int64_t> dp = {4}, square = {2, 2};
  for (int stage : {1, 2, 3}) {
    SCOPED_TRACE(stage);
    ExpectSameAsOneDevice(g, dp, PlanStrategies(g, dp, "data parallel"), ref, Sgd(), stage);
    ExpectSameAsOneDevice(g, square, PlanStrategies(g, square, "MAP"), ref, Sgd(), stage);
  }
  OptimizerOptions adam;
  adam.kind = OptimizerOptions::Kind::kAdamW;
  adam.lr = 1e-3;
  adam.max_grad_norm = 0.05;
  const Graph mlp = ZooTrainingGraph("mlp:in=16,hidden=32,layers=2,out=8,batch=8");
  const Reference mlp_ref = SingleDevice(mlp, adam, /*repeat=*/true);
  ExpectSameAsOneDevice(mlp, dp, PlanStrategies(mlp, dp, "data parallel"), mlp_ref, adam, 2);
  ExpectSameAsOneDevice(mlp, dp, PlanStrategies(mlp, dp, "data parallel"), mlp_ref, adam, 3);
}

// Gradient buckets change no result under ZeRO: ZeRO 2-3's (ZeroBuckets in grad_buckets.h) with
// buckets of a few parameters (more buckets than staging buffers, so buffers are waited for and
// reused), one bucket, and none (a reduce-scatter per parameter), on 4 data-parallel ranks and on
// a 2x2 mesh; under ZeRO-3 the blocks are gathered a bucket at a time as well. ZeRO-1 all-reduces
// in data parallelism's buckets (GradBuckets) and cuts its shards from their sums.
TEST(EquivalenceZero, BucketsOfAFewParametersOneBucketAndNone) {
  const Graph g = ZooTrainingGraph("gpt2:layers=2,hidden=32,heads=4,vocab=64,seq=8,batch=4");
  const Reference ref = SingleDevice(g, Sgd(), /*repeat=*/true);
  const std::vector<int64_t> dp = {4}, square = {2, 2};
  auto program = LowerForRank(g, dp, PlanStrategies(g, dp, "data parallel"), 0, 2);
  ASSERT_TRUE(program.ok()) << program.status();
  const auto sets = ZeroGradientBuckets(*program, 2048);
  ASSERT_EQ(sets.size(), 1u);
  EXPECT_GT(sets[0].buckets.size(), 4u);
  EXPECT_EQ(sets[0].staging_buffers, 2);
  for (int stage : {1, 2, 3}) {
    for (int64_t bucket_bytes : {int64_t{2048}, RankTrainerOptions{}.bucket_bytes, int64_t{0}}) {
      SCOPED_TRACE("stage " + std::to_string(stage) + ", bucket bytes " + std::to_string(bucket_bytes));
      ExpectSameAsOneDevice(g, dp, PlanStrategies(g, dp, "data parallel"), ref, Sgd(), stage, false, 1, 1e-5, bucket_bytes);
      ExpectSameAsOneDevice(g, square, PlanStrategies(g, square, "MAP"), ref, Sgd(), stage, false, 1, 1e-5, bucket_bytes);
    }
  }
  // ZeRO-3's recomputed layers gather their blocks again, a bucket at a time, for the rerun.
  ExpectSameAsOneDevice(g, dp, PlanStrategies(g, dp, "data parallel"), ref, Sgd(), 3, /*recompute=*/true, 1, 1e-5, 2048);
}

// The shards are real: ZeRO-2 on 4 data-parallel ranks gives each rank a quarter of every
// weight's optimizer state and no whole gradient after backward.
TEST(EquivalenceZero, ShardsAreAQuarterOfTheBlocks) {
  const Graph g = ZooTrainingGraph("mlp:in=16,hidden=32,layers=2,out=8,batch=8");
  auto program = LowerForRank(g, {4}, PlanStrategies(g, {4}, "data parallel"), 1, 2);
  ASSERT_TRUE(program.ok()) << program.status();
  const std::vector<ZeroParam> zero = ZeroParams(*program);
  ASSERT_EQ(static_cast<int>(zero.size()), program->parameters_size());  // every weight and bias: all replicated
  for (const ZeroParam& z : zero) {
    EXPECT_EQ(z.ranks, 4);
    EXPECT_EQ(z.index, 1);
    EXPECT_EQ(z.chunk, (z.numel + 3) / 4) << z.name;
  }
  EXPECT_EQ(LowerForRank(g, {4}, PlanStrategies(g, {4}, "data parallel"), 1, 4).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Activation checkpointing: every transformer block recomputed in backward from its inputs,
// with attention dropout on (the rerun restores the generator, so it drops what the first run
// dropped), under data parallelism, Megatron TP=4 (collectives inside the segments run again),
// MAP's 2x2 plan, and with ZeRO-2.
TEST(EquivalenceRecompute, EveryBlockUnderDataTensorAnd2x2) {
  v1::Graph proto = ZooTrainingGraph("gpt2:layers=2,hidden=32,heads=4,vocab=64,seq=8,batch=4").proto();
  for (v1::Node& node : *proto.mutable_nodes()) {
    if (node.op() == "scaled_dot_product_attention") (*node.mutable_attrs())["dropout_p"].set_f(0.2);
  }
  auto g = MakeVerifiedGraph(proto);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(RepeatedLayers(*g), (std::vector<std::string>{"h.0", "h.1"}));
  const Reference ref = SingleDevice(*g, Sgd(), /*repeat=*/true);
  const std::vector<std::pair<std::vector<int64_t>, std::string>> plans = {
      {{4}, "data parallel"}, {{4}, "Megatron TP=4"}, {{2, 2}, "MAP"}};
  for (const auto& [mesh, family] : plans) {
    SCOPED_TRACE(family);
    ExpectSameAsOneDevice(*g, mesh, PlanStrategies(*g, mesh, family), ref, Sgd(), 0, /*recompute=*/true);
  }
  ExpectSameAsOneDevice(*g, {4}, PlanStrategies(*g, {4}, "data parallel"), ref, Sgd(), 2, /*recompute=*/true);
  ExpectSameAsOneDevice(*g, {4}, PlanStrategies(*g, {4}, "data parallel"), ref, Sgd(), 3, /*recompute=*/true);
}

// Micro-batches (DESIGN §6a): 2 and 4 passes a step, gradients accumulated, give the losses and
// final parameters of one device stepping the whole batch — under data parallelism, Megatron
// TP=4, MAP's 2x2 plan, ZeRO-1 (reduced once after the passes), ZeRO-2 and ZeRO-3 (reduce-
// scattered each pass), and with every block recomputed — within 1e-5.
TEST(EquivalenceMicroBatches, DataTensor2x2ZeroAndRecompute) {
  const Graph g = ZooTrainingGraph("gpt2:layers=2,hidden=32,heads=4,vocab=64,seq=8,batch=8");
  const Reference ref = SingleDevice(g, Sgd(), /*repeat=*/true);
  ASSERT_LT(ref.losses.back(), ref.losses.front());
  const std::vector<int64_t> dp = {4}, square = {2, 2};
  auto two = MicroBatchGraph(g, 2);  // 4 samples a pass: one per data-parallel rank
  ASSERT_TRUE(two.ok()) << two.status();
  ExpectSameAsOneDevice(g, dp, PlanStrategies(*two, dp, "data parallel"), ref, Sgd(), 0, false, 2, 1e-5);
  ExpectSameAsOneDevice(g, dp, PlanStrategies(*two, dp, "Megatron TP=4"), ref, Sgd(), 0, false, 2, 1e-5);
  ExpectSameAsOneDevice(g, dp, PlanStrategies(*two, dp, "data parallel"), ref, Sgd(), 1, false, 2, 1e-5);
  ExpectSameAsOneDevice(g, dp, PlanStrategies(*two, dp, "data parallel"), ref, Sgd(), 2, false, 2, 1e-5);
  ExpectSameAsOneDevice(g, dp, PlanStrategies(*two, dp, "data parallel"), ref, Sgd(), 3, false, 2, 1e-5);
  ExpectSameAsOneDevice(g, dp, PlanStrategies(*two, dp, "data parallel"), ref, Sgd(), 0, /*recompute=*/true, 2, 1e-5);
  auto four = MicroBatchGraph(g, 4);  // 2 samples a pass: the 2x2 mesh's data-parallel axis
  ASSERT_TRUE(four.ok()) << four.status();
  ExpectSameAsOneDevice(g, square, PlanStrategies(*four, square, "MAP"), ref, Sgd(), 0, false, 4, 1e-5);
  ExpectSameAsOneDevice(g, square, PlanStrategies(*four, square, "MAP"), ref, Sgd(), 2, false, 4, 1e-5);
}

// Dropout under micro-batches: each pass keeps its slice of the whole batch's mask.
TEST(EquivalenceMicroBatches, DropoutKeepsTheWholeBatchsMask) {
  const Graph g = DropoutMlpGraph();
  const Reference ref = SingleDevice(g, Sgd(), /*repeat=*/true);
  auto micro = MicroBatchGraph(g, 2);
  ASSERT_TRUE(micro.ok()) << micro.status();
  ExpectSameAsOneDevice(g, {4}, PlanStrategies(*micro, {4}, "data parallel"), ref, Sgd(), 0, false, 2, 1e-5);
  ExpectSameAsOneDevice(g, {4}, PlanStrategies(*micro, {4}, "Megatron TP=4"), ref, Sgd(), 0, false, 2, 1e-5);
}

// bf16 mixed precision (model/graph/mixed_precision.h): the bf16 graph on 4 ranks — data,
// tensor and 2-D parallel, ZeRO-2 and -3, every block recomputed, 2 micro-batches — gives the
// losses and final parameters of one process training the same bf16 graph within 2e-2 (bf16
// rounds partial sums differently when the work is split), and its loss falls.
TEST(EquivalenceBf16, DataTensor2x2ZeroRecomputeAndMicroBatches) {
  const Graph fp32 = ZooTrainingGraph("gpt2:layers=2,hidden=32,heads=4,vocab=64,seq=8,batch=8");
  auto converted = ToBf16Mixed(fp32.proto());
  ASSERT_TRUE(converted.ok()) << converted.status();
  auto mixed = MakeVerifiedGraph(*std::move(converted));
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  const Graph& g = *mixed;
  const Reference ref = SingleDevice(g, Sgd(), /*repeat=*/true);
  ASSERT_LT(ref.losses.back(), 0.9 * ref.losses.front());
  for (const auto& [name, t] : ref.final_params) EXPECT_EQ(t.scalar_type(), at::kBFloat16) << name;
  const std::vector<int64_t> dp = {4}, square = {2, 2};
  constexpr double kTolerance = 2e-2;
  ExpectSameAsOneDevice(g, dp, PlanStrategies(g, dp, "data parallel"), ref, Sgd(), 0, false, 1, kTolerance);
  ExpectSameAsOneDevice(g, dp, PlanStrategies(g, dp, "Megatron TP=4"), ref, Sgd(), 0, false, 1, kTolerance);
  ExpectSameAsOneDevice(g, square, PlanStrategies(g, square, "MAP"), ref, Sgd(), 0, false, 1, kTolerance);
  ExpectSameAsOneDevice(g, dp, PlanStrategies(g, dp, "data parallel"), ref, Sgd(), 2, false, 1, kTolerance);
  ExpectSameAsOneDevice(g, dp, PlanStrategies(g, dp, "data parallel"), ref, Sgd(), 3, false, 1, kTolerance);
  ExpectSameAsOneDevice(g, square, PlanStrategies(g, square, "MAP"), ref, Sgd(), 0, /*recompute=*/true, 1, kTolerance);
  auto two = MicroBatchGraph(g, 2);
  ASSERT_TRUE(two.ok()) << two.status();
  ExpectSameAsOneDevice(g, dp, PlanStrategies(*two, dp, "data parallel"), ref, Sgd(), 0, false, 2, kTolerance);
}

INSTANTIATE_TEST_SUITE_P(Models, Equivalence,
                         ::testing::Values("gpt2:layers=2,hidden=32,heads=4,vocab=64,seq=8,batch=4",
                                           "llama2-7b:layers=2,hidden=32,heads=4,kv_heads=2,ffn=64,vocab=64,seq=8,batch=4",
                                           "mlp:in=16,hidden=32,layers=2,out=8,batch=8"),
                         [](const auto& info) { return std::string(info.param).substr(0, info.param[0] == 'm' ? 3 : 4); });

}  // namespace
}  // namespace mapd

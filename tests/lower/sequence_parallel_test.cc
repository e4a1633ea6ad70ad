// Sequence parallelism (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
// Transformer Models") as MAP's search finds it: no special case — layer norms and residual adds
// have sharding rules that split their rows, and resharding costs make a reduce-scatter after a
// row-parallel linear and an all-gather before a column-parallel one cheaper than all-reduces
// and replicated norms. A GPT layer's activation bytes under that plan, per rank, from the profile
// of its lowered program, against the paper's formula with every difference accounted for
// (docs/planner.md, "Sequence parallelism").
#include <gtest/gtest.h>

#include <string>

#include "planner/lower/local_graph.h"
#include "planner/lower/lowering.h"
#include "planner/plan/planner.h"
#include "planner/profile/profiler.h"
#include "tests/common/zoo_training_graph.h"

namespace mapd {
namespace {

TEST(SequenceParallel, AGptLayerUnderTp8SplitsNormsOnTheSequenceWithKorthikantisBytes) {
  constexpr int64_t s = 2048, b = 1, h = 4096, a = 32, t = 8;  // bf16: 2-byte activations
  auto mixed = GraphAtPrecision(ZooTrainingGraph("gpt2:layers=2,hidden=4096,heads=32,vocab=50304,seq=2048,batch=1"),
                                Precision::kBf16Mixed);
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  const Graph& g = *mixed;
  // 8-way tensor parallelism (one axis, batch 1: nothing to split but the model), no ZeRO, no
  // recomputation, memory tight: 1.5 GiB a device for a plan that needs 1.37 GiB.
  PlannerOptions o;
  o.cluster.mesh = {t};
  o.cluster.device_type = "h100-80g";
  o.cluster.memory_per_device = int64_t{3} << 29;
  o.profile.precision = Precision::kBf16Mixed;
  o.zero_stage = 0;
  o.recompute = false;
  o.micro_batches = 1;
  o.baselines = false;
  auto r = SearchPlan(g, o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->fits);
  // Every layer norm and residual add of the layers is split on the sequence (dimension 1 of
  // [b, s, h]) over the tensor-parallel axis.
  int split = 0;
  for (int n = 0; n < g.num_nodes(); ++n) {
    const v1::Node& node = g.node(n);
    if (node.scope().rfind("h.", 0) != 0 || (node.op() != "layer_norm" && node.op() != "add")) continue;
    EXPECT_EQ(PlacementToString(r->plan.strategies[n].outputs[0]), "S(1)") << node.name();
    EXPECT_EQ(PlacementToString(r->plan.strategies[n].inputs[0]), "S(1)") << node.name();
    ++split;
  }
  EXPECT_EQ(split, 2 * 4);  // ln_1, add, ln_2, add_1 per layer
  // What rank 0 keeps for the backward of layer h.0, from its lowered program's profile.
  auto program = LowerForRank(g, {t}, r->plan.strategies, 0, 0);
  ASSERT_TRUE(program.ok()) << program.status();
  auto local = LocalGraph(g, *program);
  ASSERT_TRUE(local.ok()) << local.status();
  ProfileOptions po;
  po.precision = Precision::kBf16Mixed;
  po.device = r->cluster.device;
  auto report = ProfileTrainingStep(*local, po);
  ASSERT_TRUE(report.ok()) << report.status();
  int64_t layer = 0;
  for (const auto& op : report->ops) {
    if (op.node.rfind("h.0.", 0) == 0 || op.node.rfind("h.0/", 0) == 0) layer += op.saved_bytes;
  }
  // Korthikanti et al., bytes per layer: s·b·h·(34/t + 5·a·s/(h·t)) with sequence parallelism,
  // s·b·h·(10 + 24/t + 5·a·s/(h·t)) without.
  const int64_t sbh = s * b * h, as2b = a * s * s * b;
  const int64_t with_sp = 34 * sbh / t + 5 * as2b / t, without_sp = 10 * sbh + 24 * sbh / t + 5 * as2b / t;
  const int64_t expected = with_sp
                           - 2 * sbh / t        // no dropout after attention and MLP: their 1-byte masks
                           - 3 * as2b / t       // no attention dropout: its mask (1 byte) and output (2)
                           + s * s              // the causal mask (bool [s, s]) masked_fill keeps
                           + (2 * sbh - 2 * sbh / t)  // c_fc keeps its all-gathered input, not the shard
                           + 2 * (2 * (s * b / t) * 4 + 2 * h * 2);  // per norm: fp32 mean and rstd a row,
                                                                     // its weight and bias as GRAD_SYNC copies
  EXPECT_EQ(layer, expected) << "Korthikanti with SP " << with_sp << ", without " << without_sp;
  EXPECT_LT(layer, without_sp);
}

}  // namespace
}  // namespace mapd

// The symbolic profiler: exact memory on a hand-checked graph, FLOPs against the analytic
// transformer count, options and device profiles.
#include "planner/profile/profiler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "model/graph/builder.h"
#include "model/graph/verifier.h"
#include "planner/profile/timeline_svg.h"
#include "model/zoo/zoo.h"

namespace mapd {
namespace {

using ::testing::HasSubstr;

Graph Verified(absl::StatusOr<v1::Graph> g) {
  EXPECT_TRUE(g.ok()) << g.status();
  auto v = MakeVerifiedGraph(*g);
  EXPECT_TRUE(v.ok()) << v.status();
  return *v;
}

// x[4,8] → linear(w[16,8]) → relu → cross_entropy(labels[4]).
Graph Tiny() {
  GraphBuilder b("tiny");
  auto x = b.Input("x", {v1::FLOAT32, {4, 8}}, "features");
  auto labels = b.Input("labels", {v1::INT64, {4}}, "labels");
  v1::InitRule init;
  init.set_kind(v1::InitRule::ZEROS);
  auto w = b.Param("w", {v1::FLOAT32, {16, 8}}, init);
  auto h = b.Op("linear", {x, w});
  auto r = b.Op("relu", {h});
  b.Output(b.Op("cross_entropy", {r, labels}));
  return Verified(b.Build());
}

ProfileOptions Options(Optimizer o) {
  ProfileOptions opt;
  opt.optimizer = o;
  return opt;
}

// Worked by hand in the comments: bytes of every allocation of the step.
TEST(Profiler, TinyGraphAdamWPeakIsExact) {
  auto r = ProfileTrainingStep(Tiny(), Options(Optimizer::kAdamW));
  ASSERT_TRUE(r.ok()) << r.status();
  // At cross_entropy's backward: w 512 B and its AdamW moments 1024 B; kept for backward:
  // relu output 256, log-softmax 256, x 128, labels 32; transient: loss 4, its gradient 4,
  // the relu output's gradient 256 and, beside it, the log-probabilities' gradient 256. (The
  // in-place AdamW step adds nothing.)
  EXPECT_EQ(r->predicted_peak_bytes, 2728);
  EXPECT_EQ(r->peak_phase, Phase::kBackward);
  EXPECT_EQ(r->peak_breakdown.parameters, 512);
  EXPECT_EQ(r->peak_breakdown.gradients, 0);
  EXPECT_EQ(r->peak_breakdown.optimizer_states, 1024);
  EXPECT_EQ(r->peak_breakdown.saved_activations, 672);
  EXPECT_EQ(r->peak_breakdown.transients, 520);
  EXPECT_EQ(r->params, 128);
  // The optimizer step: w, its gradient and moments, x, labels and the loss.
  EXPECT_EQ(r->timeline.back().phase, Phase::kOptimizer);
  EXPECT_EQ(r->timeline.back().live_bytes, 512 + 512 + 1024 + 128 + 32 + 4);
}

TEST(Profiler, TinyGraphSgdPeakIsInBackward) {
  auto r = ProfileTrainingStep(Tiny(), Options(Optimizer::kSgd));
  ASSERT_TRUE(r.ok()) << r.status();
  // At cross_entropy's backward: w 512; kept: relu output 256, log-softmax 256, x 128,
  // labels 32; transient: loss 4, its gradient 4, relu output's gradient 256 and the
  // log-probabilities' gradient 256.
  EXPECT_EQ(r->predicted_peak_bytes, 1704);
  EXPECT_EQ(r->peak_phase, Phase::kBackward);
  EXPECT_EQ(r->peak_at, "cross_entropy");
  EXPECT_EQ(r->peak_breakdown.saved_activations, 672);
  EXPECT_EQ(r->peak_breakdown.transients, 520);
  // Timeline: start, 3 forward, 3 backward, optimizer.
  ASSERT_EQ(r->timeline.size(), 8u);
  EXPECT_EQ(r->timeline.front().live_bytes, 512 + 128 + 32);
}

TEST(Profiler, FlopsOfTheTinyGraph) {
  auto r = ProfileTrainingStep(Tiny(), Options(Optimizer::kSgd));
  ASSERT_TRUE(r.ok());
  // linear 2*4*8*16 = 1024 forward; its weight gradient 1024 (x needs none).
  EXPECT_DOUBLE_EQ(r->ops[0].forward_flops, 1024);
  EXPECT_DOUBLE_EQ(r->ops[0].backward_flops, 1024);
  EXPECT_EQ(r->ops[1].op, "relu");
  EXPECT_DOUBLE_EQ(r->ops[1].forward_flops, 64);
}

// 6·N·tokens (N: parameters used as matrix weights, i.e. without embedding tables that no
// matmul reads) plus the attention term 12·layers·seq·hidden·tokens.
double AnalyticTrainingFlops(double dense_params, double layers, double seq, double hidden, double tokens) {
  return 6 * dense_params * tokens + 12 * layers * seq * hidden * tokens;
}

struct FlopsCase {
  std::string spec;
  double layers, seq, hidden, batch, vocab_embedding;  // vocab_embedding: elements of untied input tables
  double position_embedding;
};

TEST(Profiler, TrainingFlopsMatchTheAnalyticCount) {
  const FlopsCase cases[] = {
      {"gpt2:batch=8", 12, 1024, 768, 8, 0, 1024 * 768},
      {"gpt2:layers=4,hidden=256,heads=4,seq=512,batch=4", 4, 512, 256, 4, 0, 512 * 256},
      {"gpt2-xl:batch=2", 48, 1024, 1600, 2, 0, 1024 * 1600},
      {"llama2-7b:batch=1", 32, 4096, 4096, 1, 32000.0 * 4096, 0},
      {"llama3-8b:batch=1,seq=2048", 32, 2048, 4096, 1, 128256.0 * 4096, 0},
      {"llama2-70b:batch=1", 80, 4096, 8192, 1, 32000.0 * 8192, 0},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.spec);
    Graph g = Verified(BuildZooModel(c.spec));
    auto r = ProfileTrainingStep(g, Options(Optimizer::kAdamW));
    ASSERT_TRUE(r.ok()) << r.status();
    const double dense = static_cast<double>(r->params) - c.vocab_embedding - c.position_embedding;
    const double analytic = AnalyticTrainingFlops(dense, c.layers, c.seq, c.hidden, c.batch * c.seq);
    const double ratio = r->training_flops() / analytic;
    EXPECT_NEAR(ratio, 1.0, 0.02) << "profiled " << r->training_flops() << " analytic " << analytic;
  }
}

TEST(Profiler, AdamWStatesAndMixedPrecision) {
  Graph g = Verified(BuildZooModel("gpt2:layers=2,hidden=128,heads=4,vocab=512,seq=64"));
  ProfileOptions fp32 = Options(Optimizer::kAdamW);
  auto a = ProfileTrainingStep(g, fp32);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->peak_breakdown.optimizer_states, 2 * 4 * a->params);
  ProfileOptions bf16 = fp32;
  bf16.precision = Precision::kBf16Mixed;
  auto b = ProfileTrainingStep(g, bf16);
  ASSERT_TRUE(b.ok());
  // bf16 weights + fp32 master weights; moments stay fp32. The profiler profiles the bf16 graph
  // (GraphAtPrecision): the same report either way.
  EXPECT_EQ(b->parameter_bytes, 6 * b->params + (a->parameter_bytes - 4 * a->params) / 2);
  auto mixed = GraphAtPrecision(g, Precision::kBf16Mixed);
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  auto c = ProfileTrainingStep(*mixed, bf16);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->predicted_peak_bytes, b->predicted_peak_bytes);
  // The same bf16 graph costed as fp32 still keeps masters for its 16-bit weights (the runtime's rule).
  auto d = ProfileTrainingStep(*mixed, fp32);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->parameter_bytes, b->parameter_bytes);
  EXPECT_EQ(b->peak_breakdown.optimizer_states, 2 * 4 * b->params);
  int64_t saved_fp32 = 0, saved_bf16 = 0;
  for (const auto& l : a->layers) saved_fp32 += l.saved_bytes;
  for (const auto& l : b->layers) saved_bf16 += l.saved_bytes;
  EXPECT_LT(saved_bf16, saved_fp32);  // bf16 activations are kept at half the size
  ProfileOptions momentum = fp32;
  momentum.optimizer = Optimizer::kSgdMomentum;
  auto m = ProfileTrainingStep(g, momentum);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->peak_breakdown.optimizer_states, 4 * m->params);  // one momentum buffer
  EXPECT_LT(m->predicted_peak_bytes, a->predicted_peak_bytes);
}

TEST(Profiler, LargeModelsProfile) {
  Graph g = Verified(BuildZooModel("llama2-70b"));
  ProfileOptions o = Options(Optimizer::kAdamW);
  o.device = *LoadDeviceProfile("h100-80g");
  auto r = ProfileTrainingStep(g, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->params, 68976648192);
  // At least weights + gradients + two moments, all fp32.
  EXPECT_GT(r->predicted_peak_bytes, 16 * r->params);
  EXPECT_GT(r->predicted_step_seconds(), 0);
  EXPECT_EQ(r->layers.size(), 80u + 4u);  // 80 blocks + embeddings, final norm, output, loss
}

TEST(Profiler, RejectsAGraphWithoutAScalarLoss) {
  GraphBuilder b("logits");
  auto x = b.Input("x", {v1::FLOAT32, {4, 8}});
  b.Output(b.Op("relu", {x}));
  auto r = ProfileTrainingStep(Verified(b.Build()), ProfileOptions());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("not a scalar loss"));
}

TEST(Profiler, LayerOfScope) {
  EXPECT_EQ(LayerOfScope("transformer.h.3.attn"), "transformer.h.3");
  EXPECT_EQ(LayerOfScope("layers.12.feed_forward"), "layers.12");
  EXPECT_EQ(LayerOfScope("lm_head"), "lm_head");
  EXPECT_EQ(LayerOfScope("transformer.wte"), "transformer");
  EXPECT_EQ(LayerOfScope(""), "(top)");
}

TEST(DeviceProfiles, CatalogueAndJson) {
  for (const char* name : {"cpu", "a100-40g", "a100-80g", "h100-80g", "h200-141g"}) {
    auto p = LoadDeviceProfile(name);
    ASSERT_TRUE(p.ok()) << name;
    EXPECT_TRUE(p->Validate().ok());
  }
  auto h200 = *LoadDeviceProfile("h200-141g");
  auto back = DeviceProfile::FromJson(h200.ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->memory_bandwidth, h200.memory_bandwidth);
  EXPECT_THAT(std::string(LoadDeviceProfile("tpu-v9").status().message()), HasSubstr("unknown device type 'tpu-v9'"));
  EXPECT_FALSE(DeviceProfile::FromJson("{\"name\": \"x\", \"fp32_flops\": -1}").ok());
  // A measured host's figures go through JSON; small products' rates are interpolated by their
  // FLOPs on a log scale and held at the ends; a product's rate never goes unmeasured.
  DeviceProfile host = *LoadDeviceProfile("cpu");
  host.host_threads = 2;
  host.threads = 1;
  host.matmul_rates = {{1e4, 10e9}, {1e6, 30e9}, {1e8, 90e9}};
  host.host_collectives = {{2, 1e-4, 1e-9, 0.6, 2e-3}};
  host.vector_flops = 4e9;
  host.op_rates = {{"cross_entropy", 5e9}, {"gelu", 16e9}};
  auto measured = DeviceProfile::FromJson(host.ToJson());
  ASSERT_TRUE(measured.ok()) << measured.status();
  EXPECT_EQ(measured->host_threads, 2);
  EXPECT_EQ(measured->threads, 1);
  ASSERT_EQ(measured->matmul_rates.size(), 3u);
  ASSERT_EQ(measured->host_collectives.size(), 1u);
  EXPECT_DOUBLE_EQ(measured->host_collectives[0].alpha, 1e-4);
  EXPECT_DOUBLE_EQ(measured->host_collectives[0].compute_speed, 0.6);
  EXPECT_DOUBLE_EQ(measured->host_collectives[0].busy_alpha, 2e-3);
  EXPECT_DOUBLE_EQ(measured->vector_flops, 4e9);
  EXPECT_EQ(measured->op_rates, host.op_rates);
  EXPECT_DOUBLE_EQ(measured->Fp32Rate(1e5), 20e9);
  EXPECT_DOUBLE_EQ(measured->Fp32Rate(1e2), 10e9);
  EXPECT_DOUBLE_EQ(measured->Fp32Rate(1e12), 90e9);
  EXPECT_DOUBLE_EQ(measured->Fp32Rate(0), host.fp32_flops);
  host.matmul_rates = {{1e6, 30e9}, {1e4, 10e9}};
  EXPECT_THAT(std::string(host.Validate().message()), HasSubstr("by increasing flops"));
  host.matmul_rates.clear();
  host.host_collectives = {{1, 1e-4, 1e-9}};
  EXPECT_THAT(std::string(host.Validate().message()), HasSubstr("ranks >= 2"));
  host.host_collectives = {{2, 1e-4, 1e-9, -0.5}};
  EXPECT_THAT(std::string(host.Validate().message()), HasSubstr("compute_speed in [0, 2]"));
  host.host_collectives = {{2, 1e-4, 1e-9, 0.5, -1e-3}};
  EXPECT_THAT(std::string(host.Validate().message()), HasSubstr("busy_alpha >= 0"));
  host.host_collectives.clear();
  host.vector_flops = -1;
  EXPECT_THAT(std::string(host.Validate().message()), HasSubstr("vector_flops is negative"));
  host.vector_flops = 0;
  host.op_rates = {{"gelu", 0}};
  EXPECT_THAT(std::string(host.Validate().message()), HasSubstr("op 'gelu'"));
  EXPECT_THAT(std::string(ParseOptimizer("lion").status().message()), HasSubstr("sgd, momentum or adamw"));
  EXPECT_THAT(std::string(ParsePrecision("fp8").status().message()), HasSubstr("fp32, or bf16"));
}

// With measured rates of small products, a matrix product is timed at its size's rate, not the
// peak; other ops are not products and keep the roofline.
TEST(Profiler, SmallProductsRunAtTheirMeasuredRate) {
  ProfileOptions o = Options(Optimizer::kSgd);
  o.device = *LoadDeviceProfile("cpu");
  o.device.kernel_overhead_seconds = 0;
  o.device.memory_bandwidth = 1e15;  // every op compute-bound
  auto peak = ProfileTrainingStep(Tiny(), o);
  o.device.matmul_rates = {{1e3, o.device.fp32_flops / 10}, {1e9, o.device.fp32_flops}};
  auto measured = ProfileTrainingStep(Tiny(), o);
  ASSERT_TRUE(peak.ok() && measured.ok());
  auto op = [](const ProfileReport& r, const std::string& name) {
    for (const OpProfile& p : r.ops) {
      if (p.op == name) return p;
    }
    return OpProfile();
  };
  // linear [4, 8] x [8, 16]: 1024 FLOPs a product, a tenth of the peak (and a bit more).
  const double ratio = op(*measured, "linear").forward_seconds / op(*peak, "linear").forward_seconds;
  EXPECT_GT(ratio, 9.0);
  EXPECT_LT(ratio, 10.0);
  EXPECT_DOUBLE_EQ(op(*measured, "relu").forward_seconds, op(*peak, "relu").forward_seconds);
  // A measured vector rate times elementwise arithmetic (relu: its FLOPs over that rate, forward
  // and backward) and leaves the products at theirs.
  o.device.vector_flops = o.device.fp32_flops / 50;
  auto vector = ProfileTrainingStep(Tiny(), o);
  ASSERT_TRUE(vector.ok()) << vector.status();
  const OpProfile relu = op(*vector, "relu");
  EXPECT_GT(relu.forward_flops, 0);
  EXPECT_DOUBLE_EQ(relu.forward_seconds, relu.forward_flops / o.device.vector_flops);
  EXPECT_DOUBLE_EQ(relu.forward_seconds, 50 * op(*peak, "relu").forward_seconds);
  EXPECT_DOUBLE_EQ(op(*vector, "linear").forward_seconds, op(*measured, "linear").forward_seconds);
  // An op with a measured rate of its own (op_rates) runs at it, forward and backward; the
  // others keep their class's.
  o.device.op_rates = {{"relu", o.device.fp32_flops / 200}};
  auto own = ProfileTrainingStep(Tiny(), o);
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_DOUBLE_EQ(op(*own, "relu").forward_seconds, relu.forward_flops / o.device.op_rates["relu"]);
  EXPECT_DOUBLE_EQ(op(*own, "relu").backward_seconds, 4 * relu.backward_seconds);
  EXPECT_DOUBLE_EQ(op(*own, "linear").forward_seconds, op(*measured, "linear").forward_seconds);
}

// A product at a measured rate pays its bytes at the memory bandwidth on top of its arithmetic
// (calibrate measured the rate on operands in cache; a step's come from memory); without
// measured rates it keeps the roofline's larger of the two.
TEST(Profiler, MeasuredProductsPayTheirBytesBesideTheirArithmetic) {
  ProfileOptions o = Options(Optimizer::kSgd);
  o.device = *LoadDeviceProfile("cpu");
  o.device.kernel_overhead_seconds = 0;
  o.device.matmul_rates = {{1e3, 1e9}, {1e9, 1e9}};  // 1 GFLOP/s at every size
  o.device.memory_bandwidth = 1e9;
  auto report = ProfileTrainingStep(Tiny(), o);
  ASSERT_TRUE(report.ok()) << report.status();
  const OpProfile* linear = nullptr;
  for (const OpProfile& p : report->ops) {
    if (p.op == "linear") linear = &p;
  }
  ASSERT_NE(linear, nullptr);
  ASSERT_GT(linear->bytes, 0);
  EXPECT_DOUBLE_EQ(linear->forward_seconds, linear->forward_flops / 1e9 + static_cast<double>(linear->bytes) / 1e9);
  o.device.matmul_rates.clear();
  o.device.fp32_flops = 1e9;
  auto roofline = ProfileTrainingStep(Tiny(), o);
  ASSERT_TRUE(roofline.ok()) << roofline.status();
  for (const OpProfile& p : roofline->ops) {
    if (p.op == "linear") EXPECT_DOUBLE_EQ(p.forward_seconds, std::max(p.forward_flops, static_cast<double>(p.bytes)) / 1e9);
  }
}

// GELU's tanh approximation is another kernel under the same FLOPs: its own op_rates key
// ("gelu:tanh"), charged where a calibration measured it, and the erf GELU's rate otherwise.
TEST(Profiler, TanhGeluRunsAtItsOwnMeasuredRate) {
  auto graph = [](const std::string& approximate) {
    GraphBuilder b("gelu");
    auto x = b.Input("x", {v1::FLOAT32, {4, 8}}, "features");
    auto labels = b.Input("labels", {v1::INT64, {4}}, "labels");
    v1::InitRule init;
    init.set_kind(v1::InitRule::ZEROS);
    auto h = b.Op("linear", {x, b.Param("w", {v1::FLOAT32, {16, 8}}, init)});
    b.Output(b.Op("cross_entropy", {b.Op("gelu", {h}, Attrs().Str("approximate", approximate)), labels}));
    return Verified(b.Build());
  };
  EXPECT_EQ(OpRateKey("gelu", Attrs().Str("approximate", "tanh").map()), "gelu:tanh");
  EXPECT_EQ(OpRateKey("gelu", Attrs().Str("approximate", "none").map()), "gelu");
  EXPECT_EQ(OpRateKey("relu", Attrs().Str("approximate", "tanh").map()), "relu");
  ProfileOptions o = Options(Optimizer::kSgd);
  o.device.kernel_overhead_seconds = 0;  // the rates alone
  o.device.memory_bandwidth = 1e18;
  o.device.op_rates = {{"gelu", o.device.fp32_flops / 10}};
  auto erf = ProfileTrainingStep(graph("none"), o);
  auto tanh_unmeasured = ProfileTrainingStep(graph("tanh"), o);
  o.device.op_rates["gelu:tanh"] = o.device.fp32_flops / 40;
  auto tanh = ProfileTrainingStep(graph("tanh"), o);
  ASSERT_TRUE(erf.ok() && tanh_unmeasured.ok() && tanh.ok());
  auto gelu = [](const ProfileReport& r) {
    for (const OpProfile& p : r.ops) {
      if (p.op == "gelu") return p;
    }
    return OpProfile();
  };
  const OpProfile g = gelu(*tanh);
  ASSERT_GT(g.forward_flops, 0);
  EXPECT_DOUBLE_EQ(gelu(*erf).forward_seconds, gelu(*erf).forward_flops / o.device.op_rates["gelu"]);
  EXPECT_DOUBLE_EQ(gelu(*tanh_unmeasured).forward_seconds, g.forward_flops / o.device.op_rates["gelu"]);
  EXPECT_DOUBLE_EQ(g.forward_seconds, g.forward_flops / o.device.op_rates["gelu:tanh"]);
  EXPECT_DOUBLE_EQ(g.backward_seconds, g.backward_flops / o.device.op_rates["gelu:tanh"]);
}

TEST(Timeline, SvgShowsPhasesAndPeak) {
  auto r = ProfileTrainingStep(Tiny(), Options(Optimizer::kAdamW));
  ASSERT_TRUE(r.ok());
  const std::string svg = RenderTimelineSvg(*r, "tiny");
  EXPECT_THAT(svg, HasSubstr("<svg"));
  EXPECT_THAT(svg, HasSubstr(">forward<"));
  EXPECT_THAT(svg, HasSubstr(">backward<"));
  EXPECT_THAT(svg, HasSubstr(">optimizer<"));
  EXPECT_THAT(svg, HasSubstr("peak 2.7 KiB (backward, cross_entropy)"));
  EXPECT_THAT(svg, HasSubstr("at the peak: parameters 512 B, gradients 0 B, optimizer states 1.0 KiB"));
}

}  // namespace
}  // namespace mapd

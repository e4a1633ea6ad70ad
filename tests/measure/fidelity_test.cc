// The symbolic profiler's predicted peak against the peak measured by the counting allocator
// over real fp32 AdamW steps: within 5% for small zoo configs and for models traced now by
// Debian's python3-torch (scripts/fidelity.py prints the same comparison as a table).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "model/graph/loss.h"
#include "model/graph/verifier.h"
#include "model/import/torchscript_importer.h"
#include "planner/profile/profiler.h"
#include "model/zoo/zoo.h"
#include "worker/measure/measure.h"

namespace mapd {
namespace {

constexpr double kTolerance = 0.05;

void ExpectPeakWithinTolerance(const std::string& what, v1::Graph proto) {
  SCOPED_TRACE(what);
  auto trainable = WithTrainingLoss(std::move(proto), LossKind::kAuto);
  ASSERT_TRUE(trainable.ok()) << trainable.status();
  auto graph = MakeVerifiedGraph(*trainable);
  ASSERT_TRUE(graph.ok()) << graph.status();
  ProfileOptions opt;
  opt.optimizer = Optimizer::kAdamW;
  opt.timeline = false;
  auto predicted = ProfileTrainingStep(*graph, opt);
  ASSERT_TRUE(predicted.ok()) << predicted.status();
  LocalTrainingOptions m;
  m.training.set_steps(2);
  auto measured = MeasureTraining(graph->proto(), m);
  ASSERT_TRUE(measured.ok()) << measured.status();
  const double error = static_cast<double>(predicted->predicted_peak_bytes - measured->peak_bytes) /
                       static_cast<double>(measured->peak_bytes);
  std::printf("%-70s predicted %12lld measured %12lld error %+.2f%%\n", what.c_str(),
              static_cast<long long>(predicted->predicted_peak_bytes), static_cast<long long>(measured->peak_bytes),
              100 * error);
  EXPECT_LT(std::fabs(error), kTolerance);
  EXPECT_TRUE(std::isfinite(measured->steps.back().loss));
}

TEST(Fidelity, ZooModels) {
  for (const char* spec : {"gpt2:layers=2,hidden=128,heads=4,vocab=512,seq=64,batch=4",
                           "llama2-70b:layers=2,hidden=128,heads=8,kv_heads=2,ffn=344,vocab=512,seq=64,batch=4",
                           "resnet50:image=32,batch=4,classes=10", "mlp:batch=32"}) {
    auto g = BuildZooModel(spec);
    ASSERT_TRUE(g.ok()) << g.status();
    ExpectPeakWithinTolerance(spec, *g);
  }
}

TEST(Fidelity, TracedModels) {
  char tmpl[] = "/tmp/mapd_fidelity_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string cmd = std::string("/usr/bin/python3 ") + MAPD_SOURCE_DIR + "/tests/import/models/make_models.py " +
                          dir + " --without-families > " + dir + "/make.log 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "make_models.py failed; see " << dir << "/make.log";
  // Models written as people write them (tests/import/models/wild.py, misc.py) at sizes where
  // activations dominate.
  const std::pair<const char*, std::vector<const char*>> models[] = {
      {"nanogpt_trace_train.pt", {"idx:i64[8,16]"}},
      {"llama_trace_train.pt", {"tokens:i64[8,16]"}},
      {"resnet_trace_train.pt", {"x:f32[8,3,32,32]"}},
      {"audio_encoder_trace_train.pt", {"x:f32[8,1,4010]"}},
      {"diffusion_unet_trace_train.pt", {"x:f32[8,3,32,32]", "t:f32[8]"}},
      {"topk_moe_trace_train.pt", {"x:f32[8,64,8]"}},
      {"message_passing_trace_train.pt", {"x:f32[1024,8]", "edge_index:i64[2,8192]"}},
      {"vae_trace_train.pt", {"x:f32[1024,32]"}},
      {"signal_ops_script.pt", {"x:f32[32,2,256]"}},
      {"torch_layers_trace_train.pt", {"src:f32[8,64,16]", "tgt:f32[8,48,16]"}},
  };
  for (const auto& [file, specs] : models) {
    ImportOptions opt;
    std::string what = file;
    for (const char* spec : specs) {
      opt.inputs.push_back(*ParseInputSpec(spec));
      what += std::string(" ") + spec;
    }
    auto g = ImportTorchScript(dir + "/" + file, opt);
    ASSERT_TRUE(g.ok()) << g.status();
    ExpectPeakWithinTolerance(what, *g);
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace
}  // namespace mapd

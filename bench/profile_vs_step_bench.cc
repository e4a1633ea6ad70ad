// How much faster profiling is than training: profile time of one step against the measured
// time of one real fp32 AdamW training step on this CPU, for small models, as a ratio.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "model/graph/verifier.h"
#include "planner/profile/profiler.h"
#include "model/zoo/zoo.h"
#include "worker/measure/measure.h"

int main() {
  using Clock = std::chrono::steady_clock;
  const char* specs[] = {
      "gpt2:layers=2,hidden=128,heads=4,vocab=512,seq=64,batch=4",
      "gpt2:layers=4,hidden=256,heads=8,vocab=2048,seq=128,batch=4",
      "llama2-7b:layers=2,hidden=256,heads=8,kv_heads=2,ffn=688,vocab=1024,seq=128,batch=4",
      "resnet50:image=64,batch=4,classes=10",
      "mlp:batch=64",
  };
  int failures = 0;
  std::printf("%-80s %12s %12s %10s\n", "model", "profile_ms", "step_ms", "ratio");
  for (const char* spec : specs) {
    auto proto = mapd::BuildZooModel(spec);
    auto graph = proto.ok() ? mapd::MakeVerifiedGraph(*proto) : absl::StatusOr<mapd::Graph>(proto.status());
    if (!graph.ok()) {
      std::printf("%s: %s\n", spec, std::string(graph.status().message()).c_str());
      ++failures;
      continue;
    }
    mapd::ProfileOptions opt;
    double profile_ms = 1e30;
    for (int i = 0; i < 5; ++i) {  // best of five
      const auto t0 = Clock::now();
      auto r = mapd::ProfileTrainingStep(*graph, opt);
      profile_ms = std::min(profile_ms, std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      if (!r.ok()) ++failures;
    }
    mapd::LocalTrainingOptions m;
    m.training.set_steps(3);
    auto measured = mapd::MeasureTraining(graph->proto(), m);
    if (!measured.ok()) {
      std::printf("%s: %s\n", spec, std::string(measured.status().message()).c_str());
      ++failures;
      continue;
    }
    const double step_ms = measured->step_seconds * 1e3;
    std::printf("%-80s %12.3f %12.1f %10.0f\n", spec, profile_ms, step_ms, step_ms / profile_ms);
  }
  return failures == 0 ? 0 : 1;
}

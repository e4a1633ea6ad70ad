#include "tests/rank/test_plans.h"

#include <gtest/gtest.h>

#include "model/graph/builder.h"
#include "model/graph/loss.h"
#include "model/graph/verifier.h"
#include "planner/runnable/runnable_plan.h"
#include "planner/plan/planner.h"
#include "model/zoo/zoo.h"

namespace mapd {


Graph DropoutMlpGraph() {
  GraphBuilder b("dropout_mlp");
  auto x = b.Input("x", {v1::FLOAT32, {8, 16}}, "features");
  auto labels = b.Input("labels", {v1::INT64, {8}}, "labels");
  v1::InitRule init;
  init.set_kind(v1::InitRule::KAIMING_UNIFORM);
  init.set_fan_in(16);
  auto w1 = b.Param("fc1.weight", {v1::FLOAT32, {64, 16}}, init);
  init.set_fan_in(64);
  auto w2 = b.Param("fc2.weight", {v1::FLOAT32, {8, 64}}, init);
  auto h = b.Op("relu", {b.Op("linear", {x, w1})});
  auto d = b.Op("dropout", {h}, Attrs().Float("p", 0.25));
  b.Output(b.Op("cross_entropy", {b.Op("linear", {d, w2}), labels}));
  auto g = MakeVerifiedGraph(*b.Build());
  EXPECT_TRUE(g.ok()) << g.status();
  return *g;
}

std::vector<Strategy> PlanStrategies(const Graph& graph, const std::vector<int64_t>& mesh, const std::string& family) {
  PlannerOptions o;
  o.cluster.mesh = mesh;
  o.zero_stage = 0;
  auto r = SearchPlan(graph, o);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {};
  if (family == "MAP") return r->plan.strategies;
  for (const auto& b : r->baselines) {
    if (b.name != family) continue;
    EXPECT_TRUE(b.applicable) << family << ": " << b.note;
    return b.strategies;
  }
  ADD_FAILURE() << "no baseline " << family;
  return {};
}

absl::StatusOr<PipelinePrograms> PipelinePlanToRun(const Graph& graph, int64_t devices, int stages, int64_t micro_batches,
                                               int64_t tensor_parallel, int zero_stage, const std::string& recompute,
                                               int64_t virtual_stages) {
  PlanRequest request;
  PlannerOptions& o = request.planner;
  o.cluster.devices = devices;
  o.cluster.memory_per_device = int64_t{1} << 30;
  o.zero_stage = zero_stage;
  o.pipeline_stages = stages;
  o.micro_batches = micro_batches;
  request.recompute = recompute;
  o.prune_pipeline_baselines = false;  // the Megatron pipeline asked for is solved even when slower
  if (virtual_stages > 1) o.pins.virtual_stages = virtual_stages;  // interleaved: a Megatron pipeline's schedule
  auto r = SearchPlan(graph, o);
  if (!r.ok()) return r.status();
  const PipelinePlan* chosen = nullptr;
  if (tensor_parallel == 0) {
    if (r->pipeline) chosen = &*r->pipeline;
    for (const PipelinePlan& p : r->pipelines) {
      if (chosen == nullptr && p.stages == stages && p.fits) chosen = &p;
    }
  } else {
    for (const PipelinePlan& p : r->pipeline_baselines) {
      if (p.stages == stages && p.tensor_parallel == tensor_parallel && p.applicable && !p.pruned && p.micro_batches == micro_batches &&
          p.virtual_stages == virtual_stages) {
        chosen = &p;
      }
    }
  }
  if (chosen == nullptr) return absl::NotFoundError(absl::StrCat("no pipeline of ", stages, " stages (TP ", tensor_parallel, ")"));
  auto run = PipelineToRun(graph, request, *chosen);
  if (!run.ok()) return run.status();
  return PipelinePrograms{run->lowered.programs, absl::StrCat(run->name, ": ", run->summary)};
}

}  // namespace mapd

#include "planner/runnable/runnable_plan.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/match.h"
#include "common/bytes.h"
#include "common/fnv1a.h"
#include "planner/lower/lowering.h"
#include "planner/lower/pipeline_lowering.h"
#include "planner/profile/device_profile.h"
#include "planner/profile/layers.h"
#include "planner/plan/stages.h"
#include "planner/profile/profiler.h"
#include "planner/runnable/memory_margin.h"

namespace mapd {

namespace {

absl::Status Named(const absl::Status& st, const std::string& what) {
  return absl::Status(st.code(), absl::StrCat(what, ": ", st.message()));
}

std::string Describe(const std::vector<int64_t>& mesh, int zero_stage, size_t recomputed, int64_t micro_batches, Precision precision) {
  return absl::StrCat("mesh ", absl::StrJoin(mesh, "x"), zero_stage > 0 ? absl::StrCat(", ZeRO-", zero_stage) : "",
                      recomputed == 0 ? "" : absl::StrCat(", ", recomputed, " layer(s) recomputed"),
                      micro_batches > 1 ? absl::StrCat(", ", micro_batches, " micro-batches") : "",
                      precision == Precision::kBf16Mixed ? ", bf16" : "");
}

// " on cpu": the device profile a plan was costed on, for its summary.
std::string CostedOn(const PlanRequest& request) { return absl::StrCat(" on ", request.planner.cluster.device_type); }

// A lowered plan without stages: its predicted step is its slowest rank program's — the number the
// ranks' measured steps are set beside (mapctl run's table, a job's events and metrics) — and its
// summary says so and names the profile it was costed on.
void SummarizeFromRankPrograms(RunnablePlan& p, const PlanRequest& request) {
  p.predicted_step_seconds = 0;
  for (const RankPrediction& r : p.lowered.predicted) p.predicted_step_seconds = std::max(p.predicted_step_seconds, r.step_seconds());
  p.device_type = request.planner.cluster.device_type;
  p.summary = absl::StrCat(Describe(p.mesh, p.zero_stage, p.recompute.size(), p.micro_batches, p.precision),
                           absl::StrFormat(", %.1f ms/step predicted", p.predicted_step_seconds * 1e3), CostedOn(request));
}

// FNV-1a over every node's placements, continuing from `h`.
uint64_t HashPlacements(const std::vector<Strategy>& strategies, uint64_t h = kFnv1aOffset) {
  for (const Strategy& s : strategies) h = Fnv1a(s.PlacementsString() + ";", h);
  return h;
}

// "mesh 4, ZeRO-2, layout 5f0c8e1a2b3d4c6e" ("2 stages x mesh 2, ..." for a pipeline; its layout
// hashes every stage's placements, in order).
std::string CheckpointPlan(const RunnablePlan& p, uint64_t layout) {
  return absl::StrCat(p.pipeline_stages > 1 ? absl::StrCat(p.pipeline_stages, " stages (", absl::StrJoin(p.stages, ", "), ") x ") : "",
                      "mesh ", absl::StrJoin(p.mesh, "x"), p.zero_stage > 0 ? absl::StrCat(", ZeRO-", p.zero_stage) : "",
                      p.precision == Precision::kBf16Mixed ? ", bf16" : "", ", layout ", absl::Hex(layout, absl::kZeroPad16));
}
std::string CheckpointPlan(const RunnablePlan& p) { return CheckpointPlan(p, HashPlacements(p.strategies)); }

int64_t Devices(const ClusterOptions& c) {
  if (c.devices > 0) return c.devices;
  int64_t n = 1;
  for (int64_t d : c.mesh) n *= d;
  return n;
}

// Whether `p` lies in the space `o` searches (a plan of the whole space may not: a mesh, ZeRO
// stage or micro-batch count given, recomputation off, pins).
bool Allows(const PlannerOptions& o, const PlanCandidate& p) {
  if (!o.cluster.mesh.empty() && o.cluster.mesh != p.mesh) return false;
  if (o.zero_stage >= 0 && o.zero_stage != p.zero_stage) return false;
  if (o.micro_batches > 0 && o.micro_batches != p.micro_batches) return false;
  if (!o.recompute && !p.recomputed_layers.empty()) return false;
  return o.pins.empty();
}

// NothingFitsError's message, given the least figure (LeastMemoryAnywhere's bytes).
absl::Status NothingFitsMessage(const PlannerOptions& o, double margin, double least) {
  const int64_t devices = Devices(o.cluster);
  // What of MAP's space this search left out (the flags that narrowed it).
  std::vector<std::string> narrowed;
  if (!o.cluster.mesh.empty()) narrowed.push_back(absl::StrCat("mesh ", absl::StrJoin(o.cluster.mesh, "x")));
  if (o.zero_stage >= 0) narrowed.push_back(absl::StrCat("ZeRO ", o.zero_stage));
  if (o.micro_batches > 0) narrowed.push_back(absl::StrCat(o.micro_batches, " micro-batch(es)"));
  if (!o.recompute) narrowed.push_back("recomputation as given");
  if (!o.pins.empty()) narrowed.push_back("the pins");
  const int64_t peak = static_cast<int64_t>(std::ceil(least));
  // The budget that holds it with the margin kept free.
  const int64_t give = static_cast<int64_t>(std::ceil(static_cast<double>(peak) * (1 + margin)));
  const bool narrower_fits = give <= o.cluster.memory_per_device;
  return absl::FailedPreconditionError(absl::StrFormat(
      "no plan fits %s per device on %d device(s)%s; the least memory any plan of this model on %d device(s) needs is %s per device (%d bytes) "
      "(every mesh shape, ZeRO stage and micro-batch count, layers recomputed; its rank programs profiled), %d bytes with the %.1f%% "
      "safety margin — %s",
      FormatBytes(o.cluster.memory_per_device), devices, narrowed.empty() ? "" : absl::StrCat(" with ", absl::StrJoin(narrowed, ", ")), devices,
      FormatBytes(peak), peak, give, 100 * margin,
      narrower_fits ? "so a plan fits without those choices: leave them to the search (micro-batches auto, no mesh, ZeRO or pins)"
                    : "give each device at least that (--memory-per-device), more devices, or a smaller batch"));
}

}  // namespace

// MAP's plan, searched again under a lower budget while a rank's program does not fit it.
struct FittingPlan {
  PlanResult result;
  std::optional<LoweredPlan> lowered;  // result.plan lowered, when it was checked against a budget
};

absl::StatusOr<LeastMemoryPlan> LeastMemoryAnywhere(const Graph& graph, PlannerOptions o) {
  o.cluster.devices = Devices(o.cluster);
  o.cluster.mesh.clear();
  o.zero_stage = -1;
  o.max_zero_stage = 3;
  o.micro_batches = 0;
  o.pipeline_stages = 1;
  o.recompute = true;
  o.pins = PlanPins();
  o.baselines = false;
  o.least_memory = true;
  o.objective_cutoff = 0;
  // The planner's least: every node at its smallest (nothing fits one byte).
  o.cluster.memory_per_device = 1;
  auto bound = SearchPlan(graph, o);
  if (!bound.ok()) return bound.status();
  LeastMemoryPlan out;
  out.bytes = bound->min_memory_bytes;
  // The plan the search makes just above it, as its rank programs profile — what a budget must
  // hold for MAP to run it (the planner's model and the programs differ by what the lowering adds:
  // reshards' buffers, ZeRO's buckets, the loss).
  o.cluster.memory_per_device = static_cast<int64_t>(std::ceil(bound->min_memory_bytes * 1.001)) + 1;
  auto above = SearchPlan(graph, o);
  if (!above.ok()) return above.status();
  if (!above->fits || above->pipeline) return out;
  const PlanCandidate& p = above->plan;
  auto lowered = LowerAndPredict(graph, p.mesh, p.strategies, p.zero_stage, LayersToRecompute("auto", p.recomputed_layers, graph),
                                 o.cluster.device_type, o.profile, p.micro_batches, o.cluster.memory_per_device);
  if (!lowered.ok()) return lowered.status();
  out.bytes = std::max(out.bytes, static_cast<double>(lowered->WorstPeak()));
  FittingPlan fitting{*std::move(above), *std::move(lowered)};
  out.plan = std::make_shared<FittingPlan>(std::move(fitting));
  return out;
}

namespace {

absl::StatusOr<FittingPlan> SearchFittingPlan(const Graph& graph, PlannerOptions o, const std::string& recompute_mode, double margin) {
  auto r = SearchPlan(graph, o);
  if (!r.ok()) return r.status();
  FittingPlan out;
  const int64_t budget = o.cluster.memory_per_device;
  for (int attempt = 0; budget > 0 && r->fits && !r->pipeline && attempt < 4; ++attempt) {
    const PlanCandidate& p = r->plan;
    const std::vector<std::string> recompute = LayersToRecompute(recompute_mode, p.recomputed_layers, graph);
    auto lowered = LowerAndPredict(graph, p.mesh, p.strategies, p.zero_stage, recompute, o.cluster.device_type, o.profile, p.micro_batches,
                                   budget);
    if (!lowered.ok()) return lowered.status();
    const int64_t worst = lowered->WorstPeak();
    if (FitsWithMargin(worst, budget, margin)) {
      out.lowered = *std::move(lowered);
      break;
    }
    const double usable = static_cast<double>(budget) / (1 + margin);
    o.cluster.memory_per_device =
        static_cast<int64_t>(static_cast<double>(o.cluster.memory_per_device) * usable / static_cast<double>(worst) * 0.99);
    auto again = SearchPlan(graph, o);
    if (!again.ok()) return again.status();
    if (!again->fits) break;
    r = std::move(again);
  }
  if (budget > 0 && r->fits && !r->pipeline && !out.lowered) {
    // No plan the search chose fits as its programs profile: the least-memory plan, when it does
    // and the options allowed it; else what the least is.
    o.cluster.memory_per_device = budget;
    auto least = LeastMemoryAnywhere(graph, o);
    if (!least.ok()) return least.status();
    if (least->plan == nullptr || !FitsWithMargin(static_cast<int64_t>(std::ceil(least->bytes)), budget, margin) ||
        !Allows(o, least->plan->result.plan)) {
      return NothingFitsMessage(o, margin, least->bytes);
    }
    return *least->plan;
  }
  out.result = *std::move(r);
  return out;
}

// The candidate `request.strategy` names in `r` (MAP's plan or a baseline), searched of `graph`
// with `searched`.
absl::StatusOr<const PlanCandidate*> Pick(const Graph& graph, const PlannerOptions& searched, const PlanResult& r, const PlanRequest& request) {
  if (request.strategy == "map") {
    if (!r.fits) return NothingFitsError(graph, searched, request.memory_margin);
    return &r.plan;
  }
  const std::string want = request.strategy == "tp"             ? absl::StrCat("Megatron TP=", request.planner.cluster.devices)
                           : request.planner.zero_stage == 3 ? "ZeRO-3 (FSDP)"
                                                             : "data parallel";
  for (const PlanCandidate& b : r.baselines) {
    // Under a budget its one pass cannot hold, a baseline recomputes every layer ("data parallel
    // + full recompute"): still the strategy asked for.
    if (b.name != want && !absl::StartsWith(b.name, absl::StrCat(want, " + "))) continue;
    if (!b.applicable) return absl::FailedPreconditionError(absl::StrCat("--strategy ", request.strategy, ": ", b.note));
    return &b;
  }
  return absl::InternalError(absl::StrCat("no baseline '", want, "'"));
}

// The whole model's step FLOPs and the device's peak rate, for throughput and MFU.
absl::Status AddModelFlops(const Graph& graph, const PlanRequest& request, RunnablePlan* out) {
  ProfileOptions po = request.planner.profile;
  auto device = LoadDeviceProfile(request.planner.cluster.device_type);
  if (!device.ok()) return device.status();
  po.device = *device;
  po.timeline = false;
  auto profile = ProfileTrainingStep(graph, po);
  if (!profile.ok()) return Named(profile.status(), "profiling");
  out->model_flops_per_step = profile->training_flops();
  out->device_peak_flops = device->fp32_flops;
  out->items = ItemsPerStep(out->graph);
  return absl::OkStatus();
}

// A stage plan's graph may be another stage's of the same kind (the search solves each kind of
// layer range once, stage_solver.h): the stage's own graph — the same nodes in the same order —
// with the plan's recomputed layers (repeated ones) renamed position for position into its own.
// A graph whose repeated layers are the stage's own is its own already.
absl::Status UseOwnStageGraph(const Graph& graph, const LayerSequence& sequence, StagePlan& sp) {
  const std::vector<std::string> from = RepeatedLayers(*sp.graph);
  if (sp.first_layer >= 0 && sp.end_layer <= static_cast<int>(sequence.layers.size()) &&
      std::equal(from.begin(), from.end(), sequence.layers.begin() + sp.first_layer, sequence.layers.begin() + sp.end_layer)) {
    return absl::OkStatus();
  }
  auto own = StageGraph(graph, sequence, sp.first_layer, sp.end_layer);
  if (!own.ok()) return own.status();
  if (own->num_nodes() != sp.graph->num_nodes()) {
    return absl::InternalError(absl::StrCat("pipeline stage ", sp.LayerRange(), " has ", own->num_nodes(), " nodes; its plan's graph ",
                                            sp.graph->num_nodes()));
  }
  const std::vector<std::string> to = RepeatedLayers(*own);
  for (std::string& layer : sp.plan.recomputed_layers) {
    auto at = std::find(from.begin(), from.end(), layer);
    if (at == from.end() || from.size() != to.size()) {
      return absl::InternalError(absl::StrCat("pipeline stage ", sp.LayerRange(), " recomputes '", layer, "', which its plan's graph lacks"));
    }
    layer = to[at - from.begin()];
  }
  sp.graph = std::make_shared<const Graph>(*std::move(own));
  return absl::OkStatus();
}

// FAILED_PRECONDITION when stages were pinned (N ≥ 2) and no pipeline of N stages fits.
absl::Status NoPipelineError(const PlanResult& r, const PlannerOptions& o) {
  std::string why = r.pipeline_note;
  for (const PipelinePlan& p : r.pipelines) {
    if (p.stages == o.pipeline_stages) {
      why = absl::StrFormat("the best needs %s per device", FormatBytes(static_cast<int64_t>(p.peak_bytes)));
    }
  }
  return absl::FailedPreconditionError(absl::StrCat("no plan with ", o.pipeline_stages, " pipeline stages fits ",
                                                    FormatBytes(o.cluster.memory_per_device), " per device",
                                                    why.empty() ? "" : absl::StrCat(" (", why, ")"),
                                                    "; give more memory, or another --pipeline-stages"));
}

}  // namespace

absl::StatusOr<RunnablePlan> PipelineToRun(const Graph& graph, const PlanRequest& request, const PipelinePlan& p) {
  RunnablePlan out;
  out.graph = graph.proto();
  out.precision = request.planner.profile.precision;
  out.mesh = p.stage_mesh;
  out.pipeline_stages = p.stages;
  out.virtual_stages = std::max<int64_t>(1, p.virtual_stages);
  out.schedule = p.schedule;
  out.micro_batches = p.micro_batches;
  out.bubble_fraction = p.bubble_fraction;
  out.planner_peak_bytes = p.peak_bytes;
  out.name = absl::StartsWith(p.name, "Megatron") ? p.name : "MAP's plan";  // a baseline adopted is MAP's
  auto sequence = FindLayerSequence(graph);
  if (!sequence.ok()) return sequence.status();
  std::vector<StageToLower> stages;
  uint64_t layout = HashPlacements({});
  for (StagePlan sp : p.stage_plans) {
    if (sp.graph == nullptr || static_cast<int>(sp.plan.strategies.size()) != sp.graph->num_nodes()) {
      return absl::InternalError(absl::StrCat("pipeline stage ", sp.LayerRange(), " has no graph of its strategies"));
    }
    if (auto st = UseOwnStageGraph(graph, *sequence, sp); !st.ok()) return st;
    StageToLower st;
    st.graph = sp.graph;
    st.first_layer = sp.first_layer;
    st.end_layer = sp.end_layer;
    st.strategies = sp.plan.strategies;
    st.zero_stage = sp.plan.zero_stage;
    st.recompute = LayersToRecompute(request.recompute, sp.plan.recomputed_layers, *sp.graph);
    out.zero_stage = std::max(out.zero_stage, st.zero_stage);
    out.recompute.insert(out.recompute.end(), st.recompute.begin(), st.recompute.end());
    // Chunk c runs on device stage c mod p: its layers join that stage's.
    const size_t chunk = stages.size();
    if (chunk < static_cast<size_t>(p.stages)) {
      out.stages.push_back(sp.LayerRange());
    } else {
      absl::StrAppend(&out.stages[chunk % p.stages], ", ", sp.LayerRange());
    }
    layout = HashPlacements(st.strategies, layout);
    stages.push_back(std::move(st));
  }
  auto lowered = LowerPipelineAndPredict(stages, p.stage_mesh, p.micro_batches, static_cast<int>(out.virtual_stages),
                                         request.planner.cluster.device_type, request.planner.profile);
  if (!lowered.ok()) return Named(lowered.status(), "lowering the pipeline");
  out.lowered = *std::move(lowered);
  out.predicted_peak_bytes = out.lowered.WorstPeak();
  const int64_t budget = request.planner.cluster.memory_per_device;
  if (budget > 0 && out.predicted_peak_bytes > budget) {
    int worst = 0;
    for (size_t r = 0; r < out.lowered.predicted.size(); ++r) {
      if (out.lowered.predicted[r].peak_bytes > out.lowered.predicted[worst].peak_bytes) worst = static_cast<int>(r);
    }
    return absl::FailedPreconditionError(absl::StrFormat(
        "the %d-stage pipeline plan needs %s on rank %d (stage %d) as its program profiles, over the %s per rank; give more memory "
        "per rank, more ranks, or another --pipeline-stages",
        p.stages, FormatBytes(out.predicted_peak_bytes), worst, worst / std::max(1, out.world() / p.stages), FormatBytes(budget)));
  }
  out.summary = absl::StrCat(p.stages, " stages x ", Describe(out.mesh, out.zero_stage, out.recompute.size(), out.micro_batches, out.precision),
                             absl::StrFormat(", %s (bubble %.0f%%), %.1f ms/step predicted", p.schedule, 100 * p.bubble_fraction, p.step_seconds * 1e3),
                             CostedOn(request));
  out.device_type = request.planner.cluster.device_type;
  out.predicted_step_seconds = p.step_seconds;
  out.checkpoint_plan = CheckpointPlan(out, layout);
  if (auto st = AddModelFlops(graph, request, &out); !st.ok()) return st;
  return out;
}

int RunnablePlan::world() const {
  int w = std::max(1, pipeline_stages);
  for (int64_t d : mesh) w *= static_cast<int>(d);
  return w;
}

std::string PlanSummary(const PlanCandidate& p, Precision precision) {
  return absl::StrCat(Describe(p.mesh, p.zero_stage, p.recomputed_layers.size(), p.micro_batches, precision),
                      absl::StrFormat(", %.1f ms/step predicted", p.cost.step_seconds * 1e3));
}

absl::Status NothingFitsError(const Graph& graph, const PlannerOptions& o, double margin) {
  auto least = LeastMemoryAnywhere(graph, o);
  if (!least.ok()) return least.status();
  return NothingFitsMessage(o, margin, least->bytes);
}

absl::StatusOr<RunnablePlan> PlanToRun(const Graph& graph, const PlanRequest& request) {
  if (auto st = request.Validate(); !st.ok()) return st;
  PlannerOptions o = request.planner;
  o.recompute = request.recompute == "auto";  // an explicit choice is the user's, not the search's
  if (request.strategy != "map") o.cluster.mesh.clear();  // a baseline has its own, 1-D mesh
  absl::StatusOr<FittingPlan> fitting = request.strategy == "map" ? SearchFittingPlan(graph, o, request.recompute, request.memory_margin) : [&]() -> absl::StatusOr<FittingPlan> {
    auto searched = SearchPlan(graph, o);
    if (!searched.ok()) return searched.status();
    return FittingPlan{*std::move(searched), std::nullopt};
  }();
  if (!fitting.ok()) return Named(fitting.status(), "planning");
  if (fitting->result.pipeline) return PipelineToRun(graph, request, *fitting->result.pipeline);
  if (o.pipeline_stages > 1) return NoPipelineError(fitting->result, o);
  auto chosen = Pick(graph, o, fitting->result, request);
  if (!chosen.ok()) return chosen.status();
  const PlanCandidate& c = **chosen;
  RunnablePlan out;
  out.graph = graph.proto();
  out.precision = o.profile.precision;
  out.mesh = c.mesh;
  out.strategies = c.strategies;
  out.zero_stage = c.zero_stage;
  out.micro_batches = c.micro_batches;
  out.recompute = LayersToRecompute(request.recompute, c.recomputed_layers, graph);
  out.planner_peak_bytes = c.cost.peak_bytes();
  out.name = request.strategy == "map" ? "MAP's plan" : c.name;
  if (&c == &fitting->result.plan && fitting->lowered) {
    out.lowered = *std::move(fitting->lowered);
  } else {
    auto lowered = LowerAndPredict(graph, c.mesh, c.strategies, c.zero_stage, out.recompute, o.cluster.device_type, o.profile, c.micro_batches,
                                   o.cluster.memory_per_device);
    if (!lowered.ok()) return Named(lowered.status(), "lowering");
    out.lowered = *std::move(lowered);
  }
  out.predicted_peak_bytes = out.lowered.WorstPeak();
  SummarizeFromRankPrograms(out, request);
  out.checkpoint_plan = CheckpointPlan(out);
  if (auto st = AddModelFlops(graph, request, &out); !st.ok()) return st;
  return out;
}

namespace {

// A saved pipeline plan: its stages' graphs made again from the training graph, their
// strategies read back, and run as PipelineToRun runs one just searched. `request` is at the
// plan's precision.
absl::StatusOr<RunnablePlan> SavedPipelineToRun(const v1::Plan& plan, const Graph& graph, const PlanRequest& request,
                                                const std::string& name) {
  auto sequence = FindLayerSequence(graph);
  if (!sequence.ok()) return sequence.status();
  PipelinePlan pp;
  pp.stages = plan.pipeline_stages();
  pp.stage_mesh.assign(plan.mesh().begin(), plan.mesh().end());
  pp.micro_batches = std::max<int64_t>(1, plan.micro_batches());
  pp.step_seconds = plan.predicted_step_seconds();
  pp.bubble_fraction = plan.bubble_fraction();
  pp.peak_bytes = plan.predicted_peak_bytes();
  pp.virtual_stages = std::max<int64_t>(1, plan.virtual_stages());
  if (!plan.schedule().empty()) pp.schedule = plan.schedule();
  if (pp.virtual_stages > 64 || plan.stages_size() != pp.stages * pp.virtual_stages) {
    return absl::InvalidArgumentError(absl::StrCat("the plan has ", pp.stages, " pipeline stages x ", pp.virtual_stages,
                                                   " chunks a device but describes ", plan.stages_size()));
  }
  for (const v1::PipelineStage& st : plan.stages()) {
    StagePlan sp;
    sp.first_layer = st.first_layer();
    sp.end_layer = st.end_layer();
    sp.first_name = st.first_layer_name();
    sp.last_name = st.last_layer_name();
    auto stage_graph = StageGraph(graph, *sequence, st.first_layer(), st.end_layer());
    if (!stage_graph.ok()) return stage_graph.status();
    sp.graph = std::make_shared<const Graph>(*std::move(stage_graph));
    v1::Plan stage_plan;  // what StrategiesFromPlan reads: the mesh and the stage graph's nodes
    *stage_plan.mutable_mesh() = plan.mesh();
    *stage_plan.mutable_nodes() = st.nodes();
    auto strategies = StrategiesFromPlan(stage_plan, *sp.graph);
    if (!strategies.ok()) return Named(strategies.status(), absl::StrCat("stage ", sp.LayerRange()));
    sp.plan.strategies = *std::move(strategies);
    sp.plan.mesh = pp.stage_mesh;
    sp.plan.zero_stage = st.zero_stage();
    sp.plan.recomputed_layers.assign(st.recomputed_layers().begin(), st.recomputed_layers().end());
    pp.stage_plans.push_back(std::move(sp));
  }
  auto out = PipelineToRun(graph, request, pp);
  if (out.ok()) out->name = name;
  return out;
}

}  // namespace

absl::StatusOr<RunnablePlan> SavedPlanToRun(const v1::Plan& plan, const PlanRequest& request, const std::string& name) {
  auto graph = Graph::Create(plan.graph());
  if (!graph.ok()) return graph.status();
  // The plan's precision is the one every prediction and the model FLOPs are made at.
  auto precision = ParsePrecision(plan.precision().empty() ? "fp32" : plan.precision());
  if (!precision.ok()) return precision.status();
  PlanRequest at_precision = request;
  at_precision.planner.profile.precision = *precision;
  if (plan.pipeline_stages() > 1) return SavedPipelineToRun(plan, *graph, at_precision, name);
  auto strategies = StrategiesFromPlan(plan, *graph);
  if (!strategies.ok()) return strategies.status();
  RunnablePlan out;
  out.graph = plan.graph();
  out.precision = *precision;
  out.mesh.assign(plan.mesh().begin(), plan.mesh().end());
  out.strategies = *std::move(strategies);
  out.zero_stage = plan.zero_stage();
  out.micro_batches = std::max<int64_t>(1, plan.micro_batches());
  const std::vector<std::string> planned(plan.recomputed_layers().begin(), plan.recomputed_layers().end());
  out.recompute = LayersToRecompute(request.recompute, planned, *graph);
  out.planner_peak_bytes = plan.predicted_peak_bytes();
  out.name = name;
  auto lowered = LowerAndPredict(*graph, out.mesh, out.strategies, out.zero_stage, out.recompute, request.planner.cluster.device_type,
                                 at_precision.planner.profile, out.micro_batches, request.planner.cluster.memory_per_device);
  if (!lowered.ok()) return Named(lowered.status(), "lowering");
  out.lowered = *std::move(lowered);
  out.predicted_peak_bytes = out.lowered.WorstPeak();
  SummarizeFromRankPrograms(out, request);
  out.checkpoint_plan = CheckpointPlan(out);
  if (auto st = AddModelFlops(*graph, at_precision, &out); !st.ok()) return st;
  return out;
}

}  // namespace mapd

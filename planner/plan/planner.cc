#include "planner/plan/planner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "planner/graph/mixed_precision.h"
#include "planner/plan/baselines.h"
#include "planner/plan/cost_graph_cache.h"
#include "planner/plan/describe.h"
#include "planner/plan/micro_batch.h"
#include "planner/plan/pipeline_search.h"
#include "planner/plan/prepared_graph.h"
#include "planner/plan/recompute_groups.h"
#include "planner/solver/strategy_solver.h"

namespace mapd {

absl::Status PlannerOptions::Validate() const {
  if (auto st = cluster.Validate(); !st.ok()) return st;
  if (zero_stage < -1 || zero_stage > 3) {
    return absl::InvalidArgumentError(absl::StrCat("ZeRO stage ", zero_stage, " does not exist; use 0, 1, 2, 3 or auto"));
  }
  if (max_zero_stage < 0 || max_zero_stage > 3) {
    return absl::InvalidArgumentError(absl::StrCat("max_zero_stage is ", max_zero_stage, "; use 0 to 3"));
  }
  if (zero_stage > max_zero_stage) {
    return absl::InvalidArgumentError(absl::StrCat("ZeRO stage ", zero_stage, " is above the most allowed, ", max_zero_stage));
  }
  if (max_mesh_axes < 1 || max_mesh_axes > 2) {
    return absl::InvalidArgumentError(absl::StrCat("max_mesh_axes is ", max_mesh_axes,
                                                   "; the search covers 1-D and 2-D meshes (pin others with --mesh)"));
  }
  if (!(relative_gap >= 0 && relative_gap < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("the accepted optimality gap is a fraction in [0, 1), not ", relative_gap));
  }
  if (micro_batches < 0) {
    return absl::InvalidArgumentError(absl::StrCat("micro-batches must be auto (0) or at least 1, not ", micro_batches));
  }
  if (pipeline_stages < 0) {
    return absl::InvalidArgumentError(absl::StrCat("pipeline stages must be auto (0) or at least 1, not ", pipeline_stages));
  }
  if (pipeline_depth < 1) {
    return absl::InvalidArgumentError(absl::StrCat("pipeline_depth is ", pipeline_depth, "; a stage keeps at least one micro-batch"));
  }
  if (threads < 1 || threads > 2) {
    return absl::InvalidArgumentError(absl::StrCat("threads is ", threads, "; the search uses 1 or 2"));
  }
  if (!(time_limit_seconds > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("the solver time limit must be positive, not ", time_limit_seconds));
  }
  return absl::OkStatus();
}

std::vector<std::vector<int64_t>> MeshShapes(int64_t devices, int max_axes) {
  std::vector<std::vector<int64_t>> out = {{devices}};
  if (max_axes < 2) return out;
  for (int64_t a = 2; a < devices; ++a) {
    if (devices % a == 0) out.push_back({a, devices / a});
  }
  return out;
}

namespace {

using Clock = std::chrono::steady_clock;

struct Solved {
  std::vector<int> choice;  // per graph node
  v1::SolverResponse response;
  v1::SolverRequest request;  // folded
  int decisions = 0;
  // Activation checkpointing chosen with the strategies: the layers, and what they add.
  std::vector<std::string> recomputed_layers;
  double recompute_seconds = 0, recompute_bytes = 0;
};

// Solves a cost graph with repeated layers sharing decisions; budget 0 = no memory limit. With
// `recompute_on` (a cluster), under a budget the solver may also checkpoint repeated layers.
absl::StatusOr<Solved> Solve(const Graph& graph, const CostGraph& cg, double budget, const PlannerOptions& options,
                             const Cluster* recompute_on = nullptr, double cutoff = 0, bool recompute_all = false) {
  const double time_limit = options.time_limit_seconds;
  FoldedCostGraph folded = FoldedOf(graph, cg);
  std::vector<std::vector<std::string>> group_layers;
  if (recompute_on != nullptr && (budget > 0 || recompute_all)) {
    group_layers = AddRecomputeGroups(graph, *recompute_on, cg, &folded);
    for (auto& g : *folded.request.mutable_recompute()) {
      if (recompute_all) g.set_min_recomputed(g.layers());  // full checkpointing (the baselines' way)
    }
  }
  folded.request.set_memory_budget(budget);
  folded.request.set_time_limit_seconds(time_limit);
  folded.request.set_relative_gap(options.relative_gap);
  if (cutoff > 0 && std::isfinite(cutoff)) folded.request.set_objective_cutoff(cutoff);
  auto resp = SolveStrategies(folded.request);
  if (!resp.ok()) return resp.status();
  Solved s;
  s.response = *std::move(resp);
  // MAPD_TRACE=1: one line per ILP on stderr (docs/planner.md).
  static const bool trace_env = getenv("MAPD_TRACE") != nullptr;
  if (trace_env && options.trace) {
    std::string groups;
    for (int g = 0; g < folded.request.recompute_size(); ++g) {
      absl::StrAppend(&groups, ", ", folded.request.recompute(g).name(), ": ",
                      g < s.response.recomputed_size() ? s.response.recomputed(g) : 0, " of ", folded.request.recompute(g).layers(),
                      " layers recompute");
    }
    std::fprintf(stderr, "mapd plan: ILP %d decisions, budget %s -> %s in %.3f s, %.6g s/step%s\n",
                 folded.request.nodes_size(), budget > 0 ? absl::StrCat(static_cast<int64_t>(budget), " B").c_str() : "none",
                 v1::SolverResponse::Status_Name(s.response.status()).c_str(), s.response.solve_seconds(),
                 s.response.objective(), groups.c_str());
  }
  s.decisions = folded.request.nodes_size();
  s.request = std::move(folded.request);
  if (s.response.status() != v1::SolverResponse::INFEASIBLE) {
    const std::vector<int> choice(s.response.choice().begin(), s.response.choice().end());
    const std::vector<int64_t> recomputed(s.response.recomputed().begin(), s.response.recomputed().end());
    s.choice = folded.Expand(choice);
    s.recomputed_layers = RecomputedLayers(group_layers, recomputed);
    s.recompute_seconds = RecomputeSecondsOf(s.request, choice, recomputed);
    s.recompute_bytes = RecomputeBytesOf(s.request, choice, recomputed);
  }
  return s;
}

// The least memory any plan of a cost graph needs: every node at its smallest strategy and,
// with `recompute_on`, every repeated layer recomputed.
double MinMemory(const Graph& graph, const CostGraph& cg, const Cluster* recompute_on) {
  FoldedCostGraph folded = FoldedOf(graph, cg);
  if (recompute_on != nullptr) AddRecomputeGroups(graph, *recompute_on, cg, &folded);
  return LeastMemory(folded.request);
}

absl::Status Fill(PlanCandidate& c, const Graph& graph, const Cluster& cluster, const CostGraph& cg,
                  const Solved& s, double budget) {
  auto cost = CostChoice(graph, cluster, cg, s.choice);
  if (!cost.ok()) return cost.status();
  c.cost = *cost;
  c.cost.recompute_seconds = s.recompute_seconds;
  c.cost.recompute_bytes = s.recompute_bytes;
  c.cost.step_seconds += s.recompute_seconds;
  c.recomputed_layers = s.recomputed_layers;
  c.mesh = cluster.mesh;
  c.micro_batches = cg.micro_batches;
  c.fits = c.cost.peak_bytes() <= budget;
  c.strategies.clear();
  for (size_t n = 0; n < s.choice.size(); ++n) c.strategies.push_back(cg.strategies[n][s.choice[n]]);
  c.solver_status = s.response.status();
  c.decisions = s.decisions;
  c.request = s.request;
  c.solve_seconds += s.response.solve_seconds();
  return absl::OkStatus();
}

// The unconstrained optimum on a mesh with ZeRO `stage` (0 unless pinned): a lower bound on
// the step time of every plan on that mesh, since higher stages only add seconds.
absl::StatusOr<Solved> SolveFree(const PlannerOptions& options, CostGraphCache& cache, const std::vector<int64_t>& mesh,
                                 int64_t m) {
  auto cg = cache.Get(mesh, std::max(options.zero_stage, 0), m);
  if (!cg.ok()) return cg.status();
  auto graph = cache.GraphFor(m);
  if (!graph.ok()) return graph.status();
  return Solve(**graph, **cg, 0, options);
}

// The highest ZeRO stage that costs ZeRO 0's seconds (the pinned stage when one is): 1, and 2
// with one micro-batch — with more, ZeRO 2 reduce-scatters every pass's gradients.
int SameSecondsStage(const PlannerOptions& options, int64_t m) {
  return options.zero_stage >= 0 ? options.zero_stage : std::min(m == 1 ? 2 : 1, options.max_zero_stage);
}

// MAP's best plan on one mesh with `m` micro-batches, given its unconstrained optimum (see the
// header for the order of solves).
absl::StatusOr<PlanCandidate> SearchMesh(const PlannerOptions& options, CostGraphCache& cache,
                                         const std::vector<int64_t>& mesh, int64_t m, double budget, const Solved& free,
                                         double best_so_far, int min_stage) {
  auto cluster = cache.ClusterFor(mesh);
  if (!cluster.ok()) return cluster.status();
  auto micro_graph = cache.GraphFor(m);
  if (!micro_graph.ok()) return micro_graph.status();
  const Graph& graph = **micro_graph;
  PlanCandidate c;
  c.name = "MAP";
  c.mesh = mesh;
  // The lowest stage (of those the options allow, up to `highest`) at which a choice fits
  // (with the bytes its recomputation changes, which no stage affects).
  // Priced from any one of the mesh's cost graphs (they share strategies; PriceAtStage).
  auto lowest_fitting_stage = [&](const Solved& s, int highest) -> absl::StatusOr<int> {
    auto cg = cache.Get(mesh, std::max(options.zero_stage, 0), m);
    if (!cg.ok()) return cg.status();
    for (int stage = std::max({options.zero_stage, 0, min_stage}); stage <= highest; ++stage) {
      if (PriceAtStage(**cg, s.choice, stage).memory + s.recompute_bytes <= budget) return stage;
    }
    return -1;
  };
  // If the unconstrained plan fits, nothing is faster on this mesh (ZeRO 1 costs the same
  // seconds, and so does 2 with one micro-batch; the lowest stage at which it fits is taken).
  const int pinned = options.zero_stage;
  auto stage = lowest_fitting_stage(free, SameSecondsStage(options, m));
  if (!stage.ok()) return stage.status();
  if (*stage >= 0) {
    c.zero_stage = *stage;
    if (auto st = Fill(c, graph, **cluster, **cache.Get(mesh, *stage, m), free, budget); !st.ok()) return st;
    return c;
  }
  c.solve_seconds += free.response.solve_seconds();
  // Under the budget: ZeRO 2 (with one micro-batch ZeRO 0's seconds, less memory; with more,
  // also ZeRO 1, which has ZeRO 0's seconds) and ZeRO 3, or the pinned stage; the fastest wins.
  std::optional<PlanCandidate> best;
  std::vector<int> stages = pinned >= 0 ? std::vector<int>{pinned} : m == 1 ? std::vector<int>{2, 3} : std::vector<int>{1, 2, 3};
  stages.erase(std::remove_if(stages.begin(), stages.end(), [&](int z) { return z > options.max_zero_stage; }), stages.end());
  if (stages.empty()) stages = {options.max_zero_stage};
  // Stages whose parameters, gradients and states alone are over the budget fit nothing.
  stages.erase(std::remove_if(stages.begin(), stages.end(), [&](int z) { return z < min_stage; }), stages.end());
  for (int z : stages) {
    auto cg = cache.Get(mesh, z, m);
    if (!cg.ok()) return cg.status();
    // Recompute scans stop where they cannot beat the best plan found (on other meshes, or here
    // at the other stage).
    const double cutoff = std::min(best_so_far, best ? best->cost.step_seconds : std::numeric_limits<double>::infinity());
    auto s = Solve(graph, **cg, budget, options, options.recompute ? *cluster : nullptr, cutoff, false);
    if (!s.ok()) return s.status();
    if (s->choice.empty()) {
      c.solve_seconds += s->response.solve_seconds();
      continue;
    }
    auto used = lowest_fitting_stage(*s, z);
    if (!used.ok()) return used.status();
    PlanCandidate cand = c;
    cand.zero_stage = *used >= 0 ? *used : z;
    if (auto st = Fill(cand, graph, **cluster, **cache.Get(mesh, cand.zero_stage, m), *s, budget); !st.ok()) return st;
    if (!best || cand.cost.step_seconds < best->cost.step_seconds) best = std::move(cand);
  }
  if (best) return *best;
  if (std::isfinite(best_so_far)) {
    // The scans stopped at the plan found elsewhere: this mesh has nothing faster that fits.
    c.applicable = false;
    c.cost.step_seconds = free.response.objective();
    c.note = "pruned: nothing faster than the plan fits on this mesh";
    return c;
  }
  // Nothing fits on this mesh: report the unconstrained plan with the most sharded stage's memory.
  c.zero_stage = pinned >= 0 ? pinned : options.max_zero_stage;
  if (auto st = Fill(c, graph, **cluster, **cache.Get(mesh, c.zero_stage, m), free, budget); !st.ok()) return st;
  return c;
}

struct BaselineSpec {
  std::string name;
  std::vector<int64_t> mesh;
  std::vector<AxisRole> roles;
  int zero_stage = 0;
  int64_t data_degree = 1;  // devices the batch is split over
};

std::vector<BaselineSpec> BaselineSpecs(int64_t devices) {
  std::vector<BaselineSpec> specs = {
      {"data parallel", {devices}, {AxisRole::kData}, 0, devices},
      {"ZeRO-3 (FSDP)", {devices}, {AxisRole::kData}, 3, devices},
  };
  for (int64_t tp = 2; tp <= devices; ++tp) {
    if (devices % tp != 0) continue;
    const int64_t dp = devices / tp;
    // With the distributed optimizer (ZeRO-1 over dp) and sequence parallelism (baselines.h).
    if (dp == 1) {
      specs.push_back({absl::StrCat("Megatron TP=", tp), {tp}, {AxisRole::kTensor}, 0, 1});
    } else {
      specs.push_back({absl::StrCat("Megatron TP=", tp, " x DP=", dp), {dp, tp}, {AxisRole::kData, AxisRole::kTensor}, 1, dp});
    }
  }
  return specs;
}

// One baseline at one micro-batch count: its family's fastest plan under the budget, or with
// every repeated layer recomputed when that alone fits; `fits` false when neither does (then the
// family's fastest plan, unconstrained, is what is reported).
absl::StatusOr<PlanCandidate> SolveBaselineAt(const PlannerOptions& options, CostGraphCache& cache, const BaselineSpec& spec,
                                              int64_t m, double budget) {
  PlanCandidate c;
  c.name = spec.name;
  c.mesh = spec.mesh;
  c.zero_stage = spec.zero_stage;
  c.micro_batches = m;
  auto graph = cache.GraphFor(m);
  if (!graph.ok()) return graph.status();
  auto facts = cache.FactsFor(m);
  if (!facts.ok()) return facts.status();
  const BatchInfo* batch = &(*facts)->batch;
  if (spec.data_degree > 1 && (batch->batch == 0 || batch->batch % spec.data_degree != 0)) {
    c.applicable = false;
    c.note = m == 1 ? absl::StrCat("the global batch of ", batch->batch, " does not split over ", spec.data_degree, " devices")
                    : absl::StrCat("a micro-batch of ", batch->batch, " does not split over ", spec.data_degree, " devices");
    return c;
  }
  auto cluster = cache.ClusterFor(spec.mesh);
  if (!cluster.ok()) return cluster.status();
  auto cg = cache.Get(spec.mesh, spec.zero_stage, m);
  if (!cg.ok()) return cg.status();
  auto restricted = RestrictStrategies(**cg, **graph, FamilyMask(**cg, *batch, (*facts)->prepared, spec.roles));
  if (!restricted.ok()) return restricted.status();
  auto s = Solve(**graph, *restricted, budget, options);
  if (!s.ok()) return s.status();
  if (s->choice.empty() && options.recompute) {
    // Does not fit: the same family with every repeated layer recomputed, as people run it.
    auto all = Solve(**graph, *restricted, budget, options, *cluster, 0, /*recompute_all=*/true);
    if (!all.ok()) return all.status();
    c.solve_seconds += s->response.solve_seconds();
    if (!all->choice.empty() && !all->recomputed_layers.empty()) {
      s = std::move(all);
      c.name = absl::StrCat(spec.name, " + full recompute");
    }
  }
  if (s->choice.empty()) {  // does not fit: cost its fastest plan anyway
    c.solve_seconds += s->response.solve_seconds();
    s = Solve(**graph, *restricted, 0, options);
    if (!s.ok()) return s.status();
  }
  if (auto st = Fill(c, **graph, **cluster, *restricted, *s, budget); !st.ok()) return st;
  return c;
}

// A baseline as its users tune it: the fewest micro-batches (the largest micro-batch) at which
// the family fits without recomputation, else the fewest at which it fits with every repeated
// layer recomputed; reported at one micro-batch (not fitting) when neither exists.
absl::StatusOr<PlanCandidate> SolveBaseline(const PlannerOptions& options, CostGraphCache& cache, const BaselineSpec& spec,
                                            const std::vector<int64_t>& counts, double budget) {
  std::optional<PlanCandidate> first, recomputed;
  for (int64_t m : counts) {
    auto c = SolveBaselineAt(options, cache, spec, m, budget);
    if (!c.ok()) return c.status();
    if (!first || (!first->applicable && c->applicable)) first = *c;
    if (!c->applicable || !c->fits) continue;
    if (c->recomputed_layers.empty()) return *c;
    if (!recomputed) recomputed = *std::move(c);
  }
  if (recomputed) return *recomputed;
  return *first;
}

// The micro-batch counts to search: the pinned one (checked), or every divisor of the batch.
absl::StatusOr<std::vector<int64_t>> MicroBatchCounts(const Graph& graph, const PlannerOptions& options,
                                                      CostGraphCache& cache, PlanResult& result) {
  auto analysis = cache.Analysis();
  if (!analysis.ok()) return analysis.status();
  const MicroBatching* mb = *analysis;
  result.global_batch = mb->batch;
  if (!mb->possible()) result.micro_batch_note = mb->refusal;
  if (options.micro_batches == 0) return mb->Counts();
  if (options.micro_batches == 1) return std::vector<int64_t>{1};
  if (!mb->possible()) {
    return absl::FailedPreconditionError(absl::StrCat("'", graph.name(), "' cannot run in ", options.micro_batches,
                                                      " micro-batches: ", mb->refusal, "; use --micro-batches 1"));
  }
  if (mb->batch % options.micro_batches != 0) {
    return absl::InvalidArgumentError(absl::StrCat(options.micro_batches, " micro-batches do not divide the global batch of ",
                                                   mb->batch, "; give a divisor of it, or auto"));
  }
  return std::vector<int64_t>{options.micro_batches};
}

// The cache a search uses: the caller's (of the same graph), or one of its own in `own`; set to
// the options' pipeline depth.
absl::StatusOr<CostGraphCache*> CacheFor(const Graph& graph, const PlannerOptions& options, CostGraphCache* shared,
                                         std::unique_ptr<CostGraphCache>& own) {
  if (shared == nullptr) {
    own = std::make_unique<CostGraphCache>(graph, options.cluster, options.profile);
    shared = own.get();
  } else if (&shared->graph() != &graph) {
    return absl::InvalidArgumentError("a cost-graph cache of another graph");
  }
  shared->set_pipeline_depth(options.pipeline_depth);
  return shared;
}

}  // namespace

absl::StatusOr<FreeOptimum> SolveUnconstrained(const Graph& graph, const PlannerOptions& options, CostGraphCache* shared_cache) {
  if (auto st = options.Validate(); !st.ok()) return st;
  if (options.cluster.mesh.empty() || options.micro_batches < 1) {
    return absl::InvalidArgumentError("the unconstrained optimum is of a pinned mesh and micro-batch count");
  }
  std::unique_ptr<CostGraphCache> own_cache;
  auto cache_or = CacheFor(graph, options, shared_cache, own_cache);
  if (!cache_or.ok()) return cache_or.status();
  CostGraphCache& cache = **cache_or;
  auto free = SolveFree(options, cache, options.cluster.mesh, options.micro_batches);
  if (!free.ok()) return free.status();
  auto cg = cache.Get(options.cluster.mesh, std::max(options.zero_stage, 0), options.micro_batches);
  if (!cg.ok()) return cg.status();
  FreeOptimum out;
  out.objective = free->response.objective();
  for (size_t n = 0; n < free->choice.size(); ++n) out.once_seconds += (**cg).costs[n][free->choice[n]].once_seconds;
  return out;
}

absl::StatusOr<PlanCandidate> SolveMegatronStage(const Graph& graph, const PlannerOptions& options, int64_t tp,
                                                 CostGraphCache* shared_cache) {
  if (auto st = options.Validate(); !st.ok()) return st;
  auto base = MakeCluster(options.cluster);
  if (!base.ok()) return base.status();
  const int64_t devices = base->num_devices();
  if (tp < 1 || devices % tp != 0 || options.micro_batches < 1) {
    return absl::InvalidArgumentError(absl::StrCat("a Megatron stage of TP=", tp, " on ", devices, " devices at ",
                                                   options.micro_batches, " micro-batches"));
  }
  const int64_t dp = devices / tp;
  BaselineSpec spec;
  spec.mesh = base->mesh;
  spec.data_degree = dp;
  // With the distributed optimizer (ZeRO-1 over dp) and sequence parallelism, as the flat baselines.
  if (dp > 1 && tp > 1) {
    spec.roles = {AxisRole::kData, AxisRole::kTensor};
    spec.zero_stage = 1;
  } else if (tp > 1) {
    spec.roles = {AxisRole::kTensor};
  } else {
    spec.roles = {AxisRole::kData};
    spec.zero_stage = dp > 1 ? 1 : 0;
  }
  if (spec.roles.size() != spec.mesh.size()) {
    return absl::InvalidArgumentError(absl::StrCat("a Megatron stage of TP=", tp, " x DP=", dp, " needs the mesh ",
                                                   dp > 1 && tp > 1 ? absl::StrCat(dp, "x", tp) : absl::StrCat(devices),
                                                   ", not ", base->MeshString()));
  }
  std::unique_ptr<CostGraphCache> own_cache;
  auto cache_or = CacheFor(graph, options, shared_cache, own_cache);
  if (!cache_or.ok()) return cache_or.status();
  CostGraphCache& cache = **cache_or;
  return SolveBaselineAt(options, cache, spec, options.micro_batches, static_cast<double>(base->memory_per_device));
}

namespace {

struct Pair {  // a mesh shape and a micro-batch count, with its unconstrained optimum
  std::vector<int64_t> mesh;
  int64_t m = 1;
  int min_stage = 0;  // the lowest ZeRO stage whose parameters, gradients and states fit
  Solved free;        // the unconstrained optimum at min_stage: a lower bound on the pair
  double bound() const { return free.response.objective(); }
};

}  // namespace

absl::StatusOr<PlanResult> SearchPlan(const Graph& graph, const PlannerOptions& options, CostGraphCache* shared_cache) {
  const auto start = Clock::now();
  if (auto st = options.Validate(); !st.ok()) return st;
  if (options.profile.precision == Precision::kBf16Mixed && !IsBf16Mixed(graph.proto())) {
    return absl::InvalidArgumentError(absl::StrCat("graph '", graph.name(), "' is planned in bf16 but is not the bf16 "
                                                   "graph: convert it first (GraphAtPrecision), so that the plan's "
                                                   "nodes are the ones that run"));
  }
  auto base = MakeCluster(options.cluster);  // validates the device type, budget and mesh
  if (!base.ok()) return base.status();
  const double budget = static_cast<double>(base->memory_per_device);
  const int64_t devices = base->num_devices();
  std::unique_ptr<CostGraphCache> own_cache;
  auto cache_or = CacheFor(graph, options, shared_cache, own_cache);
  if (!cache_or.ok()) return cache_or.status();
  CostGraphCache& cache = **cache_or;
  PlanResult result;
  auto counts = MicroBatchCounts(graph, options, cache, result);
  if (!counts.ok()) return counts.status();
  result.micro_batch_counts = *counts;
  // Pipeline stages: their bounds made beside this search (pipeline_search.h).
  std::unique_ptr<PipelineSearchTask> pipelines;
  if (options.pipeline_stages != 1) {
    auto task = PipelineSearchTask::Start(graph, options, *counts);
    if (!task.ok()) return task.status();
    pipelines = *std::move(task);
  }
  static const bool trace_env = getenv("MAPD_TRACE") != nullptr;
  const bool trace = trace_env && options.trace;
  auto lap = [&](const char* what) {
    if (trace) {
      std::fprintf(stderr, "mapd plan: %s at %.3f s (%zu cost graphs built in %.3f s)\n", what,
                   std::chrono::duration<double>(Clock::now() - start).count(), cache.built(), cache.build_seconds());
    }
  };

  std::vector<std::vector<int64_t>> meshes =
      options.cluster.mesh.empty() ? MeshShapes(devices, options.max_mesh_axes) : std::vector<std::vector<int64_t>>{base->mesh};
  // Every (mesh, micro-batch count)'s unconstrained optimum first: a lower bound for it. Pairs
  // are then searched from the lowest bound up, and skipped once the bound reaches the best plan
  // that fits. Pairs whose unconstrained plan fits as it is are taken first, so that the budgeted
  // searches of the others start with that plan to beat.
  // A pair's bound is taken at the lowest ZeRO stage whose parameters, gradients and optimizer
  // states fit (LeastStateMemory; stages only add seconds); a pair with no such stage fits
  // nothing and is not searched.
  std::vector<Pair> order;
  std::optional<std::pair<std::pair<std::vector<int64_t>, int64_t>, double>> nearest;  // the skipped pair nearest to fitting
  const int lowest_allowed = std::max(options.zero_stage, 0);
  const int highest_allowed = options.zero_stage >= 0 ? options.zero_stage : options.max_zero_stage;
  for (const auto& mesh : meshes) {
    for (int64_t m : *counts) {
      auto cg0 = cache.Get(mesh, lowest_allowed, m);
      if (!cg0.ok()) return cg0.status();
      int min_stage = lowest_allowed;
      while (min_stage <= highest_allowed && LeastStateMemory(**cg0, min_stage) > budget) ++min_stage;
      if (min_stage > highest_allowed) {
        ++result.meshes_pruned;
        const double least = LeastStateMemory(**cg0, highest_allowed);
        if (!nearest || least < nearest->second) nearest = std::make_pair(std::make_pair(mesh, m), least);
        continue;
      }
      PlannerOptions at = options;
      at.zero_stage = min_stage;  // SolveFree's stage
      auto free = SolveFree(at, cache, mesh, m);
      if (!free.ok()) return free.status();
      order.push_back({mesh, m, min_stage, *std::move(free)});
    }
  }
  std::stable_sort(order.begin(), order.end(), [](const Pair& a, const Pair& b) { return a.bound() < b.bound(); });
  lap("bounds");

  double best = options.objective_cutoff > 0 ? options.objective_cutoff : std::numeric_limits<double>::infinity();
  std::map<std::vector<int64_t>, PlanCandidate> best_of_mesh;  // MAP's best per mesh shape
  std::vector<bool> done(order.size(), false);
  auto keep = [&](PlanCandidate cand) {
    if (cand.fits) best = std::min(best, cand.cost.step_seconds);
    auto it = best_of_mesh.find(cand.mesh);
    const bool better = it == best_of_mesh.end() || (cand.fits && !it->second.fits) ||
                        (cand.fits == it->second.fits && (cand.fits ? cand.cost.step_seconds < it->second.cost.step_seconds
                                                                    : cand.cost.peak_bytes() < it->second.cost.peak_bytes()));
    if (better) best_of_mesh[cand.mesh] = std::move(cand);
  };
  // Pass 0: pairs whose unconstrained plan fits (at a ZeRO stage with ZeRO 0's seconds: the
  // pair's optimum; at a higher one: a plan to beat). Pass 1: the other pairs searched with a
  // coarse gap (Lagrangian answers, seldom CBC), for a close plan to beat. Pass 2: the budgeted
  // searches at the accepted gap, each cut off at the best plan so far.
  PlannerOptions coarse = options;
  coarse.relative_gap = std::max(options.relative_gap, 0.2);
  coarse.time_limit_seconds = std::min(options.time_limit_seconds, 0.05);  // CBC barely: the Lagrangian's answers
  for (int pass = 0; pass < 3; ++pass) {
    for (size_t i = 0; i < order.size(); ++i) {
      const Pair& p = order[i];
      if (done[i]) continue;
      if (pass == 1) {
        if (p.bound() >= best * (1 - coarse.relative_gap)) continue;
        const auto t0 = Clock::now();
        auto cand = SearchMesh(coarse, cache, p.mesh, p.m, budget, p.free, best, p.min_stage);
        if (!cand.ok()) return cand.status();
        if (trace) {
          std::fprintf(stderr, "mapd plan: coarse mesh %s m %lld bound %.4g: %s %.4g s/step in %.3f s\n", absl::StrJoin(p.mesh, "x").c_str(),
                       static_cast<long long>(p.m), p.bound(), cand->applicable && cand->fits ? "fits" : "-", cand->cost.step_seconds,
                       std::chrono::duration<double>(Clock::now() - t0).count());
        }
        if (cand->applicable && cand->fits) keep(*std::move(cand));
        continue;
      }
      if (p.bound() >= best * (1 - options.relative_gap)) {
        done[i] = true;
        ++result.meshes_pruned;
        continue;
      }
      if (pass == 0) {
        // Only pairs whose unconstrained plan fits (no budgeted solve): one ILP's worth of work.
        // The lowest stage at which the unconstrained choice fits: at one with ZeRO 0's seconds it
        // is the pair's optimum; at a higher one it is a plan to beat, and the pair is searched in
        // the second pass.
        // Priced from the bound's own cost graph (no cost graph per stage); an incumbent is
        // costed in full only when it beats the best so far.
        int fits_at = -1;
        const int same_seconds = SameSecondsStage(options, p.m);
        const int highest = options.zero_stage >= 0 ? options.zero_stage : options.max_zero_stage;
        auto cg0 = cache.Get(p.mesh, std::max(options.zero_stage, 0), p.m);
        if (!cg0.ok()) return cg0.status();
        StagePrice price;
        for (int z = std::max(options.zero_stage, 0); z <= highest && fits_at < 0; ++z) {
          price = PriceAtStage(**cg0, p.free.choice, z);
          if (price.memory <= budget) fits_at = z;
        }
        if (fits_at < 0) continue;
        if (fits_at > same_seconds) {
          if (price.seconds >= best) continue;
          auto cluster = cache.ClusterFor(p.mesh);
          if (!cluster.ok()) return cluster.status();
          auto g = cache.GraphFor(p.m);
          if (!g.ok()) return g.status();
          PlanCandidate incumbent;
          incumbent.name = "MAP";
          incumbent.zero_stage = fits_at;
          if (auto st = Fill(incumbent, **g, **cluster, **cache.Get(p.mesh, fits_at, p.m), p.free, budget); !st.ok()) return st;
          keep(std::move(incumbent));
          continue;
        }
      }
      auto cand = SearchMesh(options, cache, p.mesh, p.m, budget, p.free, best, p.min_stage);
      if (!cand.ok()) return cand.status();
      done[i] = true;
      ++result.meshes_solved;
      if (!cand->applicable) {
        result.pruned.push_back(*std::move(cand));
        continue;
      }
      keep(*std::move(cand));
    }
    lap(pass == 0 ? "plans that fit unconstrained" : pass == 1 ? "coarse searches" : "budgeted searches");
  }
  // Meshes with no pair searched: pruned by their lowest bound.
  for (const auto& mesh : meshes) {
    if (best_of_mesh.count(mesh)) continue;
    bool reported = false;
    for (const auto& c : result.pruned) reported = reported || c.mesh == mesh;
    if (reported) continue;
    for (const Pair& p : order) {
      if (p.mesh != mesh) continue;
      PlanCandidate pruned;
      pruned.name = "MAP";
      pruned.mesh = mesh;
      pruned.micro_batches = p.m;
      pruned.applicable = false;
      pruned.cost.step_seconds = p.bound();
      pruned.note = "pruned: even with unlimited memory no faster than the plan";
      result.pruned.push_back(std::move(pruned));
      break;  // the pair with the lowest bound stands for the mesh
    }
  }
  if (best_of_mesh.empty() && nearest) {
    // Every pair's parameters and states alone are over the budget: report the one nearest to
    // fitting, unconstrained, at the most sharded stage.
    const auto& [mesh, m] = nearest->first;
    PlannerOptions at = options;
    at.zero_stage = highest_allowed;
    auto free = SolveFree(at, cache, mesh, m);
    if (!free.ok()) return free.status();
    auto cluster = cache.ClusterFor(mesh);
    if (!cluster.ok()) return cluster.status();
    auto g = cache.GraphFor(m);
    if (!g.ok()) return g.status();
    PlanCandidate c;
    c.name = "MAP";
    c.zero_stage = highest_allowed;
    if (auto st = Fill(c, **g, **cluster, **cache.Get(mesh, highest_allowed, m), *free, budget); !st.ok()) return st;
    best_of_mesh[mesh] = std::move(c);
  }
  for (auto& [mesh, cand] : best_of_mesh) result.alternatives.push_back(std::move(cand));
  {
    // One pruned entry per mesh shape with no plan: its lowest bound.
    std::map<std::vector<int64_t>, PlanCandidate> lowest;
    for (auto& p : result.pruned) {
      if (best_of_mesh.count(p.mesh)) continue;
      auto it = lowest.find(p.mesh);
      if (it == lowest.end() || p.cost.step_seconds < it->second.cost.step_seconds) lowest[p.mesh] = std::move(p);
    }
    result.pruned.clear();
    for (auto& [mesh, p] : lowest) result.pruned.push_back(std::move(p));
    std::stable_sort(result.pruned.begin(), result.pruned.end(),
                     [](const PlanCandidate& a, const PlanCandidate& b) { return a.cost.step_seconds < b.cost.step_seconds; });
  }
  // Fitting plans first, fastest first; among equals the simpler (fewer axes, lower stage, fewer micro-batches).
  std::stable_sort(result.alternatives.begin(), result.alternatives.end(), [](const PlanCandidate& a, const PlanCandidate& b) {
    if (a.fits != b.fits) return a.fits;
    if (a.fits && a.cost.step_seconds != b.cost.step_seconds) return a.cost.step_seconds < b.cost.step_seconds;
    if (!a.fits && a.cost.peak_bytes() != b.cost.peak_bytes()) return a.cost.peak_bytes() < b.cost.peak_bytes();
    if (a.mesh.size() != b.mesh.size()) return a.mesh.size() < b.mesh.size();
    if (a.zero_stage != b.zero_stage) return a.zero_stage < b.zero_stage;
    return a.micro_batches < b.micro_batches;
  });
  if (result.alternatives.empty() && options.objective_cutoff > 0) {
    // Nothing faster than the cutoff: not a plan anyone asked for.
    result.plan.name = "MAP";
    result.plan.applicable = false;
    result.plan.note = "pruned: nothing faster than the cutoff fits";
    result.fits = false;
    result.search_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return result;
  }
  if (result.alternatives.empty()) {
    return absl::InternalError("the search kept no plan: every mesh shape was pruned without one to compare with");
  }
  result.plan = result.alternatives.front();
  result.fits = result.plan.fits;
  auto winner = cache.ClusterFor(result.plan.mesh);
  if (!winner.ok()) return winner.status();
  result.cluster = **winner;

  if (!result.fits && options.least_memory) {
    // The least memory any searched plan needs: every node at its smallest strategy, with the
    // most memory-saving ZeRO stage allowed and the most micro-batches searched.
    const int stage = options.zero_stage >= 0 ? options.zero_stage : options.max_zero_stage;
    result.min_memory_bytes = std::numeric_limits<double>::infinity();
    for (const auto& mesh : meshes) {
      for (int64_t m : *counts) {
        auto cg = cache.Get(mesh, stage, m);
        if (!cg.ok()) return cg.status();
        auto cluster = cache.ClusterFor(mesh);
        if (!cluster.ok()) return cluster.status();
        auto g = cache.GraphFor(m);
        if (!g.ok()) return g.status();
        result.min_memory_bytes =
            std::min(result.min_memory_bytes, MinMemory(**g, **cg, options.recompute ? *cluster : nullptr));
      }
    }
  }
  lap("least memory");
  // MAP's pipelines are explored below the plan without stages (pinned stages want the best
  // pipeline of that count even when it is slower), while the baselines are costed here.
  if (pipelines) {
    pipelines->ExploreBelow(result.fits && options.pipeline_stages < 2 ? result.plan.cost.step_seconds
                                                                       : std::numeric_limits<double>::infinity());
  }

  if (options.baselines) {
    for (const BaselineSpec& spec : BaselineSpecs(devices)) {
      auto c = SolveBaseline(options, cache, spec, *counts, budget);
      if (!c.ok()) return c.status();
      result.baselines.push_back(*std::move(c));
    }
  }
  lap("baselines");
  // The baselines are plans of MAP's space; within the accepted gap one can come out faster than
  // the search's own best. Then it is MAP's plan, and the result says so.
  // Only a baseline inside the space searched counts: its mesh searched, its ZeRO stage, micro-
  // batch count and recomputation allowed (a pinned mesh or stage excludes the others).
  auto searched = [&](const PlanCandidate& b) {
    return std::find(meshes.begin(), meshes.end(), b.mesh) != meshes.end() &&
           (options.zero_stage < 0 ? b.zero_stage <= options.max_zero_stage : b.zero_stage == options.zero_stage) &&
           std::find(counts->begin(), counts->end(), b.micro_batches) != counts->end() &&
           (options.recompute || b.recomputed_layers.empty());
  };
  const PlanCandidate* faster = nullptr;
  for (const PlanCandidate& b : result.baselines) {
    if (b.applicable && b.fits && searched(b) && (!result.fits || b.cost.step_seconds < result.plan.cost.step_seconds * (1 - 1e-12)) &&
        (faster == nullptr || b.cost.step_seconds < faster->cost.step_seconds)) {
      faster = &b;
    }
  }
  if (faster != nullptr) {
    result.adopted_note = result.fits ? absl::StrFormat("the search's own best was %.1f ms (within its accepted gap of %.3g%%); "
                                                        "the baseline '%s', a plan of the same space, is faster",
                                                        result.plan.cost.step_seconds * 1e3, 100 * options.relative_gap, faster->name)
                                      : absl::StrCat("the baseline '", faster->name, "' fits where the search found nothing");
    result.plan = *faster;
    result.plan.name = "MAP";
    result.fits = true;
    auto adopted = cache.ClusterFor(result.plan.mesh);
    if (!adopted.ok()) return adopted.status();
    result.cluster = **adopted;
  }
  if (pipelines) {
    if (auto st = pipelines->Finish(result); !st.ok()) return st;
    lap("pipeline stages");
  }
  result.search_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

namespace {

// Every node's strategy as the saved plan writes it.
void AddNodeStrategies(const Graph& graph, const std::vector<Strategy>& strategies,
                       google::protobuf::RepeatedPtrField<v1::NodeStrategy>* out) {
  for (int n = 0; n < graph.num_nodes() && n < static_cast<int>(strategies.size()); ++n) {
    const Strategy& s = strategies[n];
    v1::NodeStrategy* ns = out->Add();
    ns->set_node(graph.node(n).name());
    for (const Placement& p : s.inputs) ns->add_input_placements(p.empty() ? "" : PlacementToString(p));
    for (const Placement& p : s.outputs) ns->add_output_placements(PlacementToString(p));
    ns->set_picks(s.ToString());
    ns->set_description(DescribeStrategy(graph, n, s));
    std::string labels;
    for (char l : s.axis_label) labels.push_back(l == 0 ? '.' : l);
    ns->set_axis_labels(labels);
  }
}

}  // namespace

v1::Plan ToPlanProto(const Graph& graph, const PlanResult& result, const PlannerOptions& options) {
  v1::Plan plan;
  plan.set_model(graph.name());
  *plan.mutable_graph() = graph.proto();
  plan.set_device_type(result.cluster.device.name);
  plan.set_memory_per_device(result.cluster.memory_per_device);
  plan.set_gpus_per_node(result.cluster.gpus_per_node);
  plan.set_global_batch(result.global_batch);
  plan.set_optimizer(OptimizerName(options.profile.optimizer));
  plan.set_precision(PrecisionName(options.profile.precision));
  if (result.pipeline) {
    const PipelinePlan& pp = *result.pipeline;
    for (int64_t d : pp.stage_mesh) plan.add_mesh(d);
    plan.set_micro_batches(pp.micro_batches);
    plan.set_predicted_step_seconds(pp.step_seconds);
    plan.set_predicted_peak_bytes(pp.peak_bytes);
    plan.set_pipeline_stages(pp.stages);
    plan.set_schedule(pp.schedule);
    plan.set_bubble_fraction(pp.bubble_fraction);
    int zero = 0, norms = 0;
    for (const StagePlan& s : pp.stage_plans) {
      v1::PipelineStage* st = plan.add_stages();
      st->set_first_layer(s.first_layer);
      st->set_end_layer(s.end_layer);
      st->set_first_layer_name(s.first_name);
      st->set_last_layer_name(s.last_name);
      st->set_micro_batches_in_flight(s.in_flight);
      st->set_zero_stage(s.plan.zero_stage);
      for (const std::string& layer : s.plan.recomputed_layers) st->add_recomputed_layers(layer);
      AddNodeStrategies(*s.graph, s.plan.strategies, st->mutable_nodes());
      st->set_predicted_pass_seconds(s.pass_seconds);
      st->set_predicted_once_seconds(s.once_seconds);
      st->set_predicted_peak_bytes(s.plan.cost.peak_bytes());
      zero = std::max(zero, s.plan.zero_stage);
      norms += SequenceParallelNorms(*s.graph, s.plan.strategies);
    }
    plan.set_zero_stage(zero);
    plan.set_sequence_parallel_norms(norms);
    return plan;
  }
  for (int64_t d : result.plan.mesh) plan.add_mesh(d);
  plan.set_zero_stage(result.plan.zero_stage);
  plan.set_micro_batches(result.plan.micro_batches);
  plan.set_sequence_parallel_norms(SequenceParallelNorms(graph, result.plan.strategies));
  plan.set_predicted_step_seconds(result.plan.cost.step_seconds);
  plan.set_predicted_peak_bytes(result.plan.cost.peak_bytes());
  for (const std::string& layer : result.plan.recomputed_layers) plan.add_recomputed_layers(layer);
  AddNodeStrategies(graph, result.plan.strategies, plan.mutable_nodes());
  return plan;
}

}  // namespace mapd

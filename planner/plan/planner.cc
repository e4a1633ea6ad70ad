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

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "planner/plan/baselines.h"
#include "planner/plan/describe.h"
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
absl::StatusOr<Solved> Solve(const Graph& graph, const CostGraph& cg, double budget, double time_limit,
                             const Cluster* recompute_on = nullptr, double cutoff = 0, bool recompute_all = false,
                             Precision precision = Precision::kFp32) {
  FoldedCostGraph folded = FoldRepeatedLayers(graph, cg);
  std::vector<std::vector<std::string>> group_layers;
  if (recompute_on != nullptr && (budget > 0 || recompute_all)) {
    group_layers = AddRecomputeGroups(graph, *recompute_on, cg, precision, &folded);
    for (auto& g : *folded.request.mutable_recompute()) {
      if (recompute_all) g.set_min_recomputed(g.layers());  // full checkpointing (the baselines' way)
    }
  }
  folded.request.set_memory_budget(budget);
  folded.request.set_time_limit_seconds(time_limit);
  if (cutoff > 0 && std::isfinite(cutoff)) folded.request.set_objective_cutoff(cutoff);
  auto resp = SolveStrategies(folded.request);
  if (!resp.ok()) return resp.status();
  Solved s;
  s.response = *std::move(resp);
  // MAPD_TRACE=1: one line per ILP on stderr (docs/planner.md).
  static const bool trace = getenv("MAPD_TRACE") != nullptr;
  if (trace) {
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
double MinMemory(const Graph& graph, const CostGraph& cg, const Cluster* recompute_on, Precision precision) {
  FoldedCostGraph folded = FoldRepeatedLayers(graph, cg);
  if (recompute_on != nullptr) AddRecomputeGroups(graph, *recompute_on, cg, precision, &folded);
  return LeastMemory(folded.request);
}

// Builds and caches cost graphs per (mesh, ZeRO stage); links come from the cluster options.
class CostGraphCache {
 public:
  CostGraphCache(const Graph& graph, const PlannerOptions& options) : graph_(graph), options_(options) {}

  absl::StatusOr<const Cluster*> ClusterFor(const std::vector<int64_t>& mesh) {
    auto it = clusters_.find(mesh);
    if (it != clusters_.end()) return it->second.get();
    ClusterOptions co = options_.cluster;
    co.mesh = mesh;
    co.devices = 0;
    auto c = MakeCluster(co);
    if (!c.ok()) return c.status();
    return (clusters_[mesh] = std::make_unique<Cluster>(*std::move(c))).get();
  }

  absl::StatusOr<const CostGraph*> Get(const std::vector<int64_t>& mesh, int stage) {
    auto key = std::make_pair(mesh, stage);
    auto it = graphs_.find(key);
    if (it != graphs_.end()) return it->second.get();
    auto cluster = ClusterFor(mesh);
    if (!cluster.ok()) return cluster.status();
    ProfileOptions po = options_.profile;
    po.device = (*cluster)->device;
    CostGraphOptions cgo;
    cgo.zero_stage = stage;
    auto cg = BuildCostGraph(graph_, **cluster, po, cgo);
    if (!cg.ok()) return cg.status();
    return (graphs_[key] = std::make_unique<CostGraph>(*std::move(cg))).get();
  }

 private:
  const Graph& graph_;
  const PlannerOptions& options_;
  std::map<std::vector<int64_t>, std::unique_ptr<Cluster>> clusters_;
  std::map<std::pair<std::vector<int64_t>, int>, std::unique_ptr<CostGraph>> graphs_;
};

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
absl::StatusOr<Solved> SolveFree(const Graph& graph, const PlannerOptions& options, CostGraphCache& cache,
                                 const std::vector<int64_t>& mesh) {
  auto cg = cache.Get(mesh, std::max(options.zero_stage, 0));
  if (!cg.ok()) return cg.status();
  return Solve(graph, **cg, 0, options.time_limit_seconds);
}

// MAP's best plan on one mesh, given its unconstrained optimum (see the header for the order
// of solves).
absl::StatusOr<PlanCandidate> SearchMesh(const Graph& graph, const PlannerOptions& options, CostGraphCache& cache,
                                         const std::vector<int64_t>& mesh, double budget, const Solved& free,
                                         double best_so_far) {
  auto cluster = cache.ClusterFor(mesh);
  if (!cluster.ok()) return cluster.status();
  PlanCandidate c;
  c.name = "MAP";
  c.mesh = mesh;
  const double limit = options.time_limit_seconds;
  // The lowest stage (of those the options allow, up to `highest`) at which a choice fits
  // (with the bytes its recomputation changes, which no stage affects).
  auto lowest_fitting_stage = [&](const Solved& s, int highest) -> absl::StatusOr<int> {
    for (int stage = std::max(options.zero_stage, 0); stage <= highest; ++stage) {
      auto cg = cache.Get(mesh, stage);
      if (!cg.ok()) return cg.status();
      if (MemoryOf((*cg)->request, s.choice) + s.recompute_bytes <= budget) return stage;
    }
    return -1;
  };
  // If the unconstrained plan fits, nothing is faster on this mesh (ZeRO 1–2 cost the same
  // seconds, so the lowest stage at which it fits is taken).
  const int pinned = options.zero_stage;
  auto stage = lowest_fitting_stage(free, pinned >= 0 ? pinned : std::min(2, options.max_zero_stage));
  if (!stage.ok()) return stage.status();
  if (*stage >= 0) {
    c.zero_stage = *stage;
    if (auto st = Fill(c, graph, **cluster, **cache.Get(mesh, *stage), free, budget); !st.ok()) return st;
    return c;
  }
  c.solve_seconds += free.response.solve_seconds();
  // Under the budget: ZeRO 2 (ZeRO 0's seconds, less memory) and ZeRO 3, or the pinned stage;
  // the faster wins.
  std::optional<PlanCandidate> best;
  std::vector<int> stages = pinned >= 0 ? std::vector<int>{pinned} : std::vector<int>{2, 3};
  stages.erase(std::remove_if(stages.begin(), stages.end(), [&](int z) { return z > options.max_zero_stage; }), stages.end());
  if (stages.empty()) stages = {options.max_zero_stage};
  for (int z : stages) {
    auto cg = cache.Get(mesh, z);
    if (!cg.ok()) return cg.status();
    // Recompute scans stop where they cannot beat the best plan found (on other meshes, or here
    // at the other stage).
    const double cutoff = std::min(best_so_far, best ? best->cost.step_seconds : std::numeric_limits<double>::infinity());
    auto s = Solve(graph, **cg, budget, limit, options.recompute ? *cluster : nullptr, cutoff, false, options.profile.precision);
    if (!s.ok()) return s.status();
    if (s->choice.empty()) {
      c.solve_seconds += s->response.solve_seconds();
      continue;
    }
    auto used = lowest_fitting_stage(*s, z);
    if (!used.ok()) return used.status();
    PlanCandidate cand = c;
    cand.zero_stage = *used >= 0 ? *used : z;
    if (auto st = Fill(cand, graph, **cluster, **cache.Get(mesh, cand.zero_stage), *s, budget); !st.ok()) return st;
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
  if (auto st = Fill(c, graph, **cluster, **cache.Get(mesh, c.zero_stage), free, budget); !st.ok()) return st;
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
    if (dp == 1) {
      specs.push_back({absl::StrCat("Megatron TP=", tp), {tp}, {AxisRole::kTensor}, 0, 1});
    } else {
      specs.push_back({absl::StrCat("Megatron TP=", tp, " x DP=", dp), {dp, tp}, {AxisRole::kData, AxisRole::kTensor}, 0, dp});
    }
  }
  return specs;
}

absl::StatusOr<PlanCandidate> SolveBaseline(const Graph& graph, const PlannerOptions& options, CostGraphCache& cache,
                                            const BaselineSpec& spec, const BatchInfo& batch,
                                            const std::vector<std::unique_ptr<PreparedNode>>& prepared, double budget) {
  PlanCandidate c;
  c.name = spec.name;
  c.mesh = spec.mesh;
  c.zero_stage = spec.zero_stage;
  if (spec.data_degree > 1 && (batch.batch == 0 || batch.batch % spec.data_degree != 0)) {
    c.applicable = false;
    c.note = absl::StrCat("the global batch of ", batch.batch, " does not split over ", spec.data_degree, " devices");
    return c;
  }
  auto cluster = cache.ClusterFor(spec.mesh);
  if (!cluster.ok()) return cluster.status();
  auto cg = cache.Get(spec.mesh, spec.zero_stage);
  if (!cg.ok()) return cg.status();
  auto restricted = RestrictStrategies(**cg, graph, FamilyMask(**cg, batch, prepared, spec.roles));
  if (!restricted.ok()) return restricted.status();
  auto s = Solve(graph, *restricted, budget, options.time_limit_seconds);
  if (!s.ok()) return s.status();
  if (s->choice.empty() && options.recompute) {
    // Does not fit: the same family with every repeated layer recomputed, as people run it.
    auto all = Solve(graph, *restricted, budget, options.time_limit_seconds, *cluster, 0, /*recompute_all=*/true,
                     options.profile.precision);
    if (!all.ok()) return all.status();
    c.solve_seconds += s->response.solve_seconds();
    if (!all->choice.empty() && !all->recomputed_layers.empty()) {
      s = std::move(all);
      c.name = absl::StrCat(spec.name, " + full recompute");
    }
  }
  if (s->choice.empty()) {  // does not fit: cost its fastest plan anyway
    c.solve_seconds += s->response.solve_seconds();
    s = Solve(graph, *restricted, 0, options.time_limit_seconds);
    if (!s.ok()) return s.status();
  }
  if (auto st = Fill(c, graph, **cluster, *restricted, *s, budget); !st.ok()) return st;
  return c;
}

}  // namespace

absl::StatusOr<PlanResult> SearchPlan(const Graph& graph, const PlannerOptions& options) {
  const auto start = Clock::now();
  if (auto st = options.Validate(); !st.ok()) return st;
  auto base = MakeCluster(options.cluster);  // validates the device type, budget and mesh
  if (!base.ok()) return base.status();
  const double budget = static_cast<double>(base->memory_per_device);
  const int64_t devices = base->num_devices();
  CostGraphCache cache(graph, options);

  std::vector<std::vector<int64_t>> meshes =
      options.cluster.mesh.empty() ? MeshShapes(devices, options.max_mesh_axes) : std::vector<std::vector<int64_t>>{base->mesh};
  // Every mesh's unconstrained optimum first: a lower bound for the mesh. Meshes are then
  // searched from the lowest bound up, and skipped once the bound reaches the best plan that fits.
  std::vector<std::pair<Solved, std::vector<int64_t>>> order;
  for (const auto& mesh : meshes) {
    auto free = SolveFree(graph, options, cache, mesh);
    if (!free.ok()) return free.status();
    order.emplace_back(*std::move(free), mesh);
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first.response.objective() < b.first.response.objective(); });

  PlanResult result;
  double best = std::numeric_limits<double>::infinity();
  for (const auto& [free, mesh] : order) {
    if (free.response.objective() >= best) {
      ++result.meshes_pruned;
      PlanCandidate pruned;
      pruned.name = "MAP";
      pruned.mesh = mesh;
      pruned.applicable = false;
      pruned.cost.step_seconds = free.response.objective();
      pruned.note = "pruned: even with unlimited memory no faster than the plan";
      result.pruned.push_back(std::move(pruned));
      continue;
    }
    auto cand = SearchMesh(graph, options, cache, mesh, budget, free, best);
    if (!cand.ok()) return cand.status();
    ++result.meshes_solved;
    if (!cand->applicable) {
      result.pruned.push_back(*std::move(cand));
      continue;
    }
    if (cand->fits) best = std::min(best, cand->cost.step_seconds);
    result.alternatives.push_back(*std::move(cand));
  }
  // Fitting plans first, fastest first; among equals the simpler (fewer axes, lower stage).
  std::stable_sort(result.alternatives.begin(), result.alternatives.end(), [](const PlanCandidate& a, const PlanCandidate& b) {
    if (a.fits != b.fits) return a.fits;
    if (a.fits && a.cost.step_seconds != b.cost.step_seconds) return a.cost.step_seconds < b.cost.step_seconds;
    if (!a.fits && a.cost.peak_bytes() != b.cost.peak_bytes()) return a.cost.peak_bytes() < b.cost.peak_bytes();
    if (a.mesh.size() != b.mesh.size()) return a.mesh.size() < b.mesh.size();
    return a.zero_stage < b.zero_stage;
  });
  result.plan = result.alternatives.front();
  result.fits = result.plan.fits;
  auto winner = cache.ClusterFor(result.plan.mesh);
  if (!winner.ok()) return winner.status();
  result.cluster = **winner;

  if (!result.fits) {
    // The least memory any searched plan needs: every node at its smallest strategy, with the
    // most memory-saving ZeRO stage allowed.
    const int stage = options.zero_stage >= 0 ? options.zero_stage : options.max_zero_stage;
    result.min_memory_bytes = std::numeric_limits<double>::infinity();
    for (const auto& mesh : meshes) {
      auto cg = cache.Get(mesh, stage);
      if (!cg.ok()) return cg.status();
      auto cluster = cache.ClusterFor(mesh);
      if (!cluster.ok()) return cluster.status();
      result.min_memory_bytes = std::min(result.min_memory_bytes, MinMemory(graph, **cg, options.recompute ? *cluster : nullptr, options.profile.precision));
    }
  }

  if (options.baselines) {
    auto prepared = PrepareNodes(graph);
    if (!prepared.ok()) return prepared.status();
    auto batch = FindBatch(graph, *prepared);
    if (!batch.ok()) return batch.status();
    for (const BaselineSpec& spec : BaselineSpecs(devices)) {
      auto c = SolveBaseline(graph, options, cache, spec, *batch, *prepared, budget);
      if (!c.ok()) return c.status();
      result.baselines.push_back(*std::move(c));
    }
  }
  result.search_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

v1::Plan ToPlanProto(const Graph& graph, const PlanResult& result, const PlannerOptions& options) {
  v1::Plan plan;
  plan.set_model(graph.name());
  *plan.mutable_graph() = graph.proto();
  for (int64_t d : result.plan.mesh) plan.add_mesh(d);
  plan.set_device_type(result.cluster.device.name);
  plan.set_memory_per_device(result.cluster.memory_per_device);
  plan.set_gpus_per_node(result.cluster.gpus_per_node);
  plan.set_zero_stage(result.plan.zero_stage);
  plan.set_optimizer(OptimizerName(options.profile.optimizer));
  plan.set_precision(PrecisionName(options.profile.precision));
  plan.set_predicted_step_seconds(result.plan.cost.step_seconds);
  plan.set_predicted_peak_bytes(result.plan.cost.peak_bytes());
  for (const std::string& layer : result.plan.recomputed_layers) plan.add_recomputed_layers(layer);
  for (int n = 0; n < graph.num_nodes() && n < static_cast<int>(result.plan.strategies.size()); ++n) {
    const Strategy& s = result.plan.strategies[n];
    v1::NodeStrategy* ns = plan.add_nodes();
    ns->set_node(graph.node(n).name());
    for (const Placement& p : s.inputs) ns->add_input_placements(p.empty() ? "" : PlacementToString(p));
    for (const Placement& p : s.outputs) ns->add_output_placements(PlacementToString(p));
    ns->set_picks(s.ToString());
    ns->set_description(DescribeStrategy(graph, n, s));
    std::string labels;
    for (char l : s.axis_label) labels.push_back(l == 0 ? '.' : l);
    ns->set_axis_labels(labels);
  }
  return plan;
}

}  // namespace mapd

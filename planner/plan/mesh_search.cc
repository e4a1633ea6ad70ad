#include "planner/plan/mesh_search.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "planner/plan/recompute_groups.h"
#include "planner/solver/strategy_solver.h"

namespace mapd {

PlannerOptions ResolveBudget(const PlannerOptions& options, const Cluster& base) {
  PlannerOptions resolved = options;
  resolved.cluster.memory_per_device = base.memory_per_device;
  return resolved;
}

absl::StatusOr<Solved> SolveCostGraph(const Graph& graph, const CostGraph& cg, double budget, const PlannerOptions& options,
                                      const Cluster* recompute_on, double cutoff, bool recompute_all) {
  const double time_limit = options.time_limit_seconds;
  FoldedCostGraph folded = FoldedOf(graph, cg);
  std::vector<std::vector<std::string>> group_layers;
  if (recompute_on != nullptr && (budget > 0 || recompute_all)) {
    group_layers = AddRecomputeGroups(graph, *recompute_on, cg, &folded);
    for (auto& g : *folded.request.mutable_recompute()) {
      if (recompute_all) g.set_min_recomputed(g.layers());  // full checkpointing (the baselines' way)
    }
  }
  v1::SolverRequest& request = folded.request;  // the problem posed, with this solve's budget
  request.set_memory_budget(budget);
  request.set_time_limit_seconds(time_limit);
  request.set_relative_gap(options.relative_gap);
  if (cutoff > 0 && std::isfinite(cutoff)) request.set_objective_cutoff(cutoff);
  auto resp = SolveStrategies(request);
  if (!resp.ok()) return resp.status();
  Solved s;
  s.response = *std::move(resp);
  // MAPD_TRACE=1: one line per ILP on stderr (docs/planner.md).
  static const bool trace_env = getenv("MAPD_TRACE") != nullptr;
  if (trace_env && options.trace) {
    std::string groups;
    for (int g = 0; g < request.recompute_size(); ++g) {
      absl::StrAppend(&groups, ", ", request.recompute(g).name(), ": ",
                      g < s.response.recomputed_size() ? s.response.recomputed(g) : 0, " of ", request.recompute(g).layers(),
                      " layers recompute");
    }
    std::fprintf(stderr, "mapd plan: ILP %d decisions, budget %s -> %s in %.3f s, %.6g s/step%s\n",
                 request.nodes_size(), budget > 0 ? absl::StrCat(static_cast<int64_t>(budget), " B").c_str() : "none",
                 v1::SolverResponse::Status_Name(s.response.status()).c_str(), s.response.solve_seconds(),
                 s.response.objective(), groups.c_str());
  }
  s.decisions = request.nodes_size();
  s.request = std::make_shared<const v1::SolverRequest>(std::move(request));
  if (s.response.status() != v1::SolverResponse::INFEASIBLE) {
    const std::vector<int> choice(s.response.choice().begin(), s.response.choice().end());
    const std::vector<int64_t> recomputed(s.response.recomputed().begin(), s.response.recomputed().end());
    s.choice = folded.Expand(choice);
    s.recomputed_layers = RecomputedLayers(group_layers, recomputed);
    s.recompute_seconds = RecomputeSecondsOf(*s.request, choice, recomputed);
    s.recompute_bytes = RecomputeBytesOf(*s.request, choice, recomputed);
  }
  return s;
}

double MinMemory(const Graph& graph, const CostGraph& cg, const Cluster* recompute_on) {
  FoldedCostGraph folded = FoldedOf(graph, cg);
  if (recompute_on != nullptr) AddRecomputeGroups(graph, *recompute_on, cg, &folded);
  return LeastMemory(folded.request);
}

absl::Status Fill(PlanCandidate& c, const Graph& graph, const Cluster& cluster, const CostGraph& cg, const Solved& s,
                  const PlannerOptions& options) {
  auto cost = CostChoice(graph, cluster, cg, s.choice);
  if (!cost.ok()) return cost.status();
  c.cost = *cost;
  c.cost.recompute_seconds = s.recompute_seconds;
  c.cost.recompute_bytes = s.recompute_bytes;
  c.cost.step_seconds += s.recompute_seconds;
  c.recomputed_layers = s.recomputed_layers;
  c.mesh = cluster.mesh;
  c.micro_batches = cg.micro_batches;
  c.fits = c.cost.peak_bytes() <= BudgetOf(options);
  c.strategies.clear();
  for (size_t n = 0; n < s.choice.size(); ++n) c.strategies.push_back(cg.strategies[n][s.choice[n]]);
  c.solver_status = s.response.status();
  c.decisions = s.decisions;
  c.request = s.request;
  c.solve_seconds += s.response.solve_seconds();
  return absl::OkStatus();
}

absl::StatusOr<Solved> SolveFree(const PlannerOptions& options, CostGraphCache& cache, const std::vector<int64_t>& mesh,
                                 int64_t m) {
  auto cg = cache.Get(mesh, std::max(options.zero_stage, 0), m);
  if (!cg.ok()) return cg.status();
  auto graph = cache.GraphFor(m);
  if (!graph.ok()) return graph.status();
  return SolveCostGraph(**graph, **cg, 0, options);
}

absl::StatusOr<KindsOptimum> SolveKindsFree(const PlannerOptions& options, const FoldSkeleton& skeleton,
                                            const SkeletonCosts& costs, int stage) {
  v1::SolverRequest folded = FoldedRequest(skeleton, costs, stage);
  folded.set_time_limit_seconds(options.time_limit_seconds);
  folded.set_relative_gap(options.relative_gap);
  auto free = SolveStrategies(folded);
  if (!free.ok()) return free.status();
  KindsOptimum out;
  out.objective = free->objective();
  const std::vector<int> choice(free->choice().begin(), free->choice().end());
  for (size_t c = 0; c < choice.size() && c < skeleton.classes.size(); ++c) {
    out.once_seconds += costs.classes[c].costs[stage][choice[c]].once_seconds * static_cast<double>(skeleton.classes[c].multiplicity);
  }
  for (int z = 0; z < 4; ++z) {
    out.memory[z] = costs.stages[z] ? ChoiceMemory(skeleton, costs, choice, z) : std::numeric_limits<double>::infinity();
  }
  return out;
}

int SameSecondsStage(const PlannerOptions& options, int64_t m) {
  return options.zero_stage >= 0 ? options.zero_stage : std::min(m == 1 ? 2 : 1, options.max_zero_stage);
}

double BudgetedBoundOverStages(const PlannerOptions& options, int64_t m, int lowest, const FoldSkeleton& skeleton,
                               const SkeletonCosts& costs, const std::function<double(int)>& budget_at, double target) {
  if (!std::isfinite(target)) return 0;  // nothing to prune against: no bound is needed
  const int highest = HighestZeroStage(options);
  double least = std::numeric_limits<double>::infinity();
  for (int z = std::max(lowest, std::min(SameSecondsStage(options, m), highest)); z <= highest && least >= target; ++z) {
    if (!costs.stages[z]) return 0;
    least = std::min(least, BudgetedBound(skeleton, costs, z, budget_at(z), options.relative_gap, target));
  }
  return std::isfinite(least) && least >= target ? least : 0;
}

absl::StatusOr<PlanCandidate> SearchMesh(const PlannerOptions& options, CostGraphCache& cache, const std::vector<int64_t>& mesh,
                                         int64_t m, const Solved& free, double best_so_far, int min_stage) {
  const double budget = BudgetOf(options);
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
  // Every repeated layer recomputed (a pin): the unconstrained plan keeps them all.
  const bool recompute_all = options.pins.recompute == PlanPins::Recompute::kFull;
  auto stage = lowest_fitting_stage(free, SameSecondsStage(options, m));
  if (!stage.ok()) return stage.status();
  if (*stage >= 0 && !recompute_all) {
    c.zero_stage = *stage;
    if (auto st = Fill(c, graph, **cluster, **cache.Get(mesh, *stage, m), free, options); !st.ok()) return st;
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
    auto s = SolveCostGraph(graph, **cg, budget, options, options.recompute ? *cluster : nullptr, cutoff, recompute_all);
    if (!s.ok()) return s.status();
    if (s->choice.empty()) {
      c.solve_seconds += s->response.solve_seconds();
      continue;
    }
    auto used = lowest_fitting_stage(*s, z);
    if (!used.ok()) return used.status();
    PlanCandidate cand = c;
    cand.zero_stage = *used >= 0 ? *used : z;
    if (auto st = Fill(cand, graph, **cluster, **cache.Get(mesh, cand.zero_stage, m), *s, options); !st.ok()) return st;
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
  c.zero_stage = HighestZeroStage(options);
  if (auto st = Fill(c, graph, **cluster, **cache.Get(mesh, c.zero_stage, m), free, options); !st.ok()) return st;
  return c;
}

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

}  // namespace mapd

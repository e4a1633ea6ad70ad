#include "planner/plan/planner.h"

#include <algorithm>
#include <array>
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
#include "model/graph/mixed_precision.h"
#include "planner/plan/baselines.h"
#include "planner/plan/cost_graph_cache.h"
#include "planner/plan/mesh_search.h"
#include "planner/plan/describe.h"
#include "planner/plan/folded_bound.h"
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
  if (auto st = pins.Validate(); !st.ok()) return st;
  if (!cluster.mesh.empty() && (pins.tp > 0 || pins.dp > 0 || pins.pp > 1)) {
    return absl::InvalidArgumentError("--mesh pins the whole mesh; with --pin tp/dp/pp give --devices instead");
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

// A mesh shape and a micro-batch count, with its unconstrained optimum.
struct Pair {
  std::vector<int64_t> mesh;
  int64_t m = 1;
  int min_stage = 0;  // the lowest ZeRO stage whose parameters, gradients and states fit
  double kind_bound = 0;  // the skeleton's unconstrained optimum at min_stage (folded_bound.h)
  // That optimum's memory per ZeRO stage: pass 0 builds the cost graph only when it fits somewhere.
  std::array<double, 4> kind_memory{};
  // The kinds' bound under the budget (BudgetedBound over the ZeRO stages the pair may take),
  // made once the pair is about to be searched.
  std::optional<double> budgeted;
  // The cost graph's unconstrained optimum at min_stage, solved once the pair is visited: a lower
  // bound on the pair at least kind_bound.
  std::optional<Solved> free;
  double bound() const {
    return std::max({kind_bound, budgeted.value_or(0.0), free ? free->response.objective() : 0.0});
  }
};

// The options with the pins applied (pins.h): stages, ZeRO stage, recomputation off, and the
// micro-batch count of a pinned micro-batch size. `batch`: the graph's global batch (0: none).
absl::StatusOr<PlannerOptions> ApplyPins(const PlannerOptions& options, int64_t devices, int64_t batch) {
  PlannerOptions o = options;
  const PlanPins& pins = options.pins;
  if (pins.empty()) return o;
  auto degrees = pins.Resolve(devices);
  if (!degrees.ok()) return degrees.status();
  if (pins.pp > 0) {
    if (options.pipeline_stages >= 2 && options.pipeline_stages != pins.pp) {
      return absl::InvalidArgumentError(absl::StrCat("--pin pp=", pins.pp, " and --pipeline-stages ", options.pipeline_stages,
                                                     " disagree; give one of them"));
    }
    o.pipeline_stages = static_cast<int>(pins.pp);
  }
  if (pins.virtual_stages != 0 && pins.virtual_stages != 1 && o.pipeline_stages == 1) {
    return absl::InvalidArgumentError("--pin schedule=interleaved needs pipeline stages: pin pp ≥ 2, or --pipeline-stages auto");
  }
  if (pins.zero >= 0) {
    if (options.zero_stage >= 0 && options.zero_stage != pins.zero) {
      return absl::InvalidArgumentError(absl::StrCat("--pin zero=", pins.zero, " and --zero ", options.zero_stage,
                                                     " disagree; give one of them"));
    }
    o.zero_stage = pins.zero;
    o.max_zero_stage = std::max(o.max_zero_stage, pins.zero);
  }
  if (pins.recompute == PlanPins::Recompute::kOff) o.recompute = false;
  if (pins.recompute == PlanPins::Recompute::kFull) o.recompute = true;
  if (pins.mbs > 0) {
    if (degrees->dp == 0) {
      return absl::InvalidArgumentError(absl::StrCat("--pin mbs=", pins.mbs, " sets the micro-batch per data-parallel rank: "
                                                     "pin dp too (or tp and pp, which leave dp)"));
    }
    const int64_t per_pass = degrees->dp * pins.mbs;
    if (batch <= 0 || batch % per_pass != 0) {
      return absl::InvalidArgumentError(absl::StrCat("--pin mbs=", pins.mbs, " with dp=", degrees->dp, " takes ", per_pass,
                                                     " samples a micro-batch, which does not divide the global batch of ", batch));
    }
    const int64_t m = batch / per_pass;
    if (options.micro_batches > 1 && options.micro_batches != m) {
      return absl::InvalidArgumentError(absl::StrCat("--pin mbs=", pins.mbs, " means ", m, " micro-batches, and --micro-batches says ",
                                                     options.micro_batches, "; give one of them"));
    }
    o.micro_batches = m;
  }
  // The degrees the pins leave fixed, derived ones included, for the meshes and baselines.
  o.pins.tp = degrees->tp;
  o.pins.dp = degrees->dp;
  o.pins.pp = degrees->pp;
  return o;
}

// The micro-batch counts to search: the pinned one (checked), or every divisor of the batch.
absl::StatusOr<std::vector<int64_t>> MicroBatchCounts(const Graph& graph, const PlannerOptions& options, CostGraphCache& cache,
                                                      PlanResult& result) {
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

// The pinned configuration: the fastest baseline (fitting first) the pins leave — with pinned
// stages (`stages` ≥ 2) a pipeline, with none (1) a flat one, else either.
std::string PinnedName(const PlanResult& result, int stages) {
  std::string name;
  bool fits = false;
  double seconds = std::numeric_limits<double>::infinity();
  auto consider = [&](const std::string& n, bool f, double s) {
    if ((f && !fits) || (f == fits && s < seconds)) {
      name = n;
      fits = f;
      seconds = s;
    }
  };
  if (stages < 2) {
    for (const PlanCandidate& b : result.baselines) {
      if (b.applicable) consider(b.name, b.fits, b.cost.step_seconds);
    }
  }
  if (stages != 1) {
    for (const PipelinePlan& b : result.pipeline_baselines) {
      if (b.applicable && !b.pruned) consider(b.name, b.fits, b.step_seconds);
    }
  }
  return name;
}

// One search (SearchPlan): its inputs, the state its passes share, and one method per pass, run
// in this order by Run:
//   Bound             every (mesh, micro-batch count) pair's unconstrained optimum from its kinds
//                     alone (folded_bound.h: no cost graph is built) — a lower bound for it — at
//                     the lowest ZeRO stage whose parameters, gradients and optimizer states fit
//                     (a pair with none fits nothing and is not searched), sorted; a pair's cost
//                     graph is built, and its own unconstrained optimum solved, only when a pass
//                     reaches it below the best plan so far;
//   Search            the pairs from the lowest bound up, skipped once the bound reaches the best
//                     plan that fits, in three passes: 0, the pairs whose unconstrained plan fits
//                     (at a ZeRO stage with ZeRO 0's seconds: the pair's optimum; at a higher one:
//                     a plan to beat); 1, the others with a coarse gap (Lagrangian answers, seldom
//                     CBC), for a close plan to beat; 2, the budgeted searches at the accepted gap,
//                     each cut off at the best plan so far;
//   Collect           the best plan per mesh, the meshes pruned by their bound, the pair nearest to
//                     fitting when nothing does; fitting plans first, fastest first;
//   LeastMemory       when nothing fits, the least memory any plan searched needs;
//   Baselines, Adopt  the baselines costed, and one of them taken as MAP's plan when it is a plan
//                     of the space searched and faster than the search's own best (within the gap).
// The pipeline search runs beside it (pipeline_search.h) and is finished last.
class PlanSearch {
 public:
  // `options`: with the budget resolved (ResolveBudget).
  PlanSearch(const Graph& graph, const PlannerOptions& options, CostGraphCache& cache, const Cluster& base)
      : graph_(graph), options_(options), cache_(cache), devices_(base.num_devices()), start_(Clock::now()) {
    meshes_ = options.cluster.mesh.empty() ? MeshShapes(devices_, options.max_mesh_axes) : std::vector<std::vector<int64_t>>{base.mesh};
    const PlanPins flat = options.pins.WithoutStages();
    meshes_.erase(std::remove_if(meshes_.begin(), meshes_.end(), [&](const auto& m) { return !flat.AllowsStageMesh(m); }),
                  meshes_.end());
    static const bool trace_env = getenv("MAPD_TRACE") != nullptr;
    trace_ = trace_env && options.trace;
    best_ = options.objective_cutoff > 0 ? options.objective_cutoff : std::numeric_limits<double>::infinity();
  }

  absl::StatusOr<PlanResult> Run();

 private:
  absl::Status Bound();
  absl::Status Search();
  absl::Status Visit(int pass, size_t i);
  absl::StatusOr<bool> TakeUnconstrained(const Pair& p);
  absl::Status Coarse(Pair& p);
  // The kinds' bound under the budget (Pair::budgeted), once.
  absl::Status BudgetBound(Pair& p);
  // The pair's cost graph solved unconstrained (Pair::free), once — unless the budgeted bound
  // prunes the pair first.
  absl::Status SolveExactBound(Pair& p);
  void Keep(PlanCandidate cand);
  absl::Status Collect();
  absl::Status AddNearest();
  void ReportPrunedMeshes();
  void OnePrunedPerMesh();
  absl::Status LeastMemory();
  absl::Status Baselines();
  absl::Status Adopt();
  void Lap(const char* what) const;

  const Graph& graph_;
  const PlannerOptions& options_;
  CostGraphCache& cache_;
  const int64_t devices_;
  const Clock::time_point start_;
  bool trace_ = false;
  std::vector<std::vector<int64_t>> meshes_;  // the mesh shapes searched
  std::vector<int64_t> counts_;               // the micro-batch counts searched
  PlanResult result_;
  std::vector<Pair> order_;  // the pairs searched, lowest bound first
  std::vector<bool> done_;   // per pair in order_: searched, or pruned by its bound
  // The pair skipped for its states alone that is nearest to fitting, and what those need.
  std::optional<std::pair<std::pair<std::vector<int64_t>, int64_t>, double>> nearest_;
  double best_;                                             // the fastest fitting plan's seconds so far
  std::map<std::vector<int64_t>, PlanCandidate> best_of_mesh_;  // MAP's best per mesh shape
};

void PlanSearch::Lap(const char* what) const {
  if (!trace_) return;
  std::fprintf(stderr, "mapd plan: %s at %.3f s (%zu cost graphs built in %.3f s)\n", what,
               std::chrono::duration<double>(Clock::now() - start_).count(), cache_.built(), cache_.build_seconds());
}

absl::Status PlanSearch::Bound() {
  const double budget = BudgetOf(options_);
  const int lowest_allowed = std::max(options_.zero_stage, 0);
  const int highest_allowed = HighestZeroStage(options_);
  for (const auto& mesh : meshes_) {
    for (int64_t m : counts_) {
      // From the kinds alone: a pair's cost graph is built only if the pair is visited.
      auto skeleton = cache_.SkeletonFor(m);
      if (!skeleton.ok()) return skeleton.status();
      auto kinds = cache_.KindCosts(mesh, m);
      if (!kinds.ok()) return kinds.status();
      int min_stage = lowest_allowed;
      while (min_stage <= highest_allowed && LeastStateMemory(**skeleton, *kinds, min_stage) > budget) ++min_stage;
      if (min_stage > highest_allowed) {
        ++result_.meshes_pruned;
        const double least = LeastStateMemory(**skeleton, *kinds, highest_allowed);
        if (!nearest_ || least < nearest_->second) nearest_ = std::make_pair(std::make_pair(mesh, m), least);
        continue;
      }
      auto free = SolveKindsFree(options_, **skeleton, *kinds, min_stage);
      if (!free.ok()) return free.status();
      order_.push_back({mesh, m, min_stage, free->objective, free->memory, std::nullopt, std::nullopt});
    }
  }
  std::stable_sort(order_.begin(), order_.end(), [](const Pair& a, const Pair& b) { return a.bound() < b.bound(); });
  done_.assign(order_.size(), false);
  Lap("bounds");
  return absl::OkStatus();
}

absl::Status PlanSearch::BudgetBound(Pair& p) {
  if (p.budgeted) return absl::OkStatus();
  auto skeleton = cache_.SkeletonFor(p.m);
  if (!skeleton.ok()) return skeleton.status();
  auto kinds = cache_.KindCosts(p.mesh, p.m);
  if (!kinds.ok()) return kinds.status();
  // Searched only as far as pruning the pair needs.
  const double budget = BudgetOf(options_);
  p.budgeted = BudgetedBoundOverStages(options_, p.m, p.min_stage, **skeleton, *kinds, [budget](int) { return budget; },
                                       best_ * (1 - options_.relative_gap));
  return absl::OkStatus();
}

absl::Status PlanSearch::SolveExactBound(Pair& p) {
  if (auto st = BudgetBound(p); !st.ok()) return st;
  if (p.bound() >= best_ * (1 - options_.relative_gap)) return absl::OkStatus();  // pruned without a cost graph
  if (p.free) return absl::OkStatus();
  PlannerOptions at = options_;
  at.zero_stage = p.min_stage;  // SolveFree's stage
  auto free = SolveFree(at, cache_, p.mesh, p.m);
  if (!free.ok()) return free.status();
  p.free = *std::move(free);
  return absl::OkStatus();
}

void PlanSearch::Keep(PlanCandidate cand) {
  if (cand.fits) best_ = std::min(best_, cand.cost.step_seconds);
  auto it = best_of_mesh_.find(cand.mesh);
  const bool better = it == best_of_mesh_.end() || (cand.fits && !it->second.fits) ||
                      (cand.fits == it->second.fits && (cand.fits ? cand.cost.step_seconds < it->second.cost.step_seconds
                                                                  : cand.cost.peak_bytes() < it->second.cost.peak_bytes()));
  if (better) best_of_mesh_[cand.mesh] = std::move(cand);
}

absl::Status PlanSearch::Search() {
  for (int pass = 0; pass < 3; ++pass) {
    for (size_t i = 0; i < order_.size(); ++i) {
      if (done_[i]) continue;
      if (auto st = Visit(pass, i); !st.ok()) return st;
    }
    Lap(pass == 0 ? "plans that fit unconstrained" : pass == 1 ? "coarse searches" : "budgeted searches");
  }
  return absl::OkStatus();
}

absl::Status PlanSearch::Visit(int pass, size_t i) {
  Pair& p = order_[i];
  if (pass == 1) return Coarse(p);
  if (pass == 0) {
    // Only pairs whose unconstrained plan may fit: the kinds' optimum fits at a stage allowed.
    bool may_fit = false;
    for (int z = std::max(options_.zero_stage, 0); z <= HighestZeroStage(options_); ++z) {
      may_fit = may_fit || p.kind_memory[z] <= BudgetOf(options_);
    }
    if (!may_fit) return absl::OkStatus();
  }
  // Pruned by the kinds' bound, or by the cost graph's once it is solved.
  for (int exact = 0; exact < 2; ++exact) {
    if (p.bound() >= best_ * (1 - options_.relative_gap)) {
      done_[i] = true;
      ++result_.meshes_pruned;
      return absl::OkStatus();
    }
    if (auto st = SolveExactBound(p); !st.ok()) return st;
  }
  if (pass == 0) {
    // Only pairs whose unconstrained plan fits (no budgeted solve): one ILP's worth of work.
    auto taken = TakeUnconstrained(p);
    if (!taken.ok()) return taken.status();
    if (!*taken) return absl::OkStatus();
  }
  auto cand = SearchMesh(options_, cache_, p.mesh, p.m, *p.free, best_, p.min_stage);
  if (!cand.ok()) return cand.status();
  done_[i] = true;
  ++result_.meshes_solved;
  if (!cand->applicable) {
    result_.pruned.push_back(*std::move(cand));
    return absl::OkStatus();
  }
  Keep(*std::move(cand));
  return absl::OkStatus();
}

// Pass 0 for one pair: the lowest stage at which the unconstrained choice fits. At one with ZeRO
// 0's seconds it is the pair's optimum (true: search the pair now, which takes it as it is); at a
// higher one it is a plan to beat, kept, and the pair is searched in the later passes (false).
// Priced from the bound's own cost graph (no cost graph per stage); an incumbent is costed in
// full only when it beats the best so far.
absl::StatusOr<bool> PlanSearch::TakeUnconstrained(const Pair& p) {
  int fits_at = -1;
  const int same_seconds = SameSecondsStage(options_, p.m);
  const int highest = HighestZeroStage(options_);
  auto cg0 = cache_.Get(p.mesh, std::max(options_.zero_stage, 0), p.m);
  if (!cg0.ok()) return cg0.status();
  StagePrice price;
  for (int z = std::max(options_.zero_stage, 0); z <= highest && fits_at < 0; ++z) {
    price = PriceAtStage(**cg0, p.free->choice, z);
    if (price.memory <= BudgetOf(options_)) fits_at = z;
  }
  if (fits_at < 0) return false;
  if (fits_at <= same_seconds) return true;
  if (price.seconds >= best_) return false;
  auto cluster = cache_.ClusterFor(p.mesh);
  if (!cluster.ok()) return cluster.status();
  auto g = cache_.GraphFor(p.m);
  if (!g.ok()) return g.status();
  PlanCandidate incumbent;
  incumbent.name = "MAP";
  incumbent.zero_stage = fits_at;
  if (auto st = Fill(incumbent, **g, **cluster, **cache_.Get(p.mesh, fits_at, p.m), *p.free, options_); !st.ok()) return st;
  Keep(std::move(incumbent));
  return false;
}

// Pass 1 for one pair: searched within a coarse gap and CBC barely (the Lagrangian's answers),
// for a plan close to the best to cut the budgeted searches off at. The pair stays to search.
absl::Status PlanSearch::Coarse(Pair& p) {
  PlannerOptions coarse = options_;
  coarse.relative_gap = std::max(options_.relative_gap, 0.2);
  coarse.time_limit_seconds = std::min(options_.time_limit_seconds, 0.05);
  if (p.bound() >= best_ * (1 - coarse.relative_gap)) return absl::OkStatus();
  if (auto st = SolveExactBound(p); !st.ok()) return st;
  if (p.bound() >= best_ * (1 - coarse.relative_gap)) return absl::OkStatus();
  const auto t0 = Clock::now();
  auto cand = SearchMesh(coarse, cache_, p.mesh, p.m, *p.free, best_, p.min_stage);
  if (!cand.ok()) return cand.status();
  if (trace_) {
    std::fprintf(stderr, "mapd plan: coarse mesh %s m %lld bound %.4g: %s %.4g s/step in %.3f s\n", absl::StrJoin(p.mesh, "x").c_str(),
                 static_cast<long long>(p.m), p.bound(), cand->applicable && cand->fits ? "fits" : "-", cand->cost.step_seconds,
                 std::chrono::duration<double>(Clock::now() - t0).count());
  }
  if (cand->applicable && cand->fits) Keep(*std::move(cand));
  return absl::OkStatus();
}

// Meshes with no pair searched: pruned by their lowest bound (the pair with the lowest bound
// stands for the mesh).
void PlanSearch::ReportPrunedMeshes() {
  for (const auto& mesh : meshes_) {
    if (best_of_mesh_.count(mesh)) continue;
    bool reported = false;
    for (const auto& c : result_.pruned) reported = reported || c.mesh == mesh;
    if (reported) continue;
    for (const Pair& p : order_) {
      if (p.mesh != mesh) continue;
      PlanCandidate pruned;
      pruned.name = "MAP";
      pruned.mesh = mesh;
      pruned.micro_batches = p.m;
      pruned.applicable = false;
      pruned.cost.step_seconds = p.bound();
      pruned.note = "pruned: even with unlimited memory no faster than the plan";
      result_.pruned.push_back(std::move(pruned));
      break;
    }
  }
}

// One pruned entry per mesh shape with no plan (its lowest bound), fastest bound first.
void PlanSearch::OnePrunedPerMesh() {
  std::map<std::vector<int64_t>, PlanCandidate> lowest;
  for (auto& p : result_.pruned) {
    if (best_of_mesh_.count(p.mesh)) continue;
    auto it = lowest.find(p.mesh);
    if (it == lowest.end() || p.cost.step_seconds < it->second.cost.step_seconds) lowest[p.mesh] = std::move(p);
  }
  result_.pruned.clear();
  for (auto& [mesh, p] : lowest) result_.pruned.push_back(std::move(p));
  std::stable_sort(result_.pruned.begin(), result_.pruned.end(),
                   [](const PlanCandidate& a, const PlanCandidate& b) { return a.cost.step_seconds < b.cost.step_seconds; });
}

// Every pair's parameters and states alone are over the budget: the one nearest to fitting is
// reported, unconstrained, at the most sharded stage.
absl::Status PlanSearch::AddNearest() {
  const auto& [mesh, m] = nearest_->first;
  const int highest_allowed = HighestZeroStage(options_);
  PlannerOptions at = options_;
  at.zero_stage = highest_allowed;
  auto free = SolveFree(at, cache_, mesh, m);
  if (!free.ok()) return free.status();
  auto cluster = cache_.ClusterFor(mesh);
  if (!cluster.ok()) return cluster.status();
  auto g = cache_.GraphFor(m);
  if (!g.ok()) return g.status();
  PlanCandidate c;
  c.name = "MAP";
  c.zero_stage = highest_allowed;
  if (auto st = Fill(c, **g, **cluster, **cache_.Get(mesh, highest_allowed, m), *free, options_); !st.ok()) return st;
  best_of_mesh_[mesh] = std::move(c);
  return absl::OkStatus();
}

absl::Status PlanSearch::Collect() {
  ReportPrunedMeshes();
  if (best_of_mesh_.empty() && nearest_) {
    if (auto st = AddNearest(); !st.ok()) return st;
  }
  OnePrunedPerMesh();
  for (auto& [mesh, cand] : best_of_mesh_) result_.alternatives.push_back(std::move(cand));
  // Fitting plans first, fastest first; among equals the simpler (fewer axes, lower stage, fewer micro-batches).
  std::stable_sort(result_.alternatives.begin(), result_.alternatives.end(), [](const PlanCandidate& a, const PlanCandidate& b) {
    if (a.fits != b.fits) return a.fits;
    if (a.fits && a.cost.step_seconds != b.cost.step_seconds) return a.cost.step_seconds < b.cost.step_seconds;
    if (!a.fits && a.cost.peak_bytes() != b.cost.peak_bytes()) return a.cost.peak_bytes() < b.cost.peak_bytes();
    if (a.mesh.size() != b.mesh.size()) return a.mesh.size() < b.mesh.size();
    if (a.zero_stage != b.zero_stage) return a.zero_stage < b.zero_stage;
    return a.micro_batches < b.micro_batches;
  });
  return absl::OkStatus();
}

// The least memory any searched plan needs: every node at its smallest strategy, with the most
// memory-saving ZeRO stage allowed and the most micro-batches searched.
absl::Status PlanSearch::LeastMemory() {
  const int stage = HighestZeroStage(options_);
  result_.min_memory_bytes = std::numeric_limits<double>::infinity();
  for (const auto& mesh : meshes_) {
    for (int64_t m : counts_) {
      auto cg = cache_.Get(mesh, stage, m);
      if (!cg.ok()) return cg.status();
      auto cluster = cache_.ClusterFor(mesh);
      if (!cluster.ok()) return cluster.status();
      auto g = cache_.GraphFor(m);
      if (!g.ok()) return g.status();
      result_.min_memory_bytes = std::min(result_.min_memory_bytes, MinMemory(**g, **cg, options_.recompute ? *cluster : nullptr));
    }
  }
  return absl::OkStatus();
}

absl::Status PlanSearch::Baselines() {
  const PlanPins flat = options_.pins.WithoutStages();
  for (const BaselineSpec& spec : BaselineSpecs(devices_)) {
    if (!flat.AllowsStageMesh(spec.mesh)) continue;  // a baseline the pins rule out
    auto c = SolveBaseline(options_, cache_, spec, counts_);
    if (!c.ok()) return c.status();
    result_.baselines.push_back(*std::move(c));
  }
  return absl::OkStatus();
}

// The baselines are plans of MAP's space; within the accepted gap one can come out faster than
// the search's own best. Then it is MAP's plan, and the result says so. Only a baseline inside
// the space searched counts: its mesh searched, its ZeRO stage, micro-batch count and
// recomputation allowed (a pinned mesh or stage excludes the others).
absl::Status PlanSearch::Adopt() {
  auto searched = [&](const PlanCandidate& b) {
    return std::find(meshes_.begin(), meshes_.end(), b.mesh) != meshes_.end() &&
           (options_.zero_stage < 0 ? b.zero_stage <= options_.max_zero_stage : b.zero_stage == options_.zero_stage) &&
           std::find(counts_.begin(), counts_.end(), b.micro_batches) != counts_.end() &&
           (options_.recompute || b.recomputed_layers.empty());
  };
  const PlanCandidate* faster = nullptr;
  for (const PlanCandidate& b : result_.baselines) {
    if (b.applicable && b.fits && searched(b) && (!result_.fits || b.cost.step_seconds < result_.plan.cost.step_seconds * (1 - 1e-12)) &&
        (faster == nullptr || b.cost.step_seconds < faster->cost.step_seconds)) {
      faster = &b;
    }
  }
  if (faster == nullptr) return absl::OkStatus();
  result_.adopted_note = result_.fits ? absl::StrFormat("the search's own best was %.1f ms (within its accepted gap of %.3g%%); "
                                                        "the baseline '%s', a plan of the same space, is faster",
                                                        result_.plan.cost.step_seconds * 1e3, 100 * options_.relative_gap, faster->name)
                                      : absl::StrCat("the baseline '", faster->name, "' fits where the search found nothing");
  result_.plan = *faster;
  result_.plan.name = "MAP";
  result_.fits = true;
  auto adopted = cache_.ClusterFor(result_.plan.mesh);
  if (!adopted.ok()) return adopted.status();
  result_.cluster = **adopted;
  return absl::OkStatus();
}

absl::StatusOr<PlanResult> PlanSearch::Run() {
  auto counts = MicroBatchCounts(graph_, options_, cache_, result_);
  if (!counts.ok()) return counts.status();
  counts_ = *counts;
  result_.micro_batch_counts = counts_;
  // Pipeline stages: their bounds made beside this search (pipeline_search.h).
  std::unique_ptr<PipelineSearchTask> pipelines;
  if (options_.pipeline_stages != 1) {
    auto task = PipelineSearchTask::Start(graph_, options_, counts_);
    if (!task.ok()) return task.status();
    pipelines = *std::move(task);
  }
  for (auto step : {&PlanSearch::Bound, &PlanSearch::Search, &PlanSearch::Collect}) {
    if (auto st = (this->*step)(); !st.ok()) return st;
  }
  if (result_.alternatives.empty() && options_.objective_cutoff > 0) {
    // Nothing faster than the cutoff: not a plan anyone asked for.
    result_.plan.name = "MAP";
    result_.plan.applicable = false;
    result_.plan.note = "pruned: nothing faster than the cutoff fits";
    result_.fits = false;
    result_.search_seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    return std::move(result_);
  }
  if (result_.alternatives.empty()) {
    return absl::InternalError("the search kept no plan: every mesh shape was pruned without one to compare with");
  }
  result_.plan = result_.alternatives.front();
  result_.fits = result_.plan.fits;
  auto winner = cache_.ClusterFor(result_.plan.mesh);
  if (!winner.ok()) return winner.status();
  result_.cluster = **winner;
  if (!result_.fits && options_.least_memory) {
    if (auto st = LeastMemory(); !st.ok()) return st;
  }
  Lap("least memory");
  // MAP's pipelines are explored below the plan without stages (pinned stages want the best
  // pipeline of that count even when it is slower), while the baselines are costed here.
  if (pipelines) {
    pipelines->ExploreBelow(result_.fits && options_.pipeline_stages < 2 ? result_.plan.cost.step_seconds
                                                                         : std::numeric_limits<double>::infinity());
  }
  if (options_.baselines) {
    if (auto st = Baselines(); !st.ok()) return st;
  }
  Lap("baselines");
  if (auto st = Adopt(); !st.ok()) return st;
  if (pipelines) {
    if (auto st = pipelines->Finish(result_); !st.ok()) return st;
    Lap("pipeline stages");
  }
  if (!options_.pins.empty()) {
    result_.pinned_name = PinnedName(result_, options_.pipeline_stages);
    // Nothing that keeps the pins fits: which memory term of the pinned configuration breaks the
    // budget (a pinned pipeline's is said by the pipeline search).
    if (options_.baselines && !result_.fits && !result_.pipeline) {
      for (const PlanCandidate& b : result_.baselines) {
        if (b.applicable && b.name == result_.pinned_name) {
          return PinnedConfigurationDoesNotFit(b.name, b.micro_batches, "", b.cost, 1, options_.cluster.memory_per_device);
        }
      }
    }
  }
  result_.search_seconds = std::chrono::duration<double>(Clock::now() - start_).count();
  return std::move(result_);
}

}  // namespace

absl::StatusOr<PlanResult> SearchPlan(const Graph& graph, const PlannerOptions& options, CostGraphCache* shared_cache) {
  if (auto st = options.Validate(); !st.ok()) return st;
  if (options.profile.precision == Precision::kBf16Mixed && !IsBf16Mixed(graph.proto())) {
    return absl::InvalidArgumentError(absl::StrCat("graph '", graph.name(), "' is planned in bf16 but is not the bf16 "
                                                   "graph: convert it first (GraphAtPrecision), so that the plan's "
                                                   "nodes are the ones that run"));
  }
  auto base = MakeCluster(options.cluster);  // validates the device type, budget and mesh
  if (!base.ok()) return base.status();
  const PlannerOptions resolved = ResolveBudget(options, *base);
  std::unique_ptr<CostGraphCache> own_cache;
  auto cache = CacheFor(graph, resolved, shared_cache, own_cache);
  if (!cache.ok()) return cache.status();
  auto analysis = (*cache)->Analysis();
  if (!analysis.ok()) return analysis.status();
  auto pinned = ApplyPins(resolved, base->num_devices(), (*analysis)->batch);
  if (!pinned.ok()) return pinned.status();
  if (auto st = pinned->Validate(); !st.ok()) return st;
  return PlanSearch(graph, *pinned, **cache, *base).Run();
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
    if (pp.virtual_stages > 1) plan.set_virtual_stages(pp.virtual_stages);
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


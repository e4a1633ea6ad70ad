#include "planner/plan/stage_solver.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "planner/plan/baselines.h"
#include "planner/plan/mesh_search.h"
#include "planner/sharding/collectives.h"

namespace mapd {

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
  return SolveBaselineAt(ResolveBudget(options, *base), cache, spec, options.micro_batches);
}

namespace {
// The pipeline's options with its stages' ranks sharing their nodes with every other stage's
// (ClusterOptions::host_ranks: the whole pipeline's devices), for every stage cluster made from them.
PlannerOptions SharingTheNodes(PlannerOptions o) {
  if (o.cluster.host_ranks == 0) {
    int64_t whole = 1;
    for (int64_t d : o.cluster.mesh) whole *= d;
    o.cluster.host_ranks = o.cluster.devices > 0 ? o.cluster.devices : whole;
  }
  return o;
}
}  // namespace

StageSolver::StageSolver(const Graph& graph, const LayerSequence& seq, const PlannerOptions& options, bool coarse)
    : graph_(graph), seq_(seq), options_(SharingTheNodes(options)), coarse_(coarse) {
  std::map<std::string, int> ids;
  for (const std::string& k : seq.layer_kind) kind_id_.push_back(ids.emplace(k, static_cast<int>(ids.size())).first->second);
}

absl::StatusOr<std::shared_ptr<const Graph>> StageSolver::GraphOfKind(int a, int b) {
  const std::string key = KindKey(a, b);
  auto it = graphs_.find(key);
  if (it != graphs_.end()) return it->second;
  auto g = StageGraph(graph_, seq_, a, b);
  if (!g.ok()) return g.status();
  return graphs_[key] = std::make_shared<const Graph>(*std::move(g));
}

absl::StatusOr<const StageSolve*> StageSolver::Solve(int a, int b, int64_t depth, const std::vector<int64_t>& mesh, int64_t m,
                                                      int64_t tp, double cutoff) {
  depth = std::min(depth, m);
  auto key = std::make_tuple(KindKey(a, b), depth, mesh, m, tp);
  auto it = solves_.find(key);
  if (it != solves_.end()) return it->second.get();
  auto g = GraphOfKind(a, b);
  if (!g.ok()) return g.status();
  PlannerOptions o = StageOptions(mesh, m, depth);
  if (tp == 0 && std::isfinite(cutoff)) o.objective_cutoff = cutoff;
  auto s = std::make_unique<StageSolve>();
  CostGraphCache* cache = CacheOf(a, b, **g);
  if (tp == 0) {
    auto r = SearchPlan(**g, o, cache);
    if (!r.ok()) return r.status();
    s->plan = r->plan;
    s->fits = r->fits;
  } else {
    auto c = SolveMegatronStage(**g, o, tp, cache);
    if (!c.ok()) return c.status();
    s->plan = *std::move(c);
    s->fits = s->plan.applicable && s->plan.fits;
  }
  ++solved_;
  if (s->plan.applicable) {
    s->once_seconds = s->plan.cost.once_seconds;
    s->pass_seconds = (s->plan.cost.step_seconds - s->once_seconds) / static_cast<double>(m);
    if (b < layers()) {
      auto send = SendSeconds(*cache, s->plan, mesh, m);
      if (!send.ok()) return send.status();
      s->send_seconds = *send;
    }
  }
  return (solves_[key] = std::move(s)).get();
}

absl::StatusOr<StageSolver::LayerCost> StageSolver::LayerBound(const std::vector<int64_t>& mesh, int64_t m) {
  auto key = std::make_pair(mesh, m);
  auto it = bounds_.find(key);
  if (it != bounds_.end()) return it->second;
  // From the layer's kinds (folded_bound.h): no cost graph is built for a bound.
  auto least = LeastMiddleLayer(m, [&](const Graph&, CostGraphCache* cache) -> absl::StatusOr<std::optional<LayerObjective>> {
    const PlannerOptions o = StageOptions(mesh, m, 1);
    cache->set_pipeline_depth(1);
    auto skeleton = cache->SkeletonFor(m);
    if (!skeleton.ok()) return skeleton.status();
    const int stage = std::max(o.zero_stage, 0);
    auto kinds = cache->KindCosts(mesh, m, stage);
    if (!kinds.ok()) return kinds.status();
    auto r = SolveKindsFree(o, **skeleton, *kinds, stage);
    if (!r.ok()) return r.status();
    return LayerObjective{r->objective, r->once_seconds};
  });
  if (!least.ok()) return least.status();
  return bounds_[key] = *least;
}

absl::StatusOr<double> StageSolver::LayerBudgetBound(const std::vector<int64_t>& mesh, int64_t m, int layers, double target) {
  const PlannerOptions o = StageOptions(mesh, m, 1);
  auto least = LeastMiddleLayer(m, [&](const Graph&, CostGraphCache* cache) -> absl::StatusOr<std::optional<LayerObjective>> {
    cache->set_pipeline_depth(1);
    auto skeleton = cache->SkeletonFor(m);
    if (!skeleton.ok()) return skeleton.status();
    auto kinds = cache->KindCosts(mesh, m);
    if (!kinds.ok()) return kinds.status();
    // The layer's share of the room (the fixed bytes of one layer given back: a stage's are not a
    // layer's times the layers).
    const auto share = [&](int z) { return BudgetOf(o) / layers + kinds->fixed_at_stage[z]; };
    return LayerObjective{BudgetedBoundOverStages(o, m, std::max(o.zero_stage, 0), **skeleton, *kinds, share, target), 0};
  });
  if (!least.ok()) return least.status();
  return least->objective;
}

absl::StatusOr<StageSolver::LayerCost> StageSolver::MegatronLayerBound(const std::vector<int64_t>& mesh, int64_t m, int64_t tp) {
  auto key = std::make_tuple(mesh, m, tp);
  auto it = megatron_bounds_.find(key);
  if (it != megatron_bounds_.end()) return it->second;
  auto least = LeastMiddleLayer(m, [&](const Graph& g, CostGraphCache* cache) -> absl::StatusOr<std::optional<LayerObjective>> {
    PlannerOptions o = StageOptions(mesh, m, 1);
    o.cluster.memory_per_device = std::numeric_limits<int64_t>::max() / 4;  // no budget
    o.recompute = false;
    auto c = SolveMegatronStage(g, o, tp, cache);
    if (!c.ok()) return c.status();
    if (!c->applicable) return std::nullopt;
    return LayerObjective{c->cost.step_seconds, c->cost.once_seconds};
  });
  if (!least.ok()) return least.status();
  return megatron_bounds_[key] = *least;
}

void StageSolver::Release() {
  solves_.clear();
  caches_.clear();  // before the memos they use
  graphs_.clear();
  memos_ = CostGraphMemos();
  bounds_.clear();
  megatron_bounds_.clear();
}

double StageSolver::build_seconds() const {
  double total = 0;
  for (const auto& [key, cache] : caches_) total += cache->build_seconds();
  return total;
}

AxisLink StageSolver::StageLink(int64_t stage_devices) const {
  auto [intra, inter] = DefaultLinks(options_.cluster.device_type);
  const ClusterOptions& c = options_.cluster;
  const bool across = stage_devices >= c.gpus_per_node;
  AxisLink link = across ? inter : intra;
  const double alpha = across ? c.inter_alpha : c.intra_alpha, beta = across ? c.inter_beta : c.intra_beta;
  if (alpha >= 0) link.alpha = alpha;
  if (beta >= 0) link.beta = beta;
  link.inter_node = across;
  return link;
}

PlannerOptions StageSolver::StageOptions(const std::vector<int64_t>& mesh, int64_t m, int64_t depth) const {
  PlannerOptions o = options_;
  o.cluster.mesh = mesh;
  o.cluster.devices = 0;
  o.micro_batches = m;
  o.pipeline_stages = 1;
  o.pipeline_depth = depth;
  o.baselines = false;
  static const bool trace_stages = getenv("MAPD_TRACE") != nullptr && std::string(getenv("MAPD_TRACE")) == "2";
  o.trace = trace_stages;  // MAPD_TRACE=2: the stages' searches too
  o.least_memory = false;
  // The pipeline's pins were applied to it; a stage keeps only its recomputation.
  o.pins = PlanPins{};
  o.pins.recompute = options_.pins.recompute;
  if (coarse_) {
    // Exploring: the Lagrangian's answers within 5%, CBC barely (the cuts kept are solved again).
    o.relative_gap = std::max(options_.relative_gap, 0.05);
    o.time_limit_seconds = std::min(options_.time_limit_seconds, 0.01);
  } else {
    // The cuts kept and the baselines: at the accepted gap, CBC for at most a quarter second an ILP.
    o.time_limit_seconds = std::min(options_.time_limit_seconds, 0.25);
  }
  return o;
}

CostGraphCache* StageSolver::CacheOf(int a, int b, const Graph& g) {
  auto& cache = caches_[KindKey(a, b)];
  if (cache == nullptr) cache = std::make_unique<CostGraphCache>(g, options_.cluster, options_.profile, &memos_);
  return cache.get();
}

std::string StageSolver::KindKey(int a, int b) const {
  std::string key = absl::StrCat(a == 0 ? "P" : "-", b == layers() ? "E" : "-");
  for (int l = a; l < b; ++l) absl::StrAppend(&key, ",", kind_id_[l]);
  // Ranges of one kind differ in their layers' names only; a first layer may be set apart by
  // what it reads (LLaMA's rotary tables), so its kind is its own.
  return key;
}

absl::StatusOr<double> StageSolver::SendSeconds(CostGraphCache& cache, const PlanCandidate& plan, const std::vector<int64_t>& mesh,
                                                int64_t m) {
  // One micro-batch's outputs (and their gradients) cross to the next stage per pass.
  auto micro = cache.GraphFor(m);
  if (!micro.ok()) return micro.status();
  const Graph& g = **micro;
  ClusterOptions co = options_.cluster;
  co.mesh = mesh;
  co.devices = 0;
  auto cluster = MakeCluster(co);
  if (!cluster.ok()) return cluster.status();
  const AxisLink link = StageLink(cluster->num_devices());
  double seconds = 0;
  for (const std::string& out : g.proto().outputs()) {
    const ValueInfo* vi = g.FindValue(out);
    if (vi == nullptr || vi->def != ValueDef::kNode || vi->index >= static_cast<int>(plan.strategies.size())) continue;
    const Strategy& s = plan.strategies[vi->index];
    const double bytes = static_cast<double>(LocalBytes(vi->type, s.outputs[vi->output_index], *cluster));
    const ValueInfo* original = graph_.FindValue(out);
    const bool grad = original != nullptr && original->def == ValueDef::kNode && seq_.node_needs_grad[original->index] &&
                      IsFloating(vi->type.dtype);
    seconds += (link.alpha + bytes * link.beta) * (grad ? 2 : 1);
  }
  return seconds;
}

absl::StatusOr<StageSolver::LayerCost> StageSolver::LeastMiddleLayer(int64_t m, const LayerCoster& cost) {
  LayerCost least{layers() >= 3 ? std::numeric_limits<double>::infinity() : 0, layers() >= 3 ? std::numeric_limits<double>::infinity() : 0};
  std::map<int, bool> seen;
  for (int l = 1; l + 1 < layers(); ++l) {
    if (!seen.emplace(kind_id_[l], true).second) continue;
    auto g = GraphOfKind(l, l + 1);
    if (!g.ok()) return g.status();
    auto c = cost(**g, CacheOf(l, l + 1, **g));
    if (!c.ok()) return c.status();
    if (!c->has_value()) return LayerCost{0, 0};
    least.pass = std::min(least.pass, ((*c)->objective - (*c)->once) / static_cast<double>(m));
    least.objective = std::min(least.objective, (*c)->objective);
  }
  return least;
}

}  // namespace mapd

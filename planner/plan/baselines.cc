#include "planner/plan/baselines.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/bytes.h"
#include "absl/strings/str_join.h"
#include "planner/plan/mesh_search.h"

#include <unordered_map>

namespace mapd {

namespace {

bool HasTrainableMatrix(const PreparedNode& pn) {
  for (size_t i = 0; i < pn.in.size(); ++i) {
    if (IsTrainable(pn.role[i]) && pn.in[i].shape.size() >= 2) return true;
  }
  return false;
}

// Does strategy `s` of node `pn` (batch label `batch`) play `role` on mesh axis `a`?
bool PlaysRole(const PreparedNode& pn, char batch, const Strategy& s, int a, AxisRole role) {
  const char picked = s.axis_label[a];
  if (role == AxisRole::kData) return picked == batch;
  if (picked != 0 && picked == batch) return false;  // a tensor-parallel axis never splits the batch
  if (HasTrainableMatrix(pn)) {
    // Every trainable matrix sharded on this axis.
    for (size_t i = 0; i < pn.in.size(); ++i) {
      if (!IsTrainable(pn.role[i]) || pn.in[i].shape.size() < 2) continue;
      if (s.inputs[i][a].kind != AxisPlacement::Kind::kShard) return false;
    }
    return true;
  }
  // Norms (trainable vectors only) and everything else: replicated across the group, or split on
  // a dimension other than the batch — Megatron's sequence parallelism, where norms, dropouts
  // and residual adds run split on the sequence (their normalised dimensions are unsplittable).
  return true;
}

}  // namespace

std::vector<bool> FamilyMask(const PreparedNode& node, char batch, const SharedList<Strategy>& strategies,
                             const std::vector<AxisRole>& roles) {
  std::vector<bool> mask(strategies.size(), false);
  bool any = false;
  for (size_t k = 0; k < strategies.size(); ++k) {
    bool ok = true;
    for (size_t a = 0; a < roles.size() && ok; ++a) ok = PlaysRole(node, batch, strategies[k], static_cast<int>(a), roles[a]);
    mask[k] = ok;
    any = any || ok;
  }
  if (!any && !strategies.empty()) mask[0] = true;  // generation puts the replicated strategy first
  return mask;
}

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

absl::StatusOr<PlanCandidate> SolveBaselineAt(const PlannerOptions& options, CostGraphCache& cache, const BaselineSpec& spec,
                                              int64_t m) {
  const double budget = BudgetOf(options);
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
  const auto& prepared = (*facts)->prepared;
  const StrategyFilter family = [&](int n, const SharedList<Strategy>& strategies) {
    return FamilyMask(*prepared[n], batch->label[n], strategies, spec.roles);
  };
  // The family's cost graph: restricted from the whole one when the search built it, else built
  // with only the family's strategies costed (the same graph: CostGraph.ARestrictedBuild...).
  absl::StatusOr<CostGraph> restricted = absl::UnknownError("");
  if (cache.Built(spec.mesh, spec.zero_stage, m)) {
    const CostGraph& whole = **cache.Get(spec.mesh, spec.zero_stage, m);
    std::vector<std::vector<bool>> masks(whole.strategies.size());
    for (size_t n = 0; n < masks.size(); ++n) masks[n] = family(static_cast<int>(n), whole.strategies[n]);
    restricted = RestrictStrategies(whole, **graph, masks);
  } else {
    restricted = cache.BuildRestricted(spec.mesh, spec.zero_stage, m, family);
  }
  if (!restricted.ok()) return restricted.status();
  // Pinned full recomputation: solved with every repeated layer recomputed, fitting or not.
  const bool recompute_all = options.pins.recompute == PlanPins::Recompute::kFull;
  const Cluster* recompute_on = recompute_all ? *cluster : nullptr;
  auto s = SolveCostGraph(**graph, *restricted, budget, options, recompute_on, 0, recompute_all);
  if (!s.ok()) return s.status();
  if (s->choice.empty() && options.recompute && !recompute_all) {
    // Does not fit: the same family with every repeated layer recomputed, as people run it.
    auto all = SolveCostGraph(**graph, *restricted, budget, options, *cluster, 0, /*recompute_all=*/true);
    if (!all.ok()) return all.status();
    c.solve_seconds += s->response.solve_seconds();
    if (!all->choice.empty() && !all->recomputed_layers.empty()) {
      s = std::move(all);
      c.name = absl::StrCat(spec.name, " + full recompute");
    }
  }
  if (s->choice.empty()) {  // does not fit: cost its fastest plan anyway
    c.solve_seconds += s->response.solve_seconds();
    s = SolveCostGraph(**graph, *restricted, 0, options, recompute_on, 0, recompute_all);
    if (!s.ok()) return s.status();
  }
  if (recompute_all && !s->recomputed_layers.empty()) c.name = absl::StrCat(spec.name, " + full recompute");
  if (auto st = Fill(c, **graph, **cluster, *restricted, *s, options); !st.ok()) return st;
  return c;
}

namespace {

// The first index in [lo, hi) at which `holds` is true, given that it stays true from there on,
// or hi: probed at lo, lo + 1, lo + 3, lo + 7, ... and then bisected, so an answer near lo costs
// few probes and one far from it about 2·log2(hi − lo).
absl::StatusOr<size_t> FirstHolding(size_t lo, size_t hi, const std::function<absl::StatusOr<bool>(size_t)>& holds) {
  if (lo >= hi) return hi;
  auto first = holds(lo);
  if (!first.ok()) return first.status();
  if (*first) return lo;
  size_t fails = lo, holding = hi;
  for (size_t step = 1; fails + step < hi; step *= 2) {
    auto h = holds(fails + step);
    if (!h.ok()) return h.status();
    if (*h) {
      holding = fails + step;
      break;
    }
    fails += step;
  }
  while (holding - fails > 1) {
    const size_t mid = fails + (holding - fails) / 2;
    auto h = holds(mid);
    if (!h.ok()) return h.status();
    (*h ? holding : fails) = mid;
  }
  return holding;
}

}  // namespace

absl::StatusOr<PlanCandidate> SolveBaseline(const PlannerOptions& options, CostGraphCache& cache, const BaselineSpec& spec,
                                            const std::vector<int64_t>& counts) {
  // The counts at which the family applies (a micro-batch splits over its data degree).
  std::vector<int64_t> applicable;
  for (int64_t m : counts) {
    auto facts = cache.FactsFor(m);
    if (!facts.ok()) return facts.status();
    const int64_t batch = (*facts)->batch.batch;
    if (spec.data_degree <= 1 || (batch != 0 && batch % spec.data_degree == 0)) applicable.push_back(m);
  }
  if (applicable.empty()) return SolveBaselineAt(options, cache, spec, counts.front());  // says why not
  // Solved at most once per count. Fitting — plainly, or with every layer recomputed — holds from
  // some count on (a micro-batch's activations only shrink as there are more of them), and so
  // does fitting plainly: the fewest micro-batches are found by probing (FirstHolding).
  std::map<size_t, PlanCandidate> solved;
  auto at = [&](size_t i) -> absl::StatusOr<const PlanCandidate*> {
    auto it = solved.find(i);
    if (it != solved.end()) return &it->second;
    auto c = SolveBaselineAt(options, cache, spec, applicable[i]);
    if (!c.ok()) return c.status();
    return &(solved[i] = *std::move(c));
  };
  auto fits = [&](size_t i) -> absl::StatusOr<bool> {
    auto c = at(i);
    if (!c.ok()) return c.status();
    return (*c)->fits;
  };
  auto fits_plainly = [&](size_t i) -> absl::StatusOr<bool> {
    auto c = at(i);
    if (!c.ok()) return c.status();
    return (*c)->fits && (*c)->recomputed_layers.empty();
  };
  const size_t n = applicable.size();
  // The fewest micro-batches first (most baselines that fit, fit there), then the most: when
  // nothing fits there, nothing fits at all (reported at the fewest).
  auto first = fits(0);
  if (!first.ok()) return first.status();
  if (!*first) {
    auto last = fits(n - 1);
    if (!last.ok()) return last.status();
    if (!*last) return solved.at(0);
  }
  auto first_fit = FirstHolding(0, n, fits);
  if (!first_fit.ok()) return first_fit.status();
  auto first_plain = FirstHolding(*first_fit, n, fits_plainly);
  if (!first_plain.ok()) return first_plain.status();
  auto c = at(*first_plain < n ? *first_plain : *first_fit);
  if (!c.ok()) return c.status();
  return **c;
}

absl::Status PinnedConfigurationDoesNotFit(const std::string& name, int64_t micro_batches, const std::string& where,
                                           const ChoiceCost& w, int64_t in_flight, int64_t budget) {
  const std::vector<std::pair<const char*, double>> terms = {{"parameters", w.parameter_bytes},
                                                             {"gradients", w.gradient_bytes},
                                                             {"optimizer states", w.optimizer_bytes},
                                                             {"activations", w.activation_bytes + w.recompute_bytes},
                                                             {"gathered parameters", w.fixed_bytes}};
  const auto largest = std::max_element(terms.begin(), terms.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  std::vector<std::string> parts;
  for (const auto& [what, bytes] : terms) {
    if (bytes > 0) parts.push_back(absl::StrCat(what, " ", FormatBytes(static_cast<int64_t>(bytes))));
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "the pinned configuration '", name, "' at ", micro_batches, micro_batches == 1 ? " micro-batch" : " micro-batches", " does not fit: ", where.empty() ? "it" : where,
      " needs ", FormatBytes(static_cast<int64_t>(w.peak_bytes())), " per device (", absl::StrJoin(parts, ", "), "; ", in_flight,
      " micro-batch", in_flight == 1 ? "" : "es", " in flight) against ", FormatBytes(budget), "; the largest term is its ",
      largest->first,
      largest->first == std::string("activations") ? " — pin recompute=full, a smaller mbs, or more pp"
                                                   : " — pin more tp or pp, or a higher zero stage"));
}

}  // namespace mapd

#include "planner/solver/strategy_solver.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "planner/solver/cbc_backend.h"
#include "planner/solver/dominance.h"
#include "planner/solver/elimination.h"

namespace mapd {

namespace {
int64_t Mult(int64_t m) { return m <= 0 ? 1 : m; }
}  // namespace

absl::Status ValidateSolverRequest(const v1::SolverRequest& r) {
  for (int v = 0; v < r.nodes_size(); ++v) {
    const auto& n = r.nodes(v);
    if (n.cost_size() == 0) return absl::InvalidArgumentError(absl::StrCat("solver node ", v, " ('", n.name(), "') has no strategy"));
    if (n.memory_size() != n.cost_size()) {
      return absl::InvalidArgumentError(absl::StrCat("solver node ", v, " ('", n.name(), "') has ", n.cost_size(),
                                                     " costs but ", n.memory_size(), " memory entries"));
    }
    if (n.multiplicity() < 0) return absl::InvalidArgumentError(absl::StrCat("solver node ", v, " has a negative multiplicity"));
  }
  for (int e = 0; e < r.edges_size(); ++e) {
    const auto& edge = r.edges(e);
    if (edge.src() < 0 || edge.src() >= r.nodes_size() || edge.dst() < 0 || edge.dst() >= r.nodes_size() ||
        edge.src() == edge.dst()) {
      return absl::InvalidArgumentError(absl::StrCat("solver edge ", e, " joins nodes ", edge.src(), " and ", edge.dst(),
                                                     ", which is not an edge between two different nodes"));
    }
    const int64_t want = static_cast<int64_t>(r.nodes(edge.src()).cost_size()) * r.nodes(edge.dst()).cost_size();
    if (edge.cost_size() != want) {
      return absl::InvalidArgumentError(absl::StrCat("solver edge ", e, " has ", edge.cost_size(), " costs; ",
                                                     "its nodes need ", want));
    }
  }
  if (r.time_limit_seconds() < 0) return absl::InvalidArgumentError("solver time limit is negative");
  std::vector<int> group_of(r.nodes_size(), -1);
  for (int g = 0; g < r.recompute_size(); ++g) {
    const auto& group = r.recompute(g);
    const std::string where = absl::StrCat("recompute group ", g, " ('", group.name(), "')");
    if (group.layers() < 1) return absl::InvalidArgumentError(absl::StrCat(where, " has ", group.layers(), " layers; it needs at least 1"));
    if (group.min_recomputed() < 0 || group.min_recomputed() > group.layers()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": min_recomputed ", group.min_recomputed(), " is not in [0, ",
                                                     group.layers(), "]"));
    }
    for (const auto& m : group.members()) {
      if (m.node() < 0 || m.node() >= r.nodes_size()) {
        return absl::InvalidArgumentError(absl::StrCat(where, " names node ", m.node(), ", which does not exist"));
      }
      if (group_of[m.node()] >= 0) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": node ", m.node(), " is already a member of group ", group_of[m.node()]));
      }
      group_of[m.node()] = g;
      const int k = r.nodes(m.node()).cost_size();
      if (m.saved_size() != k || m.seconds_size() != k || m.rematerialized_size() != k) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": member node ", m.node(), " has ", k, " strategies but ",
                                                       m.saved_size(), "/", m.seconds_size(), "/", m.rematerialized_size(),
                                                       " saved/seconds/rematerialized entries"));
      }
    }
    for (const auto& e : group.edges()) {
      if (e.edge() < 0 || e.edge() >= r.edges_size()) {
        return absl::InvalidArgumentError(absl::StrCat(where, " names edge ", e.edge(), ", which does not exist"));
      }
      const auto& edge = r.edges(e.edge());
      if (group_of[edge.src()] != g || group_of[edge.dst()] != g) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": edge ", e.edge(), " does not join two of its members"));
      }
      if (e.seconds_size() != edge.cost_size()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": edge ", e.edge(), " has ", e.seconds_size(), " recompute costs; it needs ",
                                                       edge.cost_size()));
      }
    }
  }
  return absl::OkStatus();
}

namespace {
int64_t RecomputedOf(const std::vector<int64_t>& recomputed, int g) {
  return g < static_cast<int>(recomputed.size()) ? recomputed[g] : 0;
}
}  // namespace

double RecomputeSecondsOf(const v1::SolverRequest& r, const std::vector<int>& choice, const std::vector<int64_t>& recomputed) {
  double total = 0;
  for (int g = 0; g < r.recompute_size(); ++g) {
    const int64_t rho = RecomputedOf(recomputed, g);
    if (rho == 0) continue;
    double layer = 0;
    for (const auto& m : r.recompute(g).members()) layer += m.seconds(choice[m.node()]);
    for (const auto& e : r.recompute(g).edges()) {
      const auto& edge = r.edges(e.edge());
      layer += e.seconds(choice[edge.src()] * r.nodes(edge.dst()).cost_size() + choice[edge.dst()]);
    }
    total += static_cast<double>(rho) * layer;
  }
  return total;
}

double RecomputeBytesOf(const v1::SolverRequest& r, const std::vector<int>& choice, const std::vector<int64_t>& recomputed) {
  double total = 0;
  for (int g = 0; g < r.recompute_size(); ++g) {
    const int64_t rho = RecomputedOf(recomputed, g);
    if (rho == 0) continue;
    for (const auto& m : r.recompute(g).members()) {
      total += m.rematerialized(choice[m.node()]) - static_cast<double>(rho) * m.saved(choice[m.node()]);
    }
  }
  return total;
}

namespace {

// One recompute group with its count fixed at `rho`: a plain request whose costs and memory
// include what those layers' recomputation adds (per copy, as the nodes and edges count).
v1::SolverRequest FixRecomputed(const v1::SolverRequest& r, int64_t rho) {
  v1::SolverRequest fixed = r;
  fixed.clear_recompute();
  const double x = static_cast<double>(rho);
  for (const auto& m : r.recompute(0).members()) {
    auto* node = fixed.mutable_nodes(m.node());
    const double per_copy = 1.0 / static_cast<double>(Mult(node->multiplicity()));
    for (int k = 0; k < node->cost_size(); ++k) {
      node->set_cost(k, node->cost(k) + per_copy * x * m.seconds(k));
      node->set_memory(k, node->memory(k) + per_copy * ((rho > 0 ? m.rematerialized(k) : 0.0) - x * m.saved(k)));
    }
  }
  for (const auto& re : r.recompute(0).edges()) {
    auto* edge = fixed.mutable_edges(re.edge());
    const double per_copy = 1.0 / static_cast<double>(Mult(edge->multiplicity()));
    for (int ij = 0; ij < edge->cost_size(); ++ij) edge->set_cost(ij, edge->cost(ij) + per_copy * x * re.seconds(ij));
  }
  return fixed;
}

// Every node at its smallest strategy; a member node also at its most recomputed savings
// (rematerialization left out).
double LeastMemoryBound(const v1::SolverRequest& r) {
  std::vector<const v1::RecomputeMember*> member(r.nodes_size(), nullptr);
  std::vector<int64_t> layers(r.nodes_size(), 0);
  for (const auto& g : r.recompute()) {
    for (const auto& m : g.members()) {
      member[m.node()] = &m;
      layers[m.node()] = g.layers();
    }
  }
  double least = r.memory_fixed();
  for (int v = 0; v < r.nodes_size(); ++v) {
    const auto& node = r.nodes(v);
    const double mult = node.multiplicity() <= 0 ? 1.0 : static_cast<double>(node.multiplicity());
    double best = std::numeric_limits<double>::infinity();
    for (int k = 0; k < node.cost_size(); ++k) {
      double m = mult * node.memory(k);
      if (member[v] != nullptr) m -= static_cast<double>(layers[v]) * std::max(0.0, member[v]->saved(k));
      best = std::min(best, m);
    }
    least += best;
  }
  return least;
}

}  // namespace

double LeastMemory(const v1::SolverRequest& r) {
  if (r.recompute_size() != 1) return LeastMemoryBound(r);
  // One group: for a fixed count the memory is separable, so the least is exact.
  double least = std::numeric_limits<double>::infinity();
  for (int64_t rho = r.recompute(0).min_recomputed(); rho <= r.recompute(0).layers(); ++rho) {
    least = std::min(least, LeastMemoryBound(FixRecomputed(r, rho)));
  }
  return least;
}

double ObjectiveOf(const v1::SolverRequest& r, const std::vector<int>& choice, const std::vector<int64_t>& recomputed) {
  double obj = RecomputeSecondsOf(r, choice, recomputed);
  for (int v = 0; v < r.nodes_size(); ++v) obj += Mult(r.nodes(v).multiplicity()) * r.nodes(v).cost(choice[v]);
  for (const auto& e : r.edges()) {
    const int kd = r.nodes(e.dst()).cost_size();
    obj += Mult(e.multiplicity()) * e.cost(choice[e.src()] * kd + choice[e.dst()]);
  }
  return obj;
}

double MemoryOf(const v1::SolverRequest& r, const std::vector<int>& choice, const std::vector<int64_t>& recomputed) {
  double mem = r.memory_fixed() + RecomputeBytesOf(r, choice, recomputed);
  for (int v = 0; v < r.nodes_size(); ++v) mem += Mult(r.nodes(v).multiplicity()) * r.nodes(v).memory(choice[v]);
  return mem;
}

v1::SolverResponse SolveGreedy(const v1::SolverRequest& r) {
  const auto start = std::chrono::steady_clock::now();
  const int n = r.nodes_size();
  const bool budgeted = r.memory_budget() > 0;
  // Incoming edges per node, for a choice that accounts for producers already chosen.
  std::vector<std::vector<int>> in(n);
  for (int e = 0; e < r.edges_size(); ++e) in[r.edges(e).dst()].push_back(e);
  std::vector<int> choice(n, 0);
  std::vector<int64_t> rho(r.recompute_size());
  for (int g = 0; g < r.recompute_size(); ++g) rho[g] = r.recompute(g).min_recomputed();
  for (int v = 0; v < n; ++v) {
    double best = std::numeric_limits<double>::infinity();
    for (int k = 0; k < r.nodes(v).cost_size(); ++k) {
      double c = Mult(r.nodes(v).multiplicity()) * r.nodes(v).cost(k);
      for (int e : in[v]) {
        const auto& edge = r.edges(e);
        if (edge.src() < v) c += Mult(edge.multiplicity()) * edge.cost(choice[edge.src()] * r.nodes(v).cost_size() + k);
      }
      if (c < best) {
        best = c;
        choice[v] = k;
      }
    }
  }
  // Repair memory: the move that saves memory at the least extra time per byte, repeatedly — a
  // node's strategy switch, or more of a group's layers recomputed.
  double mem = MemoryOf(r, choice, rho);
  while (budgeted && mem > r.memory_budget()) {
    double best_ratio = std::numeric_limits<double>::infinity();
    int best_v = -1, best_k = -1, best_g = -1;
    int64_t best_rho = 0;
    const double obj = ObjectiveOf(r, choice, rho);
    auto consider = [&](int v, int k, int g, int64_t to) {
      const double saved = mem - MemoryOf(r, choice, rho);
      if (saved <= 0) return;
      const double ratio = (ObjectiveOf(r, choice, rho) - obj) / saved;
      if (ratio < best_ratio) {
        best_ratio = ratio;
        best_v = v;
        best_k = k;
        best_g = g;
        best_rho = to;
      }
    };
    for (int v = 0; v < n; ++v) {
      const int cur = choice[v];
      for (int k = 0; k < r.nodes(v).cost_size(); ++k) {
        if (k == cur) continue;
        choice[v] = k;
        consider(v, k, -1, 0);
        choice[v] = cur;
      }
    }
    for (int g = 0; g < r.recompute_size(); ++g) {
      const int64_t cur = rho[g];
      for (int64_t to = cur + 1; to <= r.recompute(g).layers(); ++to) {
        rho[g] = to;
        consider(-1, -1, g, to);
      }
      rho[g] = cur;
    }
    if (best_v < 0 && best_g < 0) break;
    if (best_v >= 0) choice[best_v] = best_k;
    if (best_g >= 0) rho[best_g] = best_rho;
    mem = MemoryOf(r, choice, rho);
  }
  // Improve: single moves (a node's strategy, a group's count) that lower the objective and
  // keep the budget.
  auto fits = [&] { return !budgeted || MemoryOf(r, choice, rho) <= r.memory_budget(); };
  // The best value in [from, to] for one slot (a node's strategy or a group's count), the others
  // fixed; true when it moved.
  auto improve = [&](auto& slot, auto from, auto to) {
    const auto original = slot;
    auto best_value = original;
    double best = ObjectiveOf(r, choice, rho);
    for (auto x = from; x <= to; ++x) {
      slot = x;
      const double o = ObjectiveOf(r, choice, rho);
      if (o < best - 1e-15 && fits()) {
        best = o;
        best_value = x;
      }
    }
    slot = best_value;
    return best_value != original;
  };
  for (int round = 0; round < 4; ++round) {
    bool changed = false;
    for (int v = 0; v < n; ++v) changed |= improve(choice[v], 0, r.nodes(v).cost_size() - 1);
    for (int g = 0; g < r.recompute_size(); ++g) {
      changed |= improve(rho[g], r.recompute(g).min_recomputed(), r.recompute(g).layers());
    }
    if (!changed) break;
  }
  v1::SolverResponse resp;
  for (int c : choice) resp.add_choice(c);
  for (int64_t x : rho) resp.add_recomputed(x);
  resp.set_objective(ObjectiveOf(r, choice, rho));
  resp.set_memory(MemoryOf(r, choice, rho));
  if (budgeted && resp.memory() > r.memory_budget()) {
    resp.set_status(v1::SolverResponse::INFEASIBLE);
    resp.set_message(absl::StrCat("the least memory the greedy search reached is ", static_cast<int64_t>(resp.memory()),
                                  " bytes per device, over the budget of ", static_cast<int64_t>(r.memory_budget())));
  } else {
    resp.set_status(v1::SolverResponse::GREEDY);
  }
  resp.set_solve_seconds(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return resp;
}

namespace {

v1::SolverResponse SolveValid(const v1::SolverRequest& r);

}  // namespace

namespace {

v1::SolverResponse SolveReduced(const v1::SolverRequest& original);
double IntervalBound(const v1::SolverRequest& at_a, const v1::SolverRequest& at_b, double enough);

// One recompute group (the usual case: one family of repeated layers) is solved parametrically:
// for each count ρ a plain ILP, which the reductions shrink as before (the joint ILP's linking
// rows make CBC slow). Exact: a count whose every choice is over the budget is skipped
// (LeastMemory); the unconstrained optimum at ρ bounds every plan at ρ and grows with ρ, so the
// scan stops once it reaches the best found, and a count whose unconstrained optimum fits needs
// no budgeted solve.
v1::SolverResponse SolveOneGroup(const v1::SolverRequest& r) {
  const auto& group = r.recompute(0);
  const bool budgeted = r.memory_budget() > 0;
  static const bool trace = getenv("MAPD_TRACE") != nullptr;
  v1::SolverResponse best;
  best.set_status(v1::SolverResponse::INFEASIBLE);
  bool any = false, all_optimal = true;
  double least = std::numeric_limits<double>::infinity();
  const double keep = 1 - r.relative_gap();
  // Only a choice faster than the cutoff and than the best count so far (by more than the gap).
  auto wanted_below = [&] {
    double cutoff = any ? best.objective() : std::numeric_limits<double>::infinity();
    if (r.objective_cutoff() > 0) cutoff = std::min(cutoff, r.objective_cutoff());
    return cutoff;
  };
  auto take = [&](v1::SolverResponse resp, int64_t rho) {
    all_optimal &= resp.status() == v1::SolverResponse::OPTIMAL;
    if (!any || resp.objective() < best.objective()) {
      best = std::move(resp);
      best.clear_recomputed();
      best.add_recomputed(rho);
      any = true;
    }
  };
  // Counts in ascending order (fewer recomputed layers first: those plans are usually the faster,
  // and give the cutoff for the rest), as intervals: an interval whose bound (IntervalBound) shows
  // nothing wanted is dropped whole, others are halved, and a single count is solved — its
  // unconstrained optimum first (enough when it fits; and since it grows with the count, once it
  // reaches what is wanted no later count can do better). Count 0 (nothing rematerialized) is not
  // affine with the others and stands alone.
  std::vector<std::pair<int64_t, int64_t>> stack;
  const int64_t first = group.min_recomputed(), last = group.layers();
  if (first <= last && std::max<int64_t>(first, 1) <= last) stack.push_back({std::max<int64_t>(first, 1), last});
  if (first == 0) stack.push_back({0, 0});
  std::map<int64_t, v1::SolverRequest> fixed_at;
  auto fixed_for = [&](int64_t rho) -> v1::SolverRequest& {
    auto it = fixed_at.find(rho);
    if (it == fixed_at.end()) it = fixed_at.emplace(rho, FixRecomputed(r, rho)).first;
    return it->second;
  };
  while (!stack.empty()) {
    const auto [a, b] = stack.back();
    stack.pop_back();
    const double wanted = wanted_below() * keep;
    if (a < b) {
      if (budgeted && std::isfinite(wanted) && IntervalBound(fixed_for(a), fixed_for(b), wanted) >= wanted) {
        if (trace) std::fprintf(stderr, "  recompute %lld-%lld: bound over the cutoff\n", static_cast<long long>(a), static_cast<long long>(b));
        continue;
      }
      const int64_t mid = a + (b - a) / 2;
      stack.push_back({mid + 1, b});
      stack.push_back({a, mid});
      continue;
    }
    v1::SolverRequest& fixed = fixed_for(a);
    if (budgeted) {
      const double need = LeastMemory(fixed);
      least = std::min(least, need);
      if (need > r.memory_budget()) continue;
    }
    fixed.set_memory_budget(0);
    v1::SolverResponse resp = SolveReduced(fixed);
    fixed.set_memory_budget(r.memory_budget());
    if (trace) std::fprintf(stderr, "  recompute %lld of %lld: unconstrained %.6g s/step\n", static_cast<long long>(a), static_cast<long long>(last), resp.objective());
    if (resp.objective() >= wanted - 1e-12) {
      if (a > 0) break;  // every later count is slower still
      continue;
    }
    if (budgeted && MemoryOf(fixed, std::vector<int>(resp.choice().begin(), resp.choice().end())) > r.memory_budget()) {
      const double cutoff = wanted_below();
      fixed.set_objective_cutoff(std::isfinite(cutoff) ? cutoff : 0);
      resp = SolveReduced(fixed);
      if (trace) std::fprintf(stderr, "  recompute %lld: under the budget %s in %.3f s, %.6g s/step\n", static_cast<long long>(a), v1::SolverResponse::Status_Name(resp.status()).c_str(), resp.solve_seconds(), resp.objective());
      if (resp.status() == v1::SolverResponse::INFEASIBLE) continue;
    }
    take(std::move(resp), a);
  }
  if (!any) {
    best.set_memory(least);
    best.set_message(absl::StrCat("no choice of strategies and recomputed layers fits the memory budget",
                                  r.objective_cutoff() > 0 ? " faster than the cutoff" : "", "; the least memory is ",
                                  static_cast<int64_t>(least), " bytes per device, over the budget of ",
                                  static_cast<int64_t>(r.memory_budget())));
    return best;
  }
  if (!all_optimal && best.status() == v1::SolverResponse::OPTIMAL) best.set_status(v1::SolverResponse::FEASIBLE);
  return best;
}

}  // namespace

absl::StatusOr<v1::SolverResponse> SolveStrategies(const v1::SolverRequest& original) {
  if (auto st = ValidateSolverRequest(original); !st.ok()) return st;
  if (original.recompute_size() == 1) {
    const auto start = std::chrono::steady_clock::now();
    v1::SolverResponse resp = SolveOneGroup(original);
    if (resp.status() != v1::SolverResponse::INFEASIBLE) {
      const std::vector<int> choice(resp.choice().begin(), resp.choice().end());
      const std::vector<int64_t> rho(resp.recomputed().begin(), resp.recomputed().end());
      resp.set_objective(ObjectiveOf(original, choice, rho));
      resp.set_memory(MemoryOf(original, choice, rho));
    }
    resp.set_solve_seconds(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    return resp;
  }
  return SolveReduced(original);
}

namespace {

// The Lagrangian relaxation of the memory row (C4) of a plain request (no recompute groups):
// for λ ≥ 0,
//     L(λ) = min_s  Σ_v n_v Σ_k (c_vk + λ m_vk) s_vk + Σ_(u,v) n_uv Σ_ij r_uvij e_uvij  − λ (M − F)
// has no memory row, so the reductions solve it exactly and fast (degree-≤2 elimination is exact
// for any objective), and L(λ) ≤ the budgeted optimum for every λ (weak duality). The choice that
// attains L(λ) fits for λ large enough; the memory of the minimiser falls as λ grows, so
// bisection on λ finds fitting choices near the boundary. Returns the best fitting choice found
// (an upper bound) and the best L(λ) (a lower bound).
struct Lagrangian {
  std::vector<int> choice;  // empty: no fitting choice found
  double upper = std::numeric_limits<double>::infinity(), lower = 0;
};

// The minimiser of Σ (c + λ m) over the choices of a plain request (no memory row), with its
// seconds and memory; `proven` when the reductions/CBC solved that relaxation to optimality, so
// that T + λ (M − budget) is a lower bound on the budgeted optimum.
struct RelaxedPoint {
  std::vector<int> choice;
  double seconds = 0, memory = 0;
  bool proven = false;
  double Bound(double lambda, double budget) const { return seconds + lambda * (memory - budget); }
};

RelaxedPoint Relax(const v1::SolverRequest& r, v1::SolverRequest& priced, double lambda) {
  for (int v = 0; v < r.nodes_size(); ++v) {
    auto* node = priced.mutable_nodes(v);
    for (int k = 0; k < node->cost_size(); ++k) node->set_cost(k, r.nodes(v).cost(k) + lambda * r.nodes(v).memory(k));
  }
  priced.set_memory_budget(0);
  v1::SolverResponse resp = SolveReduced(priced);
  RelaxedPoint p;
  p.choice.assign(resp.choice().begin(), resp.choice().end());
  if (p.choice.size() != static_cast<size_t>(r.nodes_size())) return p;
  p.seconds = ObjectiveOf(r, p.choice);
  p.memory = MemoryOf(r, p.choice);
  p.proven = resp.status() == v1::SolverResponse::OPTIMAL;
  return p;
}

Lagrangian SolveLagrangian(const v1::SolverRequest& r) {
  Lagrangian out;
  v1::SolverRequest priced = r;
  auto at = [&](double lambda) {
    RelaxedPoint p = Relax(r, priced, lambda);
    if (p.choice.empty()) return false;
    if (p.proven) out.lower = std::max(out.lower, p.Bound(lambda, r.memory_budget()));
    const bool fits = p.memory <= r.memory_budget();
    if (fits && p.seconds < out.upper) {
      out.upper = p.seconds;
      out.choice = std::move(p.choice);
    }
    return fits;
  };
  if (at(0)) return out;  // the unconstrained optimum fits
  // Past the cutoff nothing here is wanted: stop as soon as the bound shows it.
  const double cutoff =
      r.objective_cutoff() > 0 ? r.objective_cutoff() * (1 - r.relative_gap()) : std::numeric_limits<double>::infinity();
  // Seconds per byte: start where a byte costs what the step's seconds per budget byte do.
  double lo = 0, hi = std::max(1e-30, ObjectiveOf(r, std::vector<int>(r.nodes_size(), 0)) / std::max(1.0, r.memory_budget()));
  int doublings = 0;
  while (out.lower < cutoff && !at(hi) && doublings++ < 60) {
    lo = hi;
    hi *= 4;
  }
  for (int i = 0; i < 24 && out.lower < cutoff && out.upper - out.lower > 1e-9 * out.upper; ++i) {
    const double mid = 0.5 * (lo + hi);
    if (at(mid)) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  // The fitting choice leaves memory unused: single moves (one node's strategy) that are faster
  // and still fit, while any is found.
  if (!out.choice.empty() && out.lower < cutoff) {
    std::vector<int>& choice = out.choice;
    for (int round = 0; round < 8; ++round) {
      bool moved = false;
      for (int v = 0; v < r.nodes_size(); ++v) {
        const int original = choice[v];
        int best_k = original;
        for (int k = 0; k < r.nodes(v).cost_size(); ++k) {
          if (k == original) continue;
          choice[v] = k;
          const double t = ObjectiveOf(r, choice);
          if (t < out.upper - 1e-15 && MemoryOf(r, choice) <= r.memory_budget()) {
            out.upper = t;
            best_k = k;
          }
        }
        choice[v] = best_k;
        moved |= best_k != original;
      }
      if (!moved) break;
    }
  }
  return out;
}

// A lower bound on the budgeted optimum of every count in [a, b] (1 ≤ a ≤ b) of one recompute
// group: for a fixed choice the seconds and memory are affine in the count, so the Lagrangian
// L_ρ(λ) — a minimum of affine functions of ρ — is concave in ρ, and its least over [a, b] is at
// an end: min_ρ OPT_ρ ≥ min(L_a(λ), L_b(λ)) for every λ ≥ 0. The best λ is found by bisection on
// the slope of that concave minimum; it stops once the bound reaches `enough`, or once it cannot:
// with λ_lo (slope s_lo > 0) and λ_hi (slope s_hi ≤ 0) bracketing the maximum, concavity puts g
// under both tangents, g(λ) ≤ min(g(λ_lo) + s_lo (λ − λ_lo), g(λ_hi) + s_hi (λ − λ_hi)), whose
// peak (where they cross) caps every later bound. The caller only compares the bound with
// `enough`, so stopping there changes no decision.
double IntervalBound(const v1::SolverRequest& at_a, const v1::SolverRequest& at_b, double enough) {
  const double budget = at_a.memory_budget();
  v1::SolverRequest pa = at_a, pb = at_b;
  double best = 0;
  // g(λ) = min(L_a, L_b) and the slope of its lower piece (its minimiser's memory over the budget).
  auto g = [&](double lambda, double* slope) {
    const RelaxedPoint a = Relax(at_a, pa, lambda), b = Relax(at_b, pb, lambda);
    if (!a.proven || !b.proven) {
      *slope = 0;
      return -std::numeric_limits<double>::infinity();
    }
    const double la = a.Bound(lambda, budget), lb = b.Bound(lambda, budget);
    *slope = (la <= lb ? a.memory : b.memory) - budget;
    return std::min(la, lb);
  };
  double slope = 0;
  best = std::max(best, g(0, &slope));
  if (slope <= 0 || best >= enough) return best;  // the unconstrained optimum fits (or suffices)
  // g and its slope at each end of the bracket (at 0 as just found).
  double lo = 0, hi = std::max(1e-30, ObjectiveOf(at_a, std::vector<int>(at_a.nodes_size(), 0)) / std::max(1.0, budget));
  double g_lo = best, s_lo = slope, g_hi = 0, s_hi = 0;
  bool bracketed = false;
  for (int i = 0; i < 60; ++i) {  // a λ at which the slope turns negative
    const double at = g(hi, &slope);
    best = std::max(best, at);
    if (best >= enough) return best;
    if (slope <= 0) {
      g_hi = at;
      s_hi = slope;
      bracketed = std::isfinite(at) && std::isfinite(g_lo);
      break;
    }
    lo = hi;
    g_lo = at;
    s_lo = slope;
    hi *= 4;
  }
  for (int i = 0; i < 20 && best < enough; ++i) {
    if (bracketed && s_lo > s_hi) {
      const double cross = (g_hi - g_lo + s_lo * lo - s_hi * hi) / (s_lo - s_hi);
      const double cap = g_lo + s_lo * (std::clamp(cross, lo, hi) - lo);
      if (cap < enough - 1e-9 * std::abs(enough)) break;  // no λ in the bracket reaches it
    }
    const double mid = 0.5 * (lo + hi);
    const double at = g(mid, &slope);
    best = std::max(best, at);
    bracketed = bracketed && std::isfinite(at);  // an unproven relaxation gives no tangent
    if (slope > 0) {
      lo = mid;
      g_lo = at;
      s_lo = slope;
    } else {
      hi = mid;
      g_hi = at;
      s_hi = slope;
    }
  }
  return best;
}

// Several recompute groups (or none): the reductions, then the joint ILP.
v1::SolverResponse SolveReduced(const v1::SolverRequest& original) {
  const auto start = std::chrono::steady_clock::now();
  // Dominated strategies cannot be in an optimum: solve without them, answer in original indices.
  // Every node at its smallest strategy over the budget: infeasible, no search needed.
  if (original.memory_budget() > 0) {
    const double least = LeastMemory(original);
    if (least > original.memory_budget()) {
      v1::SolverResponse resp;
      resp.set_status(v1::SolverResponse::INFEASIBLE);
      resp.set_memory(least);
      resp.set_message(absl::StrCat("even the smallest strategy of every node needs ", static_cast<int64_t>(least),
                                    " bytes per device, over the budget of ", static_cast<int64_t>(original.memory_budget())));
      resp.set_solve_seconds(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      return resp;
    }
  }
  // A plain budgeted request: the Lagrangian bounds first; a choice within the accepted gap of
  // the lower bound needs no CBC.
  Lagrangian relaxed;
  if (original.memory_budget() > 0 && original.recompute_size() == 0) {
    relaxed = SolveLagrangian(original);
    if (original.objective_cutoff() > 0 && relaxed.lower >= original.objective_cutoff() * (1 - original.relative_gap())) {
      // Nothing that fits is faster than the cutoff (by more than the accepted gap; the bound
      // says so): no search.
      v1::SolverResponse resp;
      resp.set_status(v1::SolverResponse::INFEASIBLE);
      resp.set_message(absl::StrFormat("nothing that fits is faster than the cutoff of %.6g s (Lagrangian bound %.6g s)",
                                       original.objective_cutoff(), relaxed.lower));
      resp.set_solve_seconds(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      return resp;
    }
    const double gap = relaxed.choice.empty() ? std::numeric_limits<double>::infinity()
                                              : (relaxed.upper - relaxed.lower) / std::max(1e-30, relaxed.upper);
    if (gap <= 1e-9 || gap <= original.relative_gap()) {
      v1::SolverResponse resp;
      for (int c : relaxed.choice) resp.add_choice(c);
      resp.set_objective(relaxed.upper);
      resp.set_memory(MemoryOf(original, relaxed.choice));
      resp.set_status(gap <= 1e-9 ? v1::SolverResponse::OPTIMAL : v1::SolverResponse::FEASIBLE);
      if (gap > 1e-9) resp.set_message(absl::StrFormat("within %.3g%% of the optimum (Lagrangian bound %.6g s)", 100 * gap, relaxed.lower));
      resp.set_solve_seconds(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      return resp;
    }
  }
  // Low-degree nodes eliminated exactly (followers folded into their neighbours), then
  // dominated strategies removed: the same optimum from a smaller ILP.
  const EliminatedRequest eliminated(original);
  const PrunedRequest pruned = PruneDominated(eliminated.request());
  v1::SolverResponse resp;
  if (pruned.request.nodes_size() == 0) {
    resp.set_status(v1::SolverResponse::OPTIMAL);  // every node eliminated: the argmins are optimal
    for (const auto& g : pruned.request.recompute()) resp.add_recomputed(g.min_recomputed());
  } else if (!relaxed.choice.empty()) {
    // CBC looks only for choices faster than the Lagrangian's (and the cutoff): the reduced
    // problem's objective is the original's less a constant (eliminated degree-0 nodes).
    v1::SolverRequest wanted = pruned.request;
    const std::vector<int> zeros(wanted.nodes_size(), 0);
    const double offset = ObjectiveOf(original, eliminated.Original(pruned.Original(zeros))) - ObjectiveOf(wanted, zeros);
    double cutoff = relaxed.upper;
    if (original.objective_cutoff() > 0) cutoff = std::min(cutoff, original.objective_cutoff());
    wanted.set_objective_cutoff(std::max(1e-30, cutoff - offset));
    wanted.set_relative_gap(original.relative_gap());
    resp = SolveValid(wanted);
    if (resp.status() == v1::SolverResponse::INFEASIBLE && cutoff >= relaxed.upper) {
      // Nothing faster than the Lagrangian's choice fits: it is the optimum (within the gap).
      resp.clear_choice();
      for (int c : relaxed.choice) resp.add_choice(c);
      resp.set_status(v1::SolverResponse::OPTIMAL);
      resp.set_message("");
      resp.set_objective(relaxed.upper);
      resp.set_memory(MemoryOf(original, relaxed.choice));
      resp.set_solve_seconds(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      return resp;
    }
  } else {
    resp = SolveValid(pruned.request);
  }
  if (resp.choice_size() == pruned.request.nodes_size()) {
    const std::vector<int> choice =
        eliminated.Original(pruned.Original(std::vector<int>(resp.choice().begin(), resp.choice().end())));
    resp.clear_choice();
    for (int c : choice) resp.add_choice(c);
    const std::vector<int64_t> rho(resp.recomputed().begin(), resp.recomputed().end());
    resp.set_objective(ObjectiveOf(original, choice, rho));
    resp.set_memory(MemoryOf(original, choice, rho));
  }
  // CBC stopped by its time limit (or finding nothing) may be behind the Lagrangian's choice.
  if (!relaxed.choice.empty() && resp.status() != v1::SolverResponse::OPTIMAL &&
      (resp.status() == v1::SolverResponse::INFEASIBLE || resp.choice_size() == 0 || relaxed.upper < resp.objective())) {
    resp.clear_choice();
    for (int c : relaxed.choice) resp.add_choice(c);
    resp.set_objective(relaxed.upper);
    resp.set_memory(MemoryOf(original, relaxed.choice));
    resp.set_status(v1::SolverResponse::FEASIBLE);
  }
  resp.set_solve_seconds(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return resp;
}

v1::SolverResponse SolveValid(const v1::SolverRequest& r) {
  v1::SolverResponse greedy = SolveGreedy(r);
  // No warm start: CBC 2.10 given a partial MIP start (the s variables only) can stop at it and
  // call it optimal (seen in tests/plan); the greedy answer is compared afterwards instead.
  auto cbc = SolveWithCbc(r, nullptr);
  v1::SolverResponse resp;
  if (cbc.ok() && (cbc->status == CbcOutcome::kOptimal || cbc->status == CbcOutcome::kFeasible)) {
    for (int c : cbc->choice) resp.add_choice(c);
    for (int64_t x : cbc->recomputed) resp.add_recomputed(x);
    resp.set_objective(ObjectiveOf(r, cbc->choice, cbc->recomputed));
    resp.set_memory(MemoryOf(r, cbc->choice, cbc->recomputed));
    resp.set_status(cbc->status == CbcOutcome::kOptimal ? v1::SolverResponse::OPTIMAL : v1::SolverResponse::FEASIBLE);
    // CBC's incumbent under a time limit can be worse than the greedy answer.
    if (greedy.status() == v1::SolverResponse::GREEDY && greedy.objective() < resp.objective() - 1e-12) {
      const bool was_optimal = resp.status() == v1::SolverResponse::OPTIMAL;
      resp = greedy;
      resp.set_status(v1::SolverResponse::FEASIBLE);
      if (was_optimal) resp.set_message("CBC's 'optimal' answer was worse than the greedy one; kept the greedy one");
    }
  } else if (cbc.ok() && cbc->status == CbcOutcome::kInfeasible) {
    resp = greedy;
    resp.set_status(v1::SolverResponse::INFEASIBLE);
    if (resp.message().empty()) resp.set_message("no choice of strategies fits the memory budget");
  } else {
    resp = greedy;
    if (!cbc.ok()) resp.set_message(absl::StrCat("CBC failed (", cbc.status().message(), "); greedy answer"));
  }
  return resp;
}

}  // namespace

}  // namespace mapd

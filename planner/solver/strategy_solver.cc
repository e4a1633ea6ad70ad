#include "planner/solver/strategy_solver.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include "absl/strings/str_cat.h"
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
  return absl::OkStatus();
}

double ObjectiveOf(const v1::SolverRequest& r, const std::vector<int>& choice) {
  double obj = 0;
  for (int v = 0; v < r.nodes_size(); ++v) obj += Mult(r.nodes(v).multiplicity()) * r.nodes(v).cost(choice[v]);
  for (const auto& e : r.edges()) {
    const int kd = r.nodes(e.dst()).cost_size();
    obj += Mult(e.multiplicity()) * e.cost(choice[e.src()] * kd + choice[e.dst()]);
  }
  return obj;
}

double MemoryOf(const v1::SolverRequest& r, const std::vector<int>& choice) {
  double mem = r.memory_fixed();
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
  // Repair memory: the switch that saves memory at the least extra time per byte, repeatedly.
  double mem = MemoryOf(r, choice);
  while (budgeted && mem > r.memory_budget()) {
    double best_ratio = std::numeric_limits<double>::infinity();
    int best_v = -1, best_k = -1;
    const double obj = ObjectiveOf(r, choice);
    for (int v = 0; v < n; ++v) {
      const int cur = choice[v];
      for (int k = 0; k < r.nodes(v).cost_size(); ++k) {
        const double saved = Mult(r.nodes(v).multiplicity()) * (r.nodes(v).memory(cur) - r.nodes(v).memory(k));
        if (saved <= 0) continue;
        choice[v] = k;
        const double ratio = (ObjectiveOf(r, choice) - obj) / saved;
        choice[v] = cur;
        if (ratio < best_ratio) {
          best_ratio = ratio;
          best_v = v;
          best_k = k;
        }
      }
    }
    if (best_v < 0) break;
    choice[best_v] = best_k;
    mem = MemoryOf(r, choice);
  }
  // Improve: single-node moves that lower the objective and keep the budget.
  for (int round = 0; round < 4; ++round) {
    bool changed = false;
    for (int v = 0; v < n; ++v) {
      const int original = choice[v];
      int best_k = original;
      double best = ObjectiveOf(r, choice);
      for (int k = 0; k < r.nodes(v).cost_size(); ++k) {
        choice[v] = k;
        const double o = ObjectiveOf(r, choice);
        if (o < best - 1e-15 && (!budgeted || MemoryOf(r, choice) <= r.memory_budget())) {
          best = o;
          best_k = k;
        }
      }
      choice[v] = best_k;
      changed |= best_k != original;
    }
    if (!changed) break;
  }
  v1::SolverResponse resp;
  for (int c : choice) resp.add_choice(c);
  resp.set_objective(ObjectiveOf(r, choice));
  resp.set_memory(MemoryOf(r, choice));
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

absl::StatusOr<v1::SolverResponse> SolveStrategies(const v1::SolverRequest& original) {
  if (auto st = ValidateSolverRequest(original); !st.ok()) return st;
  const auto start = std::chrono::steady_clock::now();
  // Dominated strategies cannot be in an optimum: solve without them, answer in original indices.
  // Every node at its smallest strategy over the budget: infeasible, no search needed.
  if (original.memory_budget() > 0) {
    double least = original.memory_fixed();
    for (const auto& node : original.nodes()) {
      least += (node.multiplicity() <= 0 ? 1.0 : static_cast<double>(node.multiplicity())) *
               *std::min_element(node.memory().begin(), node.memory().end());
    }
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
  // Low-degree nodes eliminated exactly (followers folded into their neighbours), then
  // dominated strategies removed: the same optimum from a smaller ILP.
  const EliminatedRequest eliminated(original);
  const PrunedRequest pruned = PruneDominated(eliminated.request());
  v1::SolverResponse resp;
  if (pruned.request.nodes_size() == 0) {
    resp.set_status(v1::SolverResponse::OPTIMAL);  // every node eliminated: the argmins are optimal
  } else {
    resp = SolveValid(pruned.request);
  }
  if (resp.choice_size() == pruned.request.nodes_size()) {
    const std::vector<int> choice =
        eliminated.Original(pruned.Original(std::vector<int>(resp.choice().begin(), resp.choice().end())));
    resp.clear_choice();
    for (int c : choice) resp.add_choice(c);
    resp.set_objective(ObjectiveOf(original, choice));
    resp.set_memory(MemoryOf(original, choice));
  }
  resp.set_solve_seconds(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return resp;
}

namespace {

v1::SolverResponse SolveValid(const v1::SolverRequest& r) {
  v1::SolverResponse greedy = SolveGreedy(r);
  // No warm start: CBC 2.10 given a partial MIP start (the s variables only) can stop at it and
  // call it optimal (seen in tests/plan); the greedy answer is compared afterwards instead.
  auto cbc = SolveWithCbc(r, nullptr);
  v1::SolverResponse resp;
  if (cbc.ok() && (cbc->status == CbcOutcome::kOptimal || cbc->status == CbcOutcome::kFeasible)) {
    for (int c : cbc->choice) resp.add_choice(c);
    resp.set_objective(ObjectiveOf(r, cbc->choice));
    resp.set_memory(MemoryOf(r, cbc->choice));
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

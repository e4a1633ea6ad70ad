// The solver's reductions (exact elimination of low-degree nodes, dominated strategies) keep the
// optimum: on random small problems SolveStrategies matches brute-force enumeration, with and
// without a memory budget, on chains, trees and graphs with cycles and parallel edges.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "planner/solver/dominance.h"
#include "planner/solver/elimination.h"
#include "planner/solver/strategy_solver.h"

namespace mapd {
namespace {

v1::SolverRequest RandomRequest(std::mt19937& rng, int nodes, int extra_edges) {
  std::uniform_int_distribution<int> k_dist(1, 4), mult(1, 3);
  std::uniform_real_distribution<double> cost(0.0, 10.0), mem(0.0, 100.0);
  v1::SolverRequest r;
  std::vector<int> k(nodes);
  for (int v = 0; v < nodes; ++v) {
    k[v] = k_dist(rng);
    auto* n = r.add_nodes();
    n->set_multiplicity(mult(rng));
    // Some nodes with choice-independent memory (eliminable under a budget).
    const bool flat = rng() % 3 == 0;
    const double m0 = mem(rng);
    for (int j = 0; j < k[v]; ++j) {
      n->add_cost(std::round(cost(rng)));
      n->add_memory(flat ? m0 : mem(rng));
    }
  }
  auto add = [&](int a, int b) {
    auto* e = r.add_edges();
    e->set_src(a);
    e->set_dst(b);
    e->set_multiplicity(mult(rng));
    for (int x = 0; x < k[a] * k[b]; ++x) e->add_cost(rng() % 2 ? 0.0 : std::round(cost(rng)));
  };
  for (int v = 1; v < nodes; ++v) add(static_cast<int>(rng() % v), v);  // a random tree
  for (int x = 0; x < extra_edges; ++x) {                                // cycles, parallel edges
    int a = static_cast<int>(rng() % nodes), b = static_cast<int>(rng() % nodes);
    if (a != b) add(std::min(a, b), std::max(a, b));
  }
  return r;
}

// The best objective by enumeration (infinity when nothing fits).
double BruteForce(const v1::SolverRequest& r) {
  const int n = r.nodes_size();
  std::vector<int> choice(n, 0);
  double best = std::numeric_limits<double>::infinity();
  while (true) {
    if (r.memory_budget() <= 0 || MemoryOf(r, choice) <= r.memory_budget()) best = std::min(best, ObjectiveOf(r, choice));
    int v = 0;
    while (v < n && ++choice[v] == r.nodes(v).cost_size()) choice[v++] = 0;
    if (v == n) break;
  }
  return best;
}

TEST(Reductions, SolverMatchesBruteForce) {
  std::mt19937 rng(7);
  int eliminated_somewhere = 0, budgeted = 0;
  for (int trial = 0; trial < 60; ++trial) {
    v1::SolverRequest r = RandomRequest(rng, 3 + trial % 5, trial % 4);
    if (trial % 2 == 1) {
      // A budget between the smallest and the largest memory of any choice.
      double lo = r.memory_fixed(), hi = lo;
      for (const auto& n : r.nodes()) {
        lo += n.multiplicity() * *std::min_element(n.memory().begin(), n.memory().end());
        hi += n.multiplicity() * *std::max_element(n.memory().begin(), n.memory().end());
      }
      r.set_memory_budget(lo + (hi - lo) * 0.4);
      ++budgeted;
    }
    SCOPED_TRACE(r.ShortDebugString());
    const double expected = BruteForce(r);
    auto resp = SolveStrategies(r);
    ASSERT_TRUE(resp.ok()) << resp.status();
    if (std::isinf(expected)) {
      EXPECT_EQ(resp->status(), v1::SolverResponse::INFEASIBLE);
      continue;
    }
    ASSERT_EQ(resp->status(), v1::SolverResponse::OPTIMAL) << resp->message();
    const std::vector<int> choice(resp->choice().begin(), resp->choice().end());
    EXPECT_NEAR(ObjectiveOf(r, choice), expected, 1e-9);
    EXPECT_NEAR(resp->objective(), expected, 1e-9);
    if (r.memory_budget() > 0) {
      EXPECT_LE(MemoryOf(r, choice), r.memory_budget());
    }
    eliminated_somewhere += EliminatedRequest(r).eliminated() > 0;
  }
  EXPECT_GT(eliminated_somewhere, 30);  // the reductions were exercised
  EXPECT_EQ(budgeted, 30);
}

// With an accepted gap g the answer is within g of the brute-force optimum (the Lagrangian's
// choice, CBC's within its ratio gap, or — with a cutoff — INFEASIBLE only when nothing is faster
// than the cutoff by more than g), and always fits.
TEST(Reductions, AnAcceptedGapStaysWithinItOfTheOptimum) {
  std::mt19937 rng(11);
  int budgeted = 0, cut = 0;
  for (const double gap : {0.0, 0.02, 0.1}) {
    for (int trial = 0; trial < 40; ++trial) {
      v1::SolverRequest r = RandomRequest(rng, 4 + trial % 5, trial % 4);
      double lo = r.memory_fixed(), hi = lo;
      for (const auto& n : r.nodes()) {
        lo += n.multiplicity() * *std::min_element(n.memory().begin(), n.memory().end());
        hi += n.multiplicity() * *std::max_element(n.memory().begin(), n.memory().end());
      }
      r.set_memory_budget(lo + (hi - lo) * (0.1 + 0.2 * (trial % 4)));
      r.set_relative_gap(gap);
      SCOPED_TRACE(r.ShortDebugString());
      const double expected = BruteForce(r);
      if (std::isinf(expected)) continue;
      ++budgeted;
      if (trial % 3 == 0) {
        // A cutoff just above or below the optimum.
        r.set_objective_cutoff(expected * (trial % 2 == 0 ? 1.05 : 0.97));
        ++cut;
      }
      auto resp = SolveStrategies(r);
      ASSERT_TRUE(resp.ok()) << resp.status();
      if (r.objective_cutoff() > 0 && resp->status() == v1::SolverResponse::INFEASIBLE) {
        EXPECT_GE(expected, r.objective_cutoff() * (1 - gap) - 1e-9) << resp->message();
        continue;
      }
      ASSERT_NE(resp->status(), v1::SolverResponse::INFEASIBLE) << resp->message();
      const std::vector<int> choice(resp->choice().begin(), resp->choice().end());
      EXPECT_LE(MemoryOf(r, choice), r.memory_budget());
      EXPECT_LE(ObjectiveOf(r, choice), expected * (1 + gap) + 1e-9) << resp->message();
      EXPECT_GE(ObjectiveOf(r, choice), expected - 1e-9);
      if (gap == 0) EXPECT_NEAR(ObjectiveOf(r, choice), expected, 1e-9);
    }
  }
  EXPECT_GT(budgeted, 90);
  EXPECT_GT(cut, 25);
}

// Adds a recompute group over nodes [first, first + count) of `r` (and the edges between them)
// with random savings, seconds and rematerialized bytes, and `layers` layers.
void AddRandomGroup(std::mt19937& rng, v1::SolverRequest& r, int first, int count, int64_t layers) {
  // A layer saves at most what its copies of the node keep (a little less than nothing when the
  // checkpoint's boundary outweighs it).
  std::uniform_real_distribution<double> saved_share(-0.1, 0.9), seconds(0.0, 8.0), remat(0.0, 40.0);
  auto* g = r.add_recompute();
  g->set_name("layers.*");
  g->set_layers(layers);
  for (int v = first; v < first + count; ++v) {
    auto* m = g->add_members();
    m->set_node(v);
    for (int k = 0; k < r.nodes(v).cost_size(); ++k) {
      const double kept = r.nodes(v).memory(k) * static_cast<double>(r.nodes(v).multiplicity()) / static_cast<double>(layers);
      m->add_saved(std::round(saved_share(rng) * kept));
      m->add_seconds(std::round(seconds(rng)));
      m->add_rematerialized(std::round(remat(rng)));
    }
  }
  for (int e = 0; e < r.edges_size(); ++e) {
    const auto& edge = r.edges(e);
    if (edge.src() < first || edge.src() >= first + count || edge.dst() < first || edge.dst() >= first + count) continue;
    auto* re = g->add_edges();
    re->set_edge(e);
    for (int x = 0; x < edge.cost_size(); ++x) re->add_seconds(rng() % 2 ? 0.0 : std::round(seconds(rng)));
  }
}

// The best objective by enumeration over strategies and every group's count.
double BruteForceWithRecompute(const v1::SolverRequest& r, std::vector<int64_t>* best_rho = nullptr) {
  const int n = r.nodes_size();
  std::vector<int> choice(n, 0);
  double best = std::numeric_limits<double>::infinity();
  while (true) {
    std::vector<int64_t> rho(r.recompute_size());
    for (int g = 0; g < r.recompute_size(); ++g) rho[g] = r.recompute(g).min_recomputed();
    while (true) {
      if (r.memory_budget() <= 0 || MemoryOf(r, choice, rho) <= r.memory_budget()) {
        const double o = ObjectiveOf(r, choice, rho);
        if (o < best) {
          best = o;
          if (best_rho) *best_rho = rho;
        }
      }
      int g = 0;
      while (g < r.recompute_size() && ++rho[g] > r.recompute(g).layers()) {
        rho[g] = r.recompute(g).min_recomputed();
        ++g;
      }
      if (g == r.recompute_size()) break;
    }
    int v = 0;
    while (v < n && ++choice[v] == r.nodes(v).cost_size()) choice[v++] = 0;
    if (v == n) break;
  }
  return best;
}

TEST(Reductions, RecomputeGroupsMatchBruteForce) {
  std::mt19937 rng(11);
  int recomputing = 0, infeasible = 0, joint = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const int nodes = 4 + trial % 4;
    v1::SolverRequest r = RandomRequest(rng, nodes, trial % 3);
    const int64_t layers = 1 + trial % 5;
    // One group (solved count by count) or two (the joint ILP).
    const bool two = nodes >= 6 && trial % 2 == 0;
    AddRandomGroup(rng, r, 1, two ? 2 : nodes - 2, layers);
    if (two) AddRandomGroup(rng, r, 3, nodes - 4, 1 + trial % 3);
    if (trial % 7 == 3) r.mutable_recompute(0)->set_min_recomputed(layers);  // full checkpointing
    // Budgets from loose to tight, so that some optima recompute and some nothing fits.
    double lo = LeastMemory(r), hi = r.memory_fixed();
    for (const auto& node : r.nodes()) hi += node.multiplicity() * *std::max_element(node.memory().begin(), node.memory().end());
    r.set_memory_budget(std::max(1.0, lo + (hi - lo) * (0.05 + 0.15 * (trial % 5))));
    if (trial % 6 == 5) {  // no budget: only a required count makes recomputation happen
      r.set_memory_budget(0);
      r.mutable_recompute(0)->set_min_recomputed(1);
    }
    SCOPED_TRACE(r.ShortDebugString());
    std::vector<int64_t> rho;
    const double expected = BruteForceWithRecompute(r, &rho);
    auto resp = SolveStrategies(r);
    ASSERT_TRUE(resp.ok()) << resp.status();
    if (std::isinf(expected)) {
      EXPECT_EQ(resp->status(), v1::SolverResponse::INFEASIBLE);
      ++infeasible;
      continue;
    }
    ASSERT_EQ(resp->status(), v1::SolverResponse::OPTIMAL) << resp->message();
    ASSERT_EQ(resp->recomputed_size(), r.recompute_size());
    const std::vector<int> choice(resp->choice().begin(), resp->choice().end());
    const std::vector<int64_t> got(resp->recomputed().begin(), resp->recomputed().end());
    EXPECT_NEAR(ObjectiveOf(r, choice, got), expected, 1e-6);
    EXPECT_NEAR(resp->objective(), expected, 1e-6);
    if (r.memory_budget() > 0) {
      EXPECT_LE(MemoryOf(r, choice, got), r.memory_budget() + 1e-6);
    }
    EXPECT_GE(got[0], r.recompute(0).min_recomputed());
    recomputing += got[0] > r.recompute(0).min_recomputed();
    joint += two;
    // The greedy answer is a valid choice whenever it claims to fit.
    const v1::SolverResponse greedy = SolveGreedy(r);
    if (greedy.status() == v1::SolverResponse::GREEDY && r.memory_budget() > 0) {
      const std::vector<int> gc(greedy.choice().begin(), greedy.choice().end());
      const std::vector<int64_t> gr(greedy.recomputed().begin(), greedy.recomputed().end());
      EXPECT_LE(MemoryOf(r, gc, gr), r.memory_budget() + 1e-6);
      EXPECT_GE(greedy.objective(), expected - 1e-6);
    }
  }
  EXPECT_GT(recomputing, 5);  // the budgets made recomputation pay somewhere
  EXPECT_GT(joint, 5);        // and the joint ILP answered some
  EXPECT_GT(infeasible, 0);
}

TEST(Reductions, ChainCollapsesCompletely) {
  // u — v — w — x: every node has degree ≤ 2, so elimination removes all of them.
  std::mt19937 rng(3);
  v1::SolverRequest r;
  for (int v = 0; v < 4; ++v) {
    auto* n = r.add_nodes();
    for (int j = 0; j < 3; ++j) {
      n->add_cost(static_cast<double>(rng() % 10));
      n->add_memory(1);
    }
  }
  for (int v = 0; v + 1 < 4; ++v) {
    auto* e = r.add_edges();
    e->set_src(v);
    e->set_dst(v + 1);
    for (int x = 0; x < 9; ++x) e->add_cost(static_cast<double>(rng() % 10));
  }
  const EliminatedRequest elim(r);
  EXPECT_EQ(elim.eliminated(), 4);
  EXPECT_EQ(elim.request().nodes_size(), 0);
  auto resp = SolveStrategies(r);
  ASSERT_TRUE(resp.ok());
  EXPECT_NEAR(resp->objective(), BruteForce(r), 1e-9);
}

TEST(Reductions, DominatedStrategiesGo) {
  v1::SolverRequest r;
  auto* a = r.add_nodes();
  for (double c : {1.0, 2.0, 1.0}) {  // strategy 1 is worse than 0 everywhere; 2 duplicates 0
    a->add_cost(c);
    a->add_memory(5);
  }
  auto* b = r.add_nodes();
  b->add_cost(0);
  b->add_memory(0);
  b->add_cost(0);
  b->add_memory(0);
  auto* e = r.add_edges();
  e->set_src(0);
  e->set_dst(1);
  for (double c : {0.0, 3.0, 1.0, 4.0, 0.0, 3.0}) e->add_cost(c);
  const PrunedRequest p = PruneDominated(r);
  EXPECT_EQ(p.kept[0], (std::vector<int>{0}));
  EXPECT_EQ(p.kept[1], (std::vector<int>{0}));
}

}  // namespace
}  // namespace mapd

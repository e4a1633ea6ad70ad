// The strategy ILP: known optima, the memory constraint, infeasibility, dump and replay, and
// greedy never beating CBC.
#include "common/file_io.h"
#include "planner/solver/strategy_solver.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>


namespace mapd {
namespace {

using ::testing::HasSubstr;

v1::SolverNode* AddNode(v1::SolverRequest& r, const std::string& name, std::vector<double> cost,
                        std::vector<double> memory, int64_t multiplicity = 1) {
  auto* n = r.add_nodes();
  n->set_name(name);
  for (double c : cost) n->add_cost(c);
  for (double m : memory) n->add_memory(m);
  n->set_multiplicity(multiplicity);
  return n;
}

void AddEdge(v1::SolverRequest& r, int src, int dst, std::vector<double> cost) {
  auto* e = r.add_edges();
  e->set_src(src);
  e->set_dst(dst);
  for (double c : cost) e->add_cost(c);
}

// Two nodes, two strategies each: individually cheapest (0, 0) pays a big resharding cost;
// (1, 1) is the optimum.
v1::SolverRequest Chain() {
  v1::SolverRequest r;
  AddNode(r, "a", {1.0, 2.0}, {10, 5});
  AddNode(r, "b", {1.0, 1.5}, {10, 5});
  AddEdge(r, 0, 1, {5.0, 5.0, 5.0, 0.0});
  return r;
}

TEST(Solver, FindsTheJointOptimum) {
  auto resp = SolveStrategies(Chain());
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_EQ(resp->status(), v1::SolverResponse::OPTIMAL);
  EXPECT_THAT(std::vector<int>(resp->choice().begin(), resp->choice().end()), ::testing::ElementsAre(1, 1));
  EXPECT_DOUBLE_EQ(resp->objective(), 3.5);
  EXPECT_DOUBLE_EQ(resp->memory(), 10);
}

TEST(Solver, MemoryBudgetChangesTheAnswer) {
  v1::SolverRequest r;
  AddNode(r, "fast_big", {1.0, 3.0}, {100, 10}, /*multiplicity=*/4);
  AddNode(r, "other", {1.0, 1.2}, {50, 20});
  r.set_memory_fixed(30);
  r.set_memory_budget(30 + 4 * 100 + 50);  // everything fast fits
  auto all_fast = SolveStrategies(r);
  ASSERT_TRUE(all_fast.ok());
  EXPECT_THAT(std::vector<int>(all_fast->choice().begin(), all_fast->choice().end()), ::testing::ElementsAre(0, 0));
  r.set_memory_budget(30 + 4 * 100 + 20);  // only the cheap switch of "other" is needed
  auto tight = SolveStrategies(r);
  EXPECT_THAT(std::vector<int>(tight->choice().begin(), tight->choice().end()), ::testing::ElementsAre(0, 1));
  EXPECT_DOUBLE_EQ(tight->objective(), 4 * 1.0 + 1.2);
  r.set_memory_budget(30 + 4 * 10 + 20 - 1);  // nothing fits
  auto none = SolveStrategies(r);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->status(), v1::SolverResponse::INFEASIBLE);
}

TEST(Solver, DumpedRequestReplaysToTheSameObjective) {
  v1::SolverRequest r = Chain();
  r.set_time_limit_seconds(10);
  const std::string path = ::testing::TempDir() + "/request.pb";
  ASSERT_TRUE(WriteStringToFileAtomic(path, r.SerializeAsString()).ok());
  auto bytes = ReadFileToString(path);
  ASSERT_TRUE(bytes.ok());
  v1::SolverRequest replayed;
  ASSERT_TRUE(replayed.ParseFromString(*bytes));
  auto a = SolveStrategies(r), b = SolveStrategies(replayed);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_DOUBLE_EQ(a->objective(), b->objective());
  EXPECT_EQ(std::vector<int>(a->choice().begin(), a->choice().end()),
            std::vector<int>(b->choice().begin(), b->choice().end()));
}

TEST(Solver, GreedyIsNeverBetterThanCbc) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0, 1);
  for (int trial = 0; trial < 20; ++trial) {
    v1::SolverRequest r;
    const int nodes = 8;
    for (int v = 0; v < nodes; ++v) {
      std::vector<double> c, m;
      for (int k = 0; k < 3; ++k) {
        c.push_back(u(rng));
        m.push_back(10 * u(rng));
      }
      AddNode(r, "n", c, m);
    }
    for (int v = 1; v < nodes; ++v) {
      std::vector<double> c;
      for (int x = 0; x < 9; ++x) c.push_back(u(rng));
      AddEdge(r, v - 1, v, c);
    }
    r.set_memory_budget(40);
    auto best = SolveStrategies(r);
    ASSERT_TRUE(best.ok());
    const auto greedy = SolveGreedy(r);
    if (best->status() == v1::SolverResponse::INFEASIBLE) {
      EXPECT_EQ(greedy.status(), v1::SolverResponse::INFEASIBLE);
      continue;
    }
    EXPECT_EQ(best->status(), v1::SolverResponse::OPTIMAL);
    EXPECT_LE(best->memory(), 40 + 1e-9);
    if (greedy.status() == v1::SolverResponse::GREEDY) EXPECT_LE(best->objective(), greedy.objective() + 1e-9);
  }
}

TEST(Solver, MalformedRequests) {
  v1::SolverRequest r = Chain();
  r.mutable_edges(0)->add_cost(1);
  EXPECT_THAT(std::string(SolveStrategies(r).status().message()), HasSubstr("has 5 costs; its nodes need 4"));
  v1::SolverRequest r2 = Chain();
  r2.mutable_nodes(0)->add_memory(1);
  EXPECT_THAT(std::string(SolveStrategies(r2).status().message()), HasSubstr("2 costs but 3 memory entries"));
  v1::SolverRequest r3 = Chain();
  r3.mutable_edges(0)->set_dst(7);
  EXPECT_THAT(std::string(SolveStrategies(r3).status().message()), HasSubstr("not an edge between two different nodes"));
}

}  // namespace
}  // namespace mapd

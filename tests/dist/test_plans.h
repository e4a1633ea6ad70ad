// Plans for the equivalence tests, from a torch-free translation unit (the planner's
// `Optimizer` enum and the runtime's `Optimizer` class cannot meet in one).
#ifndef MAPD_TESTS_DIST_TEST_PLANS_H_
#define MAPD_TESTS_DIST_TEST_PLANS_H_

#include <string>
#include <vector>

#include "planner/ir/graph.h"
#include "planner/sharding/strategies.h"
#include "tests/common/zoo_training_graph.h"

namespace mapd {

// linear(16→64) → relu → dropout(p=0.25) → linear(64→8) → cross_entropy, batch 8.
Graph DropoutMlpGraph();

// `family` is a baseline's name ("data parallel", "Megatron TP=4", ...) or "MAP" for the
// planner's own plan on `mesh` (ZeRO off). Fails the test when there is none.
std::vector<Strategy> PlanStrategies(const Graph& graph, const std::vector<int64_t>& mesh, const std::string& family);

}  // namespace mapd

#endif  // MAPD_TESTS_DIST_TEST_PLANS_H_

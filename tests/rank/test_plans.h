// Plans for the equivalence tests, from a torch-free translation unit (the planner's
// `Optimizer` enum and the runtime's `Optimizer` class cannot meet in one).
#ifndef MAPD_TESTS_DIST_TEST_PLANS_H_
#define MAPD_TESTS_DIST_TEST_PLANS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/ir/graph.h"
#include "proto/mapd/v1/rank_program.pb.h"
#include "planner/sharding/strategies.h"
#include "tests/common/zoo_training_graph.h"

namespace mapd {

// linear(16→64) → relu → dropout(p=0.25) → linear(64→8) → cross_entropy, batch 8.
Graph DropoutMlpGraph();

// `family` is a baseline's name ("data parallel", "Megatron TP=4", ...) or "MAP" for the
// planner's own plan on `mesh` (ZeRO off). Fails the test when there is none.
std::vector<Strategy> PlanStrategies(const Graph& graph, const std::vector<int64_t>& mesh, const std::string& family);

// A pipeline plan of `graph` on `devices` (1 GiB each) with `stages` stages and `micro_batches`,
// recomputing `recompute` (off | all | the plan's: auto): MAP's own (`tensor_parallel` 0; ZeRO
// `zero_stage`, -1 any) or the Megatron TP × PP × DP baseline of that TP degree (`virtual_stages`
// ≥ 2: interleaved, V chunks a device); lowered for every rank (PipelineToRun).
struct PipelinePrograms {
  std::vector<v1::RankProgram> programs;  // global rank order
  std::string summary;                    // the plan in one line
};
absl::StatusOr<PipelinePrograms> PipelinePlanToRun(const Graph& graph, int64_t devices, int stages, int64_t micro_batches,
                                               int64_t tensor_parallel = 0, int zero_stage = 0,
                                               const std::string& recompute = "off", int64_t virtual_stages = 1);

}  // namespace mapd

#endif  // MAPD_TESTS_DIST_TEST_PLANS_H_

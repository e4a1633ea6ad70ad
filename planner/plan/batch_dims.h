// Where the batch is in a graph: the batch dimension followed from the inputs through every
// node's sharding rule. What micro-batching divides, what data parallelism splits and what the
// baselines' families fix (baselines.h); no cost model and no solver, so the ranks' graph
// transforms (micro_batch.h) use it too.
#ifndef MAPD_PLANNER_PLAN_BATCH_DIMS_H_
#define MAPD_PLANNER_PLAN_BATCH_DIMS_H_

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "planner/plan/prepared_graph.h"

namespace mapd {

// Per node, the label of the batch dimension in its sharding rule (0 when the node does not
// carry the batch, as a table of positions does). The batch is dimension 0 of every graph input
// whose first dimension equals the first input's; it follows labels from inputs to outputs.
struct BatchInfo {
  int64_t batch = 0;              // the global batch (0 when the graph has no batched input)
  std::vector<char> label;        // per node
  // Per value carrying the batch (graph inputs and node outputs): its batch dimension.
  std::unordered_map<std::string, int> value_dim;
};
absl::StatusOr<BatchInfo> FindBatch(const Graph& graph, const std::vector<std::unique_ptr<PreparedNode>>& prepared);

}  // namespace mapd

#endif  // MAPD_PLANNER_PLAN_BATCH_DIMS_H_

// Plans in the words people use: "column-parallel over axis 1, batch split over axis 0".
#ifndef MAPD_PLANNER_PLAN_DESCRIBE_H_
#define MAPD_PLANNER_PLAN_DESCRIBE_H_

#include <string>

#include "planner/ir/graph.h"
#include "planner/sharding/strategies.h"

namespace mapd {

// The node's name with layer indices replaced: "layers.12.attention/linear_2" →
// "layers.#.attention/linear_2" (repeated layers share it).
std::string LayerFreeName(const std::string& node_name);

// What `strategy` does on each mesh axis, for node `node` of `graph`: matrices split as
// column/row/vocabulary parallel (or output/input channels for convolutions), otherwise the
// activation dimension split (batch, sequence, heads, features, channels, ...); "replicated"
// when nothing is split.
std::string DescribeStrategy(const Graph& graph, int node, const Strategy& strategy);

// Whether the node is one a per-layer summary shows (it holds a matrix, or is attention).
bool IsSummaryNode(const Graph& graph, int node);

}  // namespace mapd

#endif  // MAPD_PLANNER_PLAN_DESCRIBE_H_

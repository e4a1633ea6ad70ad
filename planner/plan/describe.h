// Plans in the words people use: "column-parallel over axis 1, batch split over axis 0".
#ifndef MAPD_PLANNER_PLAN_DESCRIBE_H_
#define MAPD_PLANNER_PLAN_DESCRIBE_H_

#include <string>
#include <vector>

#include "model/ir/graph.h"
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

// One row per summary node kind and strategy, in graph order, repeated layers counted once:
// "layers.#.attention.wq/linear", "column-parallel over axis 1", 80 times.
struct LayerSummary {
  int node = 0;             // the first node of the row
  std::string layer;        // its layer-free name
  std::string words;        // DescribeStrategy
  int count = 0;            // nodes the row stands for
};
std::vector<LayerSummary> SummarizeLayers(const Graph& graph, const std::vector<Strategy>& strategies);

// Sequence parallelism (Korthikanti et al.): how many norms (layer_norm, rms_norm) the plan splits
// on a row dimension other than the first (the sequence of [batch, sequence, hidden]) — 0 when
// the plan does not use it.
int SequenceParallelNorms(const Graph& graph, const std::vector<Strategy>& strategies);

}  // namespace mapd

#endif  // MAPD_PLANNER_PLAN_DESCRIBE_H_

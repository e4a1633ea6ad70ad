// Micro-batches (DESIGN §6a): a step of global batch B runs as m passes of B/m samples each,
// gradients accumulated, reduced and applied once. The planner costs, and the runtime executes,
// the graph of one micro-batch — the same nodes and values with the batch dimension divided by
// m (view targets made to match) — so every strategy, cost and rank program of a micro-batched
// plan is the one of that graph.
//
// Not every graph can be micro-batched: the result must equal one step on the whole batch,
// which holds when every node treats samples independently or reduces them linearly (sum,
// mean) — a batch norm normalises over the batch, and m small batches' statistics are not the
// whole batch's.
#ifndef MAPD_PLANNER_PLAN_MICRO_BATCH_H_
#define MAPD_PLANNER_PLAN_MICRO_BATCH_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/ir/graph.h"

namespace mapd {

// Whether, and how, a training graph splits into micro-batches.
struct MicroBatching {
  int64_t batch = 0;     // the global batch (0: the graph has no batched input)
  // Empty when micro-batches are possible; otherwise why not, naming the node.
  std::string refusal;
  // The loss of the whole batch is the micro-batches' losses times this, summed: 1/m for a
  // loss averaged over the batch (mean), 1 for a summed one — per micro-batch count m, this is
  // 1/m when `averaged`.
  bool averaged = true;

  bool possible() const { return refusal.empty() && batch > 0; }
  // The micro-batch counts that divide the batch, ascending (just {1} when not possible).
  std::vector<int64_t> Counts() const;
};

// Finds the batch (dimension 0 of the graph's batched inputs, followed through the sharding
// rules' labels as baselines.h does) and whether micro-batching keeps the step exact.
absl::StatusOr<MicroBatching> AnalyzeMicroBatching(const Graph& graph);

// The graph of one of `micro_batches` micro-batches: every value carrying the batch has it
// divided by `micro_batches`, view/reshape/expand targets set to match, verified again through
// the registry. `micro_batches` 1 returns the graph itself. INVALID_ARGUMENT for a count that
// does not divide the batch; FAILED_PRECONDITION (with the reason) for a graph that cannot be
// micro-batched, or one where the divided shapes do not verify (naming the node).
absl::StatusOr<Graph> MicroBatchGraph(const Graph& graph, int64_t micro_batches);

struct BatchInfo;
// MicroBatchGraph for several counts of one graph, the graph analysed once (the graph must
// outlive it).
class MicroBatcher {
 public:
  static absl::StatusOr<MicroBatcher> Create(const Graph& graph);
  const MicroBatching& info() const { return info_; }
  // As MicroBatchGraph(graph, micro_batches).
  absl::StatusOr<Graph> Make(int64_t micro_batches) const;

 private:
  MicroBatcher() = default;
  const Graph* graph_ = nullptr;
  MicroBatching info_;
  std::shared_ptr<const BatchInfo> batch_;
};

}  // namespace mapd

#endif  // MAPD_PLANNER_PLAN_MICRO_BATCH_H_

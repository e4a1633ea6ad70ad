// The plans people write by hand, as families of strategies on the same cost graph as MAP's
// search, so that MAP's plan and the baselines are costed by one model (DESIGN §6):
//
//   data parallel     1-D mesh; every node splits the batch (parameters replicated, gradients
//                     all-reduced)
//   ZeRO-3 / FSDP     the same choices with parameters, gradients and optimizer states sharded
//                     (the cost graph built with zero_stage 3)
//   Megatron TP × DP  mesh dp×tp, as Megatron-LM is run: the distributed optimizer (ZeRO-1 over
//                     dp) and sequence parallelism. On the dp axis the batch is split; on the tp
//                     axis every node with a trainable matrix shards it (column, row or vocabulary
//                     parallel), every other node (norms, dropouts, residual adds) computes
//                     replicated or split on a dimension other than the batch (the sequence:
//                     sequence parallelism), and no node splits the batch
//
// A family fixes what the hand-written plan fixes and leaves the rest (which matrix is column
// and which row parallel, where activations are resharded) to the ILP, so each baseline is the
// best plan of its kind under the cost model.
#ifndef MAPD_PLANNER_PLAN_BASELINES_H_
#define MAPD_PLANNER_PLAN_BASELINES_H_

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "planner/plan/batch_dims.h"
#include "planner/plan/cost_graph.h"
#include "planner/plan/cost_graph_cache.h"
#include "planner/plan/planner.h"
#include "planner/plan/prepared_graph.h"

namespace mapd {

enum class AxisRole {
  kData,    // split the batch (or nothing, for nodes that do not carry it)
  kTensor,  // Megatron: shard the matrices, never the batch
};

// Which of a node's `strategies` belong to the family whose mesh axes have `roles` (`batch`: the
// node's batch label, BatchInfo::label). A node with no such strategy keeps its replicated one
// (a batch norm, whose batch is unsplittable).
std::vector<bool> FamilyMask(const PreparedNode& node, char batch, const SharedList<Strategy>& strategies,
                             const std::vector<AxisRole>& roles);

// A baseline family on a mesh: which axis splits the batch and which shards the matrices, the
// ZeRO stage it runs with, and over how many devices the batch is split.
struct BaselineSpec {
  std::string name;
  std::vector<int64_t> mesh;
  std::vector<AxisRole> roles;
  int zero_stage = 0;
  int64_t data_degree = 1;  // devices the batch is split over
};

// The families on `devices`: data parallel, ZeRO-3 (FSDP), and Megatron TP x DP for every
// tensor degree that divides the devices.
std::vector<BaselineSpec> BaselineSpecs(int64_t devices);

// One baseline at one micro-batch count: its family's fastest plan under the options' budget, or
// with every repeated layer recomputed when that alone fits; `fits` false when neither does
// (then the family's fastest plan, unconstrained, is what is reported).
absl::StatusOr<PlanCandidate> SolveBaselineAt(const PlannerOptions& options, CostGraphCache& cache, const BaselineSpec& spec,
                                              int64_t m);

// A baseline as its users tune it: the fewest micro-batches (the largest micro-batch) at which
// the family fits without recomputation, else the fewest at which it fits with every repeated
// layer recomputed; reported at its fewest micro-batches (not fitting) when neither exists. Both
// are found by probing the counts (a micro-batch's activations only shrink as there are more of
// them, so fitting holds from some count on): the fewest, then the most (nothing fits there:
// nothing fits), then about 2·log2(counts) solves, not one per count.
absl::StatusOr<PlanCandidate> SolveBaseline(const PlannerOptions& options, CostGraphCache& cache, const BaselineSpec& spec,
                                            const std::vector<int64_t>& counts);

// The pinned configuration `name` at `micro_batches` does not fit `budget`: RESOURCE_EXHAUSTED
// naming where (`where`: "stage 0" of a pipeline, or empty), its memory per device by term
// (`memory`, with `in_flight` micro-batches of activations kept), and the largest term with what
// to pin instead.
absl::Status PinnedConfigurationDoesNotFit(const std::string& name, int64_t micro_batches, const std::string& where,
                                           const ChoiceCost& memory, int64_t in_flight, int64_t budget);

}  // namespace mapd

#endif  // MAPD_PLANNER_PLAN_BASELINES_H_

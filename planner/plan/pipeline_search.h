// The search over pipeline stages (DESIGN §6b): the layers cut into p contiguous stages, each
// stage on its own N/p devices with its own intra-op plan, m micro-batches streamed through them
// with a 1F1B schedule.
//
// For p stages on submesh M (N/p devices) and m micro-batches, stage i holding layers
// [l_i, l_{i+1}):
//
//   u_i  = (C_i − g_i) / m + s_i        one micro-batch's forward and backward on stage i, where
//                                       C_i is the intra-op optimum of the stage graph on M with
//                                       m micro-batches under the budget B (the planner's own
//                                       search: strategies, ZeRO, recomputation), g_i the part of
//                                       it paid once a step (the gradients' reduction), and s_i
//                                       the point-to-point send of the stage's outputs to stage
//                                       i+1 and of their gradients back (α + bytes·β on the link
//                                       between the stages' devices)
//   mem_i = states_i + min(p − i, m) · activations_i  ≤ B     (1F1B keeps p − i micro-batches
//                                       in flight on stage i; the stage's ILP is built so)
//   T    = Σ_i u_i + (m − 1) · max_i u_i + max_i g_i        (fill and drain, then the slowest
//                                       stage's steady state; gradient reductions after the drain)
//
// The cut points minimise T (Alpa's inter-operator pass): for each threshold t among the stage
// times found, a dynamic programme over (stages placed, layers placed)
//
//   F(i, l) = min_{k ∈ K}  F(i − 1, l − k) + u(i, l − k, l)   over stages with u ≤ t that fit
//
// gives the least Σ u with max u ≤ t, and T = min_t F(p, L) + (m − 1)·t + max g. Stage lengths
// k are within one layer of L/p (K), and every middle stage is costed at the depth of stage 1
// (the most micro-batches any middle stage keeps: a plan that fits there fits every later
// one), so the memoised stage solves per (p, M, m) are at most 3·|K|: the first stage (the
// prologue, p in flight), a middle stage, the last (the epilogue, one in flight). Stage graphs
// of alike layers (LayerSequence::layer_kind) share their solve: a stage of k identical layers is
// solved once for every position with that depth.
//
// (p, M, m) triples are searched from the lowest lower bound up and pruned at the best plan so
// far: with U1 the least unconstrained per-micro-batch time of one middle layer on M,
// T ≥ L·U1·(m + p − 1)/p (Σ u ≥ L·U1, max u ≥ L·U1/p). Micro-batch counts below p are not
// searched (more than half of every stage would idle).
//
// Interleaved 1F1B (V chunks a device, Megatron-LM's schedule) is costed for the Megatron pipelines
// the pins ask for (T = Σ_d u_d / V + (m − 1/V)·max_d u_d + max_d g_d, docs/planner.md); MAP's own
// cuts are 1F1B. Not modelled: different device counts per stage, the
// resharding of a sent activation when the next stage wants another placement (it is sent as
// produced), and the embedding gradient's sum overlapping the drain.
#ifndef MAPD_PLANNER_PLAN_PIPELINE_SEARCH_H_
#define MAPD_PLANNER_PLAN_PIPELINE_SEARCH_H_

#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "planner/plan/planner.h"

namespace mapd {

// Searches pipeline plans for `graph` (options.pipeline_stages 0: every stage count 2 ≤ p ≤ L
// dividing the devices; N: only N) over the micro-batch counts `counts`, beside the planner's
// search without stages, in three steps:
//   Start         the (p, M, m) lower bounds (the coarse stage solver)
//   ExploreBelow  MAP's pipelines, pruned below the plan without stages (the coarse solver)
//   Finish        the Megatron TP × PP × DP pipelines, pruned below the plans without stages'
//                 baselines (the exact solver), then each stage count's best cut solved again
//                 exactly; fills `result`'s pipelines, pipeline_baselines and `pipeline` when the
//                 best fitting pipeline beats `result.plan` (or, pinned, whenever one fits).
// With two cores (PlannerOptions::threads), the bounds and the exploration run on a second
// thread while the caller finishes its own search and its baselines, and the Megatron pipelines
// are solved while the exploration goes on: each step reads only what the sequential order
// gives it, so the result is the same on one core or two. A graph without a layer sequence is an
// error when stages are pinned and a note on auto.
class PipelineSearchTask {
 public:
  static absl::StatusOr<std::unique_ptr<PipelineSearchTask>> Start(const Graph& graph, const PlannerOptions& options,
                                                                 const std::vector<int64_t>& counts);
  // The step seconds of the plan without stages (infinity when none fits, or stages are pinned):
  // the exploration prunes below it. Once; Finish needs it.
  void ExploreBelow(double seconds);
  // `result` holds the plan without stages and its baselines.
  absl::Status Finish(PlanResult& result);
  // A task not finished is cancelled; its thread is joined.
  ~PipelineSearchTask();

 private:
  PipelineSearchTask() = default;
  struct State;
  std::unique_ptr<State> state_;  // null: not searched (skipped_note_ says why)
  std::string skipped_note_;
  std::thread thread_;            // the bounds and the exploration, when two cores are used
  std::promise<double> cutoff_;   // ExploreBelow's seconds (NaN: cancelled)
  std::future<double> cutoff_future_;
  std::promise<void> bounded_;    // the bounds are made
  std::future<void> bounded_future_;
  bool cutoff_set_ = false;
};

}  // namespace mapd

#endif  // MAPD_PLANNER_PLAN_PIPELINE_SEARCH_H_

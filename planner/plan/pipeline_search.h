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
// Not modelled (docs/planner.md): interleaved stages, different device counts per stage, the
// resharding of a sent activation when the next stage wants another placement (it is sent as
// produced), and the embedding gradient's sum overlapping the drain.
#ifndef MAPD_PLANNER_PLAN_PIPELINE_SEARCH_H_
#define MAPD_PLANNER_PLAN_PIPELINE_SEARCH_H_

#include <vector>

#include "absl/status/status.h"
#include "planner/plan/planner.h"

namespace mapd {

// Searches pipeline plans for `graph` (options.pipeline_stages 0: every stage count 2 ≤ p ≤ L
// dividing the devices; N: only N) over the micro-batch counts `counts`, and fills `result`'s
// pipelines, pipeline_baselines (Megatron TP × PP × DP), and `pipeline` when the best fitting
// pipeline beats `result.plan` (or, pinned, whenever one fits). A graph without a layer sequence
// is an error when stages are pinned and a note on auto.
absl::Status SearchPipelines(const Graph& graph, const PlannerOptions& options, const std::vector<int64_t>& counts,
                             PlanResult& result);

}  // namespace mapd

#endif  // MAPD_PLANNER_PLAN_PIPELINE_SEARCH_H_

// What one rank's program is predicted to cost, to set beside what the rank measures
// (`mapctl run --ranks N`): memory and compute from profiling the program as a graph of its
// local tensors (LocalGraph + the symbolic profiler: liveness, transients, saved tensors,
// gradients, optimizer state), communication from its Communicate steps as worker/rank runs
// them, on the cluster's links (planner/sharding/collectives.h).
#ifndef MAPD_PLANNER_LOWER_RANK_COST_H_
#define MAPD_PLANNER_LOWER_RANK_COST_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "model/ir/graph.h"
#include "planner/profile/profile_options.h"
#include "planner/sharding/cluster.h"
#include "proto/mapd/v1/rank_program.pb.h"

namespace mapd {

struct RankPrediction {
  int64_t peak_bytes = 0;
  double compute_seconds = 0;        // forward + backward + optimizer of the local program
  double communication_seconds = 0;  // its collectives, forward and backward, not overlapped
  double step_seconds() const { return compute_seconds + communication_seconds; }
};

// Seconds of the collectives `program` runs in one step, as the runtime performs them:
//   ALL_REDUCE      all-reduce of the input                      (backward: none)
//   ALL_GATHER      all-gather to the output                     (backward: none, a slice)
//   REDUCE_SCATTER  all-reduce of the input (Gloo has no CPU reduce-scatter; a real one on
//                   NCCL), backward an all-gather of the input's size
//   ALL_TO_ALL      all-to-all of the input, and again backward
//   SLICE           none, backward an all-gather of the input's size
//   GRAD_SYNC       none, backward an all-reduce of the input
//   KEEP_ON_FIRST, SCATTER_TO_PARTIAL   none either way
// and for ZeRO (zero.h): stage 2 replaces a sharded parameter's GRAD_SYNCs by a reduce-scatter
// of its padded block (on Gloo an all-reduce per axis of what is left), and both stages gather
// the updated shards back (an all-gather per axis, innermost first).
// INVALID_ARGUMENT when a step reads a tensor the program never made or names an axis the
// cluster lacks.
absl::StatusOr<double> CommunicationSeconds(const v1::RankProgram& program, const Cluster& cluster);

// `global` is the graph `program` was lowered from (the micro-batch graph with micro-batches).
// A pipeline stage's program is predicted as PredictPipelineRank's one chunk.
absl::StatusOr<RankPrediction> PredictRank(const Graph& global, const v1::RankProgram& program, const Cluster& cluster,
                                           const ProfileOptions& profile);

// One chunk of layers a pipeline rank runs: its program and the graph it was lowered from.
struct ChunkToPredict {
  const Graph* graph;
  const v1::RankProgram* program;
};

// A pipeline stage's rank (DESIGN §6b): its chunks' programs (one under 1F1B, chunk 0 … V − 1
// interleaved) predicted together, as the rank runs them — time summed; memory followed through
// the schedule (planner/plan/one_f_one_b.h) pass by pass: the pass's own peak (its first
// backward's without gradients, later ones' with them accumulated), plus what each pass in
// flight keeps for its backward (ProfileReport::kept_per_pass_bytes), plus the other chunks'
// parameters, optimizer states and, once made, gradients. Under 1F1B this is the larger of
// the first pass with min(p − i, m) in flight and a later one with as many as the steady state
// keeps. INVALID_ARGUMENT when the chunks are not the role's.
absl::StatusOr<RankPrediction> PredictPipelineRank(const std::vector<ChunkToPredict>& chunks, const Cluster& cluster,
                                                   const ProfileOptions& profile);

}  // namespace mapd

#endif  // MAPD_PLANNER_LOWER_RANK_COST_H_

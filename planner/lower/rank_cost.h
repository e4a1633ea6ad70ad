// What one rank's program is predicted to cost, to set beside what the rank measures
// (`mapctl run --ranks N`): memory and compute from profiling the program as a graph of its
// local tensors (LocalGraph + the symbolic profiler: liveness, transients, saved tensors,
// gradients, optimizer state), communication from its Communicate steps as worker/rank runs
// them, on the cluster's links (planner/sharding/collectives.h).
#ifndef MAPD_PLANNER_LOWER_RANK_COST_H_
#define MAPD_PLANNER_LOWER_RANK_COST_H_

#include <cstdint>

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

absl::StatusOr<RankPrediction> PredictRank(const Graph& global, const v1::RankProgram& program, const Cluster& cluster,
                                           const ProfileOptions& profile);

}  // namespace mapd

#endif  // MAPD_PLANNER_LOWER_RANK_COST_H_

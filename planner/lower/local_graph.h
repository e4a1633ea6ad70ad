// A rank's program as a graph of its local tensors — every Compute as its node on local types
// and attributes, every Communicate as a "collective" node that allocates its local output — so
// that the symbolic profiler predicts one rank's memory (liveness, transients, saved tensors,
// gradients, optimizer state) the way it predicts one device's. `mapctl run --ranks N` compares
// it with each rank's measured peak.
#ifndef MAPD_PLANNER_LOWER_LOCAL_GRAPH_H_
#define MAPD_PLANNER_LOWER_LOCAL_GRAPH_H_

#include "absl/status/statusor.h"
#include "model/ir/graph.h"
#include "proto/mapd/v1/rank_program.pb.h"

namespace mapd {

absl::StatusOr<Graph> LocalGraph(const Graph& global, const v1::RankProgram& program);

}  // namespace mapd

#endif  // MAPD_PLANNER_LOWER_LOCAL_GRAPH_H_

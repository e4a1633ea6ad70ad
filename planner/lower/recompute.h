// Activation checkpointing of a rank program: which instructions recompute in backward instead
// of keeping their activations (DESIGN §6). A segment is a maximal run of consecutive
// instructions whose nodes belong to one chosen layer (LayerOfScope of the node's scope, e.g.
// "transformer.h.3"); communicate steps between two of its nodes join it. The runtime runs a
// segment without keeping anything but its inputs and reruns it in backward (worker/rank); the
// profiler is told the same through LocalGraph (rank_cost.h).
#ifndef MAPD_PLANNER_LOWER_RECOMPUTE_H_
#define MAPD_PLANNER_LOWER_RECOMPUTE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "model/ir/graph.h"
#include "planner/profile/layers.h"
#include "proto/mapd/v1/rank_program.pb.h"

namespace mapd {

// Adds a segment to `program` for every run of instructions in one of `layers`. INVALID_ARGUMENT
// naming a layer no node belongs to.
absl::Status MarkRecompute(const Graph& graph, const std::vector<std::string>& layers, v1::RankProgram* program);

}  // namespace mapd

#endif  // MAPD_PLANNER_LOWER_RECOMPUTE_H_

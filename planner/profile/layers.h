// Layers of a graph as its node scopes name them: the unit the profiler reports per layer and
// activation checkpointing recomputes.
#ifndef MAPD_PLANNER_PROFILE_LAYERS_H_
#define MAPD_PLANNER_PROFILE_LAYERS_H_

#include <string>
#include <vector>

#include "model/ir/graph.h"

namespace mapd {

// "transformer.h.3.attn" → "transformer.h.3"; "lm_head" → "lm_head"; "" → "(top)".
std::string LayerOfScope(const std::string& scope);

// Whether a layer (LayerOfScope) is one of a repeated kind: its name has a numeric part.
bool IsRepeatedLayer(const std::string& layer);

// The layers of `graph` that repeat (their name has a numeric part: "transformer.h.3"), in
// graph order — what `--recompute all` means and what the planner may checkpoint.
std::vector<std::string> RepeatedLayers(const Graph& graph);

// RepeatedLayers, and per node the index of its layer among them (-1: not in one): made once per
// graph where many searches ask (the planner's recompute groups).
struct LayerIndex {
  std::vector<std::string> layers;
  std::vector<int> of_node;
};
LayerIndex IndexLayers(const Graph& graph);

}  // namespace mapd

#endif  // MAPD_PLANNER_PROFILE_LAYERS_H_

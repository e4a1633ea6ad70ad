// What one training step of a graph consumes, for throughput figures (tokens/s or samples/s):
// `mapctl run`, the worker's metrics and `mapctl watch` all count the same way.
#ifndef MAPD_MODEL_GRAPH_STEP_ITEMS_H_
#define MAPD_MODEL_GRAPH_STEP_ITEMS_H_

#include <cstdint>

#include "proto/mapd/v1/graph.pb.h"

namespace mapd {

struct StepItems {
  int64_t count = 0;
  const char* unit = "samples";  // "tokens" for a token model
};

// Token models: the token input's elements (batch × sequence); imported graphs may carry no
// roles, so an integer input of rank 2 is taken for tokens. Otherwise the batch: dim 0 of the
// first input.
StepItems ItemsPerStep(const v1::Graph& graph);

}  // namespace mapd

#endif  // MAPD_MODEL_GRAPH_STEP_ITEMS_H_

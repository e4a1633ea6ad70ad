// Training losses: makes a graph end in a scalar loss (output 0), as the profiler, runtime and
// planner expect. Zoo graphs already do; an imported model usually returns logits, and the
// job's loss kind says what to append.
#ifndef MAPD_MODEL_GRAPH_LOSS_H_
#define MAPD_MODEL_GRAPH_LOSS_H_

#include <string>

#include "absl/status/statusor.h"
#include "proto/mapd/v1/graph.pb.h"

namespace mapd {

enum class LossKind {
  kAuto,          // the first floating-point scalar output if there is one, else cross_entropy
  kOutput,        // the model returns its loss: the first floating-point scalar output
  kCrossEntropy,  // logits [..., C] + a new int64 input "targets" [...]
  kMse,           // prediction + a new input "targets" of the same shape and dtype
};

absl::StatusOr<LossKind> ParseLossKind(const std::string& name);  // auto | output | cross_entropy | mse

// Returns the graph with a single output: the scalar loss. `output` picks which model output
// the appended loss reads (cross_entropy/mse); -1 means the first floating-point output.
// Errors name the output and its type when the kind does not fit.
absl::StatusOr<v1::Graph> WithTrainingLoss(v1::Graph graph, LossKind kind, int output = -1);

}  // namespace mapd

#endif  // MAPD_MODEL_GRAPH_LOSS_H_

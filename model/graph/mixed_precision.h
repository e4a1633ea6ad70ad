// bf16 mixed precision (DESIGN §5, docs/runtime.md "bf16 mixed precision"): the graph a bf16
// run executes, and the one the profiler and planner cost — one graph, so what is predicted is
// what runs.
//
// The policy is Megatron's (its Float16Module casts the whole model) with the loss as PyTorch's
// autocast computes it:
//   - every f32 parameter, buffer and constant, and every f32 graph input, becomes bf16: the
//     model's compute copy. The optimizer keeps an fp32 master of every trainable 16-bit
//     parameter and fp32 states (worker/runtime/optimizer.h); the profiler counts both.
//   - creation ops that would make f32 (zeros, arange, ...) make bf16 (their dtype attribute set);
//   - every floating input of a loss op (cross_entropy, nll_loss, mse_loss) is cast to f32 first
//     (a `to` node), so the loss, its log-softmax and their gradients are fp32 — autocast's fp32
//     list on CPU and CUDA;
//   - every other node's output types are inferred again from its inputs: each op runs in its
//     inputs' dtype (ATen accumulates bf16 sums, means, norms and softmax in fp32 inside the
//     kernel), and a cast the model writes itself (`.float()`) stays.
// Gradients are bf16 (those of the loss's fp32 inputs fp32, cast back by the `to`'s backward).
#ifndef MAPD_MODEL_GRAPH_MIXED_PRECISION_H_
#define MAPD_MODEL_GRAPH_MIXED_PRECISION_H_

#include "absl/status/statusor.h"
#include "model/ir/dtype.h"
#include "model/ops/registry.h"
#include "proto/mapd/v1/graph.pb.h"

namespace mapd {

// The bf16 mixed-precision form of `graph`, not yet verified (MakeVerifiedGraph). Idempotent: a
// graph with no f32 parameter or input comes back as it was. Errors name the node whose
// inference fails in bf16 (INVALID_ARGUMENT).
absl::StatusOr<v1::Graph> ToBf16Mixed(v1::Graph graph, const OpRegistry& registry = OpRegistry::Global());

// Whether the optimizer keeps an fp32 master of a trainable parameter of this dtype (16-bit
// floats: bf16, f16), whatever the precision asked for — the runtime's rule, which the profiler
// and the planner's memory model follow.
inline bool HasMasterWeights(DType dtype) { return Is16BitFloat(dtype); }

// Whether a graph is already in that form: no f32 parameter and no f32 graph input.
bool IsBf16Mixed(const v1::Graph& graph);

}  // namespace mapd

#endif  // MAPD_MODEL_GRAPH_MIXED_PRECISION_H_

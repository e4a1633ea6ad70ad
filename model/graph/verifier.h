// Verifier: checks a graph before anything else trusts it.
//
// Checks, in order: names and types of inputs and parameters; that every value is defined
// exactly once and has a recorded type; that every node's op exists; dangling reads (a value
// nothing defines); cycles (reported as the cycle's node names) and out-of-order nodes; op
// inputs and attributes, by re-running shape inference and comparing with the recorded
// types; outputs; buffer updates. Every error is INVALID_ARGUMENT and names the node or value.
#ifndef MAPD_MODEL_GRAPH_VERIFIER_H_
#define MAPD_MODEL_GRAPH_VERIFIER_H_

#include "absl/status/statusor.h"
#include "model/ir/graph.h"
#include "model/ops/registry.h"
#include "proto/mapd/v1/graph.pb.h"

namespace mapd {

absl::Status VerifyGraph(const v1::Graph& graph, const OpRegistry& registry = OpRegistry::Global());

// VerifyGraph, then the view.
absl::StatusOr<Graph> MakeVerifiedGraph(v1::Graph graph, const OpRegistry& registry = OpRegistry::Global());

}  // namespace mapd

#endif  // MAPD_MODEL_GRAPH_VERIFIER_H_

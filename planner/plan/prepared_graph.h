// The per-node facts the planner's costs and baselines are computed from — input and output
// types, which inputs need gradients, how each input relates to the parameters, the op's cost
// and what autograd saves — walked once over the graph in order, as the profiler does.
#ifndef MAPD_PLANNER_PLAN_PREPARED_GRAPH_H_
#define MAPD_PLANNER_PLAN_PREPARED_GRAPH_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/ir/graph.h"
#include "model/ops/registry.h"

namespace mapd {

// How a node's input relates to the model's parameters (memory is charged once per parameter).
enum class ParamRole {
  kNone,           // an activation or graph input
  kTrainable,      // a trainable parameter first read here: weights, gradients, optimizer states
  kCountedBefore,  // a trainable parameter already charged at an earlier node (tied weights)
  kFrozen,         // a parameter or buffer without a gradient, first read here: its weights only
  kFrozenCountedBefore,  // the same, already charged at an earlier node
};

inline bool IsTrainable(ParamRole r) { return r == ParamRole::kTrainable || r == ParamRole::kCountedBefore; }

// Everything about a node that its strategies' costs depend on; addresses stay fixed (the
// OpContext refers to the vectors).
struct PreparedNode {
  const OpDef* def = nullptr;
  std::vector<TensorType> in, out;
  std::vector<const TensorType*> in_ptrs;
  std::vector<bool> rg, contig;
  std::vector<ParamRole> role;
  bool any_rg = false;
  std::vector<bool> out_rg;  // per output: needs a gradient (OutputNeedsGrad)
  OpCost cost;
  double grad_flops = 0;
  SavedSpec saved;
  // Per input / output: how much of what autograd saves here is charged here, as a multiple of
  // the tensor's bytes — 0 when its storage is already charged (saved by its producer or an
  // earlier consumer, or a view of a storage that is), the base's size over the view's when
  // this is the first save of a view's storage.
  std::vector<double> saved_input_charge, saved_output_charge;
  std::string signature;  // equal signatures cost equally
  std::string rate_key;   // OpRateKey: the op's measured rate, where a profile has one
  std::unique_ptr<OpContext> octx;
  CostContext ctx() const { return CostContext{*octx, out, rg, contig}; }
};

// Walks the graph in order, deciding gradients and parameter roles (a tied parameter is
// kTrainable where first read). INVALID_ARGUMENT for an unknown op.
absl::StatusOr<std::vector<std::unique_ptr<PreparedNode>>> PrepareNodes(const Graph& graph);

}  // namespace mapd

#endif  // MAPD_PLANNER_PLAN_PREPARED_GRAPH_H_

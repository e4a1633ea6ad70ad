// Strategies: the ways one node can run on a device mesh, generated from its op's sharding rule
// (model/ops/sharding_rule.h) — never listed by hand per op (DESIGN §3). See docs/sharding.md.
//
// A strategy picks, for each mesh axis, one label of the rule to split across that axis (or
// none). The same label may be picked on several axes: a 2-axis shard, the dimension split by
// the product of those axes' sizes, the first axis outermost (S(d) on both axes). The node's
// input and output placements follow from the picks: S(d) where the tensor's dimension d has
// the axis's label; P on an output (and on an addend input, such as a bias) where the label is
// linear_reduced; R otherwise.
#ifndef MAPD_PLANNER_SHARDING_STRATEGIES_H_
#define MAPD_PLANNER_SHARDING_STRATEGIES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/ops/registry.h"
#include "model/ops/sharding_rule.h"
#include "planner/sharding/placement.h"

namespace mapd {

struct Strategy {
  std::vector<char> axis_label;         // per mesh axis: the label split on that axis, or 0 for none
  std::vector<Placement> inputs;        // per input (empty Placement for absent inputs)
  std::vector<Placement> outputs;       // per output
  // The picks, label by label in the order of their first axis: "b@0 n@1", "n@0,1" (a 2-axis
  // shard), or "replicated".
  std::string ToString() const;
  // The placements: "S(0)R,RS(0),_->S(0)S(1)" ("_" for an absent input).
  std::string PlacementsString() const;
};

// All strategies of a node on a mesh of the given shape: for each mesh axis choose one label
// (or none); the same label may be chosen on several axes (a 2-axis shard, axes in order);
// unsplittable labels are never chosen, nor is any label on an axis of size 1 (it would split
// nothing); a label whose dimension (in every tensor where it appears) is not divisible by the
// product of its axes' sizes is filtered out. Input/output placements follow: S(d) where the
// dim's label is chosen on that axis, P on outputs (and addend inputs) for a chosen
// linear_reduced label, R otherwise. Deterministic order, replicated first: axis 0 varies
// slowest; on each axis "none" comes first, then the labels in order of first appearance
// (inputs in order, then outputs).
//
// Errors: INVALID_ARGUMENT for a mesh with no axes or an axis of size < 1; UNIMPLEMENTED when
// the op has no sharding rule; the rule's own error, or INTERNAL when it does not fit the node
// (ValidateShardingRule).
absl::StatusOr<std::vector<Strategy>> GenerateStrategies(const OpDef& def, const CostContext& ctx,
                                                         const std::vector<int64_t>& mesh_shape);

// The same from a rule already computed for the node `ctx` describes.
absl::StatusOr<std::vector<Strategy>> StrategiesFromRule(const ShardingRule& rule, const CostContext& ctx,
                                                         const std::vector<int64_t>& mesh_shape);

}  // namespace mapd

#endif  // MAPD_PLANNER_SHARDING_STRATEGIES_H_

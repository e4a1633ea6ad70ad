// Placements: how a tensor lies on a device mesh, one entry per mesh axis (DESIGN §5).
//   S(d)  split along tensor dimension d across the axis's devices
//   R     replicated: every device of the axis holds all of it
//   P     partial: every device holds a summand; the value is their sum
#ifndef MAPD_PLANNER_SHARDING_PLACEMENT_H_
#define MAPD_PLANNER_SHARDING_PLACEMENT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/ir/tensor_type.h"

namespace mapd {

struct AxisPlacement {
  enum class Kind { kReplicate, kShard, kPartial };
  Kind kind = Kind::kReplicate;
  int dim = -1;  // kShard: the tensor dimension split

  static AxisPlacement R() { return {Kind::kReplicate, -1}; }
  static AxisPlacement S(int d) { return {Kind::kShard, d}; }
  static AxisPlacement P() { return {Kind::kPartial, -1}; }
  bool operator==(const AxisPlacement& o) const { return kind == o.kind && dim == o.dim; }
  bool operator!=(const AxisPlacement& o) const { return !(*this == o); }
  std::string ToString() const;  // "R", "S(1)", "P"
};

// One AxisPlacement per mesh axis.
using Placement = std::vector<AxisPlacement>;

// "S(0)R" for a 2-axis mesh.
std::string PlacementToString(const Placement& p);
// Parses "S(0)R", "RR", "P S(1)" (spaces ignored).
absl::StatusOr<Placement> ParsePlacement(const std::string& text);
// All replicated on `axes` axes.
Placement Replicated(int axes);

// The shape each device holds: dimensions split by the product of the sizes of the axes that
// shard them. FAILED_PRECONDITION when a split dimension is not divisible.
absl::StatusOr<Shape> LocalShape(const Shape& global, const Placement& placement, const std::vector<int64_t>& mesh_shape);

}  // namespace mapd

#endif  // MAPD_PLANNER_SHARDING_PLACEMENT_H_

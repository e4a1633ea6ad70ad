#include "planner/sharding/collectives.h"

#include "absl/strings/str_cat.h"

namespace mapd {

const char* CollectiveName(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::kAllReduce: return "all-reduce";
    case CollectiveKind::kAllGather: return "all-gather";
    case CollectiveKind::kReduceScatter: return "reduce-scatter";
    case CollectiveKind::kAllToAll: return "all-to-all";
  }
  return "?";
}

double CollectiveSeconds(CollectiveKind kind, int64_t group_bytes, int64_t devices, const AxisLink& link) {
  if (devices <= 1 || group_bytes <= 0) return 0;
  const double n = static_cast<double>(devices);
  const double b = static_cast<double>(group_bytes);
  switch (kind) {
    case CollectiveKind::kAllReduce: return link.alpha + 2 * (n - 1) / n * b * link.beta;
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter: return link.alpha + (n - 1) / n * b * link.beta;
    case CollectiveKind::kAllToAll: return link.alpha + (n - 1) / (n * n) * b * link.beta;
  }
  return 0;
}

absl::StatusOr<Reshard> ReshardCost(const TensorType& type, const Placement& from, const Placement& to,
                                    const Cluster& cluster) {
  const int axes = cluster.num_axes();
  if (static_cast<int>(from.size()) != axes || static_cast<int>(to.size()) != axes) {
    return absl::InvalidArgumentError(absl::StrCat("placements ", PlacementToString(from), " → ", PlacementToString(to),
                                                   " do not have one entry per mesh axis (", axes, ")"));
  }
  if (auto s = LocalShape(type.shape, from, cluster.mesh); !s.ok()) return s.status();
  if (auto s = LocalShape(type.shape, to, cluster.mesh); !s.ok()) return s.status();
  Reshard r;
  // Axis by axis, outermost first, tracking the placement reached so far: the bytes an axis's
  // group handles are the tensor as sharded by the other axes at that moment.
  Placement current = from;
  for (int a = 0; a < axes; ++a) {
    if (current[a] == to[a]) continue;
    Placement others = current;
    others[a] = AxisPlacement::R();
    auto group_shape = LocalShape(type.shape, others, cluster.mesh);
    if (!group_shape.ok()) return group_shape.status();
    const int64_t bytes = NumElements(*group_shape) * DTypeSize(type.dtype);
    const auto kFrom = current[a].kind, kTo = to[a].kind;
    using K = AxisPlacement::Kind;
    std::optional<CollectiveKind> kind;
    if (kFrom == K::kPartial && kTo == K::kReplicate) kind = CollectiveKind::kAllReduce;
    else if (kFrom == K::kPartial && kTo == K::kShard) kind = CollectiveKind::kReduceScatter;
    else if (kFrom == K::kShard && kTo == K::kReplicate) kind = CollectiveKind::kAllGather;
    else if (kFrom == K::kShard && kTo == K::kShard) kind = CollectiveKind::kAllToAll;
    if (kind) {
      const double s = CollectiveSeconds(*kind, bytes, cluster.mesh[a], cluster.links[a]);
      r.collectives.push_back({*kind, a, bytes, s});
      r.seconds += s;
    }
    current[a] = to[a];
  }
  return r;
}

}  // namespace mapd

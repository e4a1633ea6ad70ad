#include "planner/sharding/collectives.h"

#include "absl/strings/str_cat.h"

namespace mapd {

namespace {

// The elements per device of `shape` with axis b placed as placement(b) (LocalShape's count:
// the same checks, in the same order); -1 where LocalShape fails.
template <typename PlacementOf>
int64_t LocalElements(const Shape& shape, const std::vector<int64_t>& mesh, const PlacementOf& placement) {
  constexpr size_t kMaxRank = 16;
  if (shape.size() > kMaxRank) {
    Placement p;
    for (size_t b = 0; b < mesh.size(); ++b) p.push_back(placement(b));
    auto local = LocalShape(shape, p, mesh);
    return local.ok() ? NumElements(*local) : -1;
  }
  int64_t local[kMaxRank];
  const int rank = static_cast<int>(shape.size());
  for (int d = 0; d < rank; ++d) local[d] = shape[d];
  for (size_t b = 0; b < mesh.size(); ++b) {
    const AxisPlacement ap = placement(b);
    if (ap.kind != AxisPlacement::Kind::kShard) continue;
    if (ap.dim < 0 || ap.dim >= rank || local[ap.dim] % mesh[b] != 0) return -1;
    local[ap.dim] /= mesh[b];
  }
  int64_t n = 1;
  for (int d = 0; d < rank; ++d) n *= local[d];
  return n;
}

// The reshard's collective on one axis, if any (P→R, P→S, S→R, S→S).
std::optional<CollectiveKind> AxisCollective(AxisPlacement::Kind from, AxisPlacement::Kind to) {
  using K = AxisPlacement::Kind;
  if (from == K::kPartial && to == K::kReplicate) return CollectiveKind::kAllReduce;
  if (from == K::kPartial && to == K::kShard) return CollectiveKind::kReduceScatter;
  if (from == K::kShard && to == K::kReplicate) return CollectiveKind::kAllGather;
  if (from == K::kShard && to == K::kShard) return CollectiveKind::kAllToAll;
  return std::nullopt;
}

}  // namespace

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
  const double latency = CollectiveLatency(kind, group_bytes, link);
  switch (kind) {
    case CollectiveKind::kAllReduce: return latency + 2 * (n - 1) / n * b * link.beta;
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter: return latency + (n - 1) / n * b * link.beta;
    case CollectiveKind::kAllToAll: return latency + (n - 1) / (n * n) * b * link.beta;
  }
  return 0;
}

double CollectiveLatency(CollectiveKind kind, int64_t group_bytes, const AxisLink& link) {
  return kind == CollectiveKind::kAllReduce && group_bytes > kOneExchangeAllReduceBytes ? 2 * link.alpha : link.alpha;
}

namespace {

// The placement axis `a`'s group holds during a reshard from `from` to `to`, axis by axis,
// outermost first: the axes before `a` already as `to`, `a` itself whole, those after still as
// `from`.
AxisPlacement DuringStep(const Placement& from, const Placement& to, size_t a, size_t b) {
  return b < a ? to[b] : (b == a ? AxisPlacement::R() : from[b]);
}

// The collectives that turn `from` into `to` (placements of the mesh's length, each valid for
// `type`), in the order they run: each(kind, axis, group bytes, seconds). Returns the first axis
// whose group does not divide (DuringStep), or -1.
template <typename Each>
int ForEachReshardStep(const TensorType& type, const Placement& from, const Placement& to, const Cluster& cluster,
                       const Each& each) {
  for (size_t a = 0; a < cluster.mesh.size(); ++a) {
    if (from[a] == to[a]) continue;
    const int64_t elements = LocalElements(type.shape, cluster.mesh, [&](size_t b) { return DuringStep(from, to, a, b); });
    if (elements < 0) return static_cast<int>(a);
    if (const auto kind = AxisCollective(from[a].kind, to[a].kind)) {
      const int64_t bytes = elements * DTypeSize(type.dtype);
      each(*kind, static_cast<int>(a), bytes, CollectiveSeconds(*kind, bytes, cluster.mesh[a], cluster.links[a]));
    }
  }
  return -1;
}

}  // namespace

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
  const int failed = ForEachReshardStep(type, from, to, cluster, [&](CollectiveKind kind, int axis, int64_t bytes, double seconds) {
    r.collectives.push_back({kind, axis, bytes, seconds});
    r.seconds += seconds;
  });
  if (failed >= 0) {  // LocalShape says why
    Placement during;
    for (size_t b = 0; b < from.size(); ++b) during.push_back(DuringStep(from, to, static_cast<size_t>(failed), b));
    return LocalShape(type.shape, during, cluster.mesh).status();
  }
  return r;
}

double ReshardSeconds(const TensorType& type, const Placement& from, const Placement& to, const Cluster& cluster) {
  const size_t axes = cluster.mesh.size();
  if (from.size() != axes || to.size() != axes) return -1;
  if (LocalElements(type.shape, cluster.mesh, [&](size_t b) { return from[b]; }) < 0 ||
      LocalElements(type.shape, cluster.mesh, [&](size_t b) { return to[b]; }) < 0) {
    return -1;
  }
  double seconds = 0;
  const int failed =
      ForEachReshardStep(type, from, to, cluster, [&](CollectiveKind, int, int64_t, double s) { seconds += s; });
  return failed >= 0 ? -1 : seconds;
}

}  // namespace mapd

// Collective communication costs on one mesh axis and the cost of changing a tensor's
// placement (resharding), in seconds (DESIGN §5). With n devices on the axis, B bytes of the
// tensor as the axis's group sees it, alpha/beta of the axis's links:
//   all-reduce      2 alpha + 2 (n-1)/n · B · beta      (alpha alone where B ≤ 4 KiB)
//   all-gather        alpha +   (n-1)/n · B · beta      (B: the gathered size)
//   reduce-scatter    alpha +   (n-1)/n · B · beta      (B: the size before scattering)
//   all-to-all        alpha +   (n-1)/n² · B · beta
// alpha is one exchange's latency: an all-reduce is a reduce-scatter and an all-gather, two
// exchanges (Gloo's direct rounds, a ring's two phases) — on a host whose ranks share cores,
// each a wait for the peers (tensor parallelism's 64-256 KiB all-reduces took 2.1 ms on 2 ranks
// here, its all-gathers 1.2, its all-to-alls 0.6); a small one (a loss, BatchNorm statistics)
// is a single exchange of the whole tensor.
// Resharding one axis: P→R all-reduce, P→S reduce-scatter, S→R all-gather, R→S a local slice
// (free), S(i)→S(j) all-to-all; R→P and S→P are free (one device keeps the value, the others
// hold zeros).
#ifndef MAPD_PLANNER_SHARDING_COLLECTIVES_H_
#define MAPD_PLANNER_SHARDING_COLLECTIVES_H_

#include <cstdint>
#include <string>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "model/ir/tensor_type.h"
#include "planner/sharding/cluster.h"
#include "planner/sharding/placement.h"

namespace mapd {

enum class CollectiveKind { kAllReduce, kAllGather, kReduceScatter, kAllToAll };
const char* CollectiveName(CollectiveKind k);

double CollectiveSeconds(CollectiveKind kind, int64_t group_bytes, int64_t devices, const AxisLink& link);
// Its latency term alone (CollectiveSeconds beyond the bandwidth's).
double CollectiveLatency(CollectiveKind kind, int64_t group_bytes, const AxisLink& link);
// All-reduces of at most this many bytes are one exchange.
inline constexpr int64_t kOneExchangeAllReduceBytes = 4 << 10;

struct Collective {
  CollectiveKind kind;
  int axis;
  int64_t bytes;  // B as above
  double seconds;
};

struct Reshard {
  double seconds = 0;
  std::vector<Collective> collectives;  // in the order they run (outermost axis first)
};

// The collectives that turn `from` into `to` for a tensor of `type` on `cluster`. A dimension
// that does not divide is FAILED_PRECONDITION.
absl::StatusOr<Reshard> ReshardCost(const TensorType& type, const Placement& from, const Placement& to,
                                    const Cluster& cluster);
// ReshardCost's seconds alone, computed without allocating (the cost graph's inner loop: every
// pair of a producer's and a consumer's strategies); negative where ReshardCost is an error.
double ReshardSeconds(const TensorType& type, const Placement& from, const Placement& to, const Cluster& cluster);

}  // namespace mapd

#endif  // MAPD_PLANNER_SHARDING_COLLECTIVES_H_

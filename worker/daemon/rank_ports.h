// The ports a worker's ranks listen on, for a network policy that opens only those (issue 50).
// Rank 0's store gate, Gloo's transport and NCCL's bootstrap all listen on ports the kernel picks
// from its ephemeral range, net.ipv4.ip_local_port_range — a per-network-namespace setting (a
// Kubernetes pod sets it as a safe sysctl). MAP does not pick ports itself (Gloo's listeners in
// LibTorch take no port); `mapd-worker --rank-ports LO-HI` instead refuses to start unless the
// kernel's range lies inside LO–HI, so the range a policy opens is the one the ranks use.
#ifndef MAPD_WORKER_DAEMON_RANK_PORTS_H_
#define MAPD_WORKER_DAEMON_RANK_PORTS_H_

#include <string>

#include "absl/status/statusor.h"

namespace mapd {

struct PortRange {
  int low = 0;   // first port, 1..65535
  int high = 0;  // last port, low..65535
  std::string ToString() const;  // "LO-HI"
};

// "LO-HI" (1 <= LO <= HI <= 65535); INVALID_ARGUMENT naming `text` otherwise.
absl::StatusOr<PortRange> ParsePortRange(const std::string& text);

// The kernel's ephemeral range as `file` (net.ipv4.ip_local_port_range: "LO\tHI") holds it.
absl::StatusOr<PortRange> ReadEphemeralPorts(const std::string& file = "/proc/sys/net/ipv4/ip_local_port_range");

// OK when `ephemeral` lies inside `wanted`; FAILED_PRECONDITION saying how to set it otherwise.
absl::Status CheckRankPorts(const PortRange& wanted, const PortRange& ephemeral);

}  // namespace mapd

#endif  // MAPD_WORKER_DAEMON_RANK_PORTS_H_

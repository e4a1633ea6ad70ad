#include "worker/daemon/rank_ports.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/file_io.h"

namespace mapd {

std::string PortRange::ToString() const { return absl::StrCat(low, "-", high); }

absl::StatusOr<PortRange> ParsePortRange(const std::string& text) {
  const std::vector<std::string> parts = absl::StrSplit(text, '-');
  PortRange r;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &r.low) || !absl::SimpleAtoi(parts[1], &r.high) || r.low < 1 || r.high > 65535 ||
      r.low > r.high) {
    return absl::InvalidArgumentError(absl::StrCat("--rank-ports '", text.substr(0, 64), "' is not LO-HI with 1 <= LO <= HI <= 65535"));
  }
  return r;
}

absl::StatusOr<PortRange> ReadEphemeralPorts(const std::string& file) {
  auto text = ReadFileToString(file);
  if (!text.ok()) return text.status();
  const std::vector<std::string> parts = absl::StrSplit(*text, absl::ByAnyChar(" \t\n"), absl::SkipEmpty());
  PortRange r;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &r.low) || !absl::SimpleAtoi(parts[1], &r.high)) {
    return absl::DataLossError(absl::StrCat(file, " does not hold two ports"));
  }
  return r;
}

absl::Status CheckRankPorts(const PortRange& wanted, const PortRange& ephemeral) {
  if (ephemeral.low >= wanted.low && ephemeral.high <= wanted.high) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "--rank-ports ", wanted.ToString(), ": the ranks listen on ports the kernel picks from net.ipv4.ip_local_port_range, which is ",
      ephemeral.ToString(), " here; set it inside the range (sysctl -w net.ipv4.ip_local_port_range=\"", wanted.low, " ", wanted.high,
      "\"; in Kubernetes, the pod's securityContext.sysctls) or give --rank-ports the kernel's range"));
}

}  // namespace mapd

#include "planner/sharding/cluster.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace mapd {

absl::Status ClusterOptions::Validate() const {
  if (devices < 0) return absl::InvalidArgumentError(absl::StrCat("--devices must be positive, got ", devices));
  if (devices == 0 && mesh.empty()) return absl::InvalidArgumentError("give the devices with --devices N or --mesh AxB");
  int64_t product = 1;
  for (int64_t a : mesh) {
    if (a <= 0) return absl::InvalidArgumentError(absl::StrCat("mesh axes must be positive, got ", absl::StrJoin(mesh, "x")));
    product *= a;
  }
  if (!mesh.empty() && devices > 0 && product != devices) {
    return absl::InvalidArgumentError(absl::StrCat("the mesh ", absl::StrJoin(mesh, "x"), " has ", product,
                                                   " devices but --devices is ", devices, "; make them agree"));
  }
  if (memory_per_device < 0) return absl::InvalidArgumentError("--memory-per-device must be positive");
  if (gpus_per_node <= 0) return absl::InvalidArgumentError(absl::StrCat("--gpus-per-node must be positive, got ", gpus_per_node));
  if (host_ranks < 0) return absl::InvalidArgumentError(absl::StrCat("host_ranks must not be negative, got ", host_ranks));
  return absl::OkStatus();
}

int64_t Cluster::num_devices() const {
  int64_t n = 1;
  for (int64_t a : mesh) n *= a;
  return n;
}

std::string Cluster::MeshString() const { return absl::StrJoin(mesh, "x"); }

std::pair<AxisLink, AxisLink> DefaultLinks(const std::string& device_type) {
  // Achievable collective bus bandwidths (not link peaks): NVLink inside a node, InfiniBand
  // (one NIC per GPU) across nodes; loopback TCP (Gloo) for CPUs.
  auto link = [](double alpha, double bytes_per_second, bool inter) { return AxisLink{alpha, 1.0 / bytes_per_second, inter}; };
  if (device_type.rfind("h100", 0) == 0 || device_type.rfind("h200", 0) == 0) {
    return {link(10e-6, 370e9, false), link(20e-6, 45e9, true)};
  }
  if (device_type.rfind("a100", 0) == 0) return {link(10e-6, 230e9, false), link(20e-6, 22e9, true)};
  return {link(50e-6, 5e9, false), link(100e-6, 1e9, true)};
}

namespace {

// A CPU device is a rank, and the ranks of one node (gpus_per_node of them at most) share its
// cores. With a profile measured on the host (mapctl calibrate: its rates with `threads`
// LibTorch threads, its hardware threads, its collectives), each rank — one LibTorch thread, as
// the launchers start them (OMP_NUM_THREADS=1) — computes at the rates of one thread times its
// speed beside the others: as measured with that many processes computing at once (the
// measurement of the nearest count, scaled by the share of the hardware threads), else the share
// of a core it gets where the ranks outnumber the cores (kernel overheads likewise). Catalogue
// profiles are left as they are.
const HostCollectives* NearestHostCollectives(const DeviceProfile& device, int64_t ranks) {
  const HostCollectives* nearest = nullptr;
  for (const HostCollectives& h : device.host_collectives) {
    if (nearest == nullptr || std::abs(h.ranks - ranks) < std::abs(nearest->ranks - ranks)) nearest = &h;
  }
  return nearest;
}

// The ranks that share one node's cores: the job's (a pipeline's every stage), else the mesh's
// devices, at most gpus_per_node of them. A 2-stage pipeline of 2 ranks a stage on a 2-core host
// runs 4 ranks on its 2 cores, not 2 (its steps measured 51 ms against 15 predicted as 2).
int64_t RanksPerNode(const Cluster& c) {
  const int64_t ranks = c.host_ranks > 0 ? std::max(c.host_ranks, c.num_devices()) : c.num_devices();
  return std::max<int64_t>(1, std::min(ranks, c.gpus_per_node));
}

void ShareTheHost(Cluster& c) {
  if (c.device.accelerator || c.device.host_threads <= 0) return;
  const int64_t ranks = RanksPerNode(c);
  if (ranks <= 1) return;
  const HostCollectives* nearest = NearestHostCollectives(c.device, ranks);
  auto share = [&](int64_t n) { return std::min(1.0, static_cast<double>(c.device.host_threads) / static_cast<double>(n)); };
  const double speed = nearest != nullptr && nearest->compute_speed > 0 ? nearest->compute_speed * share(ranks) / share(nearest->ranks)
                                                                        : share(ranks);
  const double per_thread = speed / static_cast<double>(std::max<int64_t>(1, c.device.threads));
  c.device.fp32_flops *= per_thread;
  c.device.bf16_flops *= per_thread;
  c.device.memory_bandwidth *= per_thread;
  c.device.vector_flops *= per_thread;
  for (auto& [op, rate] : c.device.op_rates) rate *= per_thread;
  for (MatmulRate& m : c.device.matmul_rates) m.rate *= per_thread;
  c.device.kernel_overhead_seconds /= speed;
}

// A collective inside a CPU node among `group` of its `ranks` costs what it was measured to
// among that many ranks (the measurement of the nearest count): an exchange's latency as
// measured among ranks that compute between collectives (busy_alpha), where it was — a step's
// ranks wait for each other at every blocking exchange, and on a shared host that wait, not the
// message, is most of a small collective's cost — times how much more the node's ranks
// outnumber its hardware threads than the measurement's did: a peer is set aside by the
// scheduler the more often the more ranks share a thread. A 2x2 mesh's pairs among 4 ranks on 2
// threads: twice the 2-rank figure (58 all-reduces a step, 2.7 ms each here; 2 ranks alone
// 2.1 ms, a flat 4 5.8 ms).
AxisLink HostLink(const DeviceProfile& device, int64_t group, int64_t ranks, AxisLink link) {
  if (device.accelerator || device.host_threads <= 0) return link;
  const HostCollectives* nearest = NearestHostCollectives(device, group);
  if (nearest == nullptr) return link;
  auto crowding = [&](int64_t n) { return std::max(1.0, static_cast<double>(n) / static_cast<double>(device.host_threads)); };
  link.alpha = (nearest->busy_alpha > 0 ? nearest->busy_alpha : nearest->alpha) * crowding(ranks) / crowding(nearest->ranks);
  link.beta = nearest->beta;
  return link;
}

}  // namespace

absl::StatusOr<Cluster> MakeCluster(const ClusterOptions& options) {
  if (auto st = options.Validate(); !st.ok()) return st;
  Cluster c;
  c.mesh = options.mesh.empty() ? std::vector<int64_t>{options.devices} : options.mesh;
  auto device = LoadDeviceProfile(options.device_type);
  if (!device.ok()) return device.status();
  c.device = *device;
  c.memory_per_device = options.memory_per_device > 0 ? options.memory_per_device : c.device.memory_bytes;
  c.gpus_per_node = options.gpus_per_node;
  c.host_ranks = options.host_ranks;
  ShareTheHost(c);
  auto [intra, inter] = DefaultLinks(c.device.name);
  if (options.inter_alpha >= 0) inter.alpha = options.inter_alpha;
  if (options.inter_beta >= 0) inter.beta = options.inter_beta;
  // A group of axis a spans size[a] devices spaced by the product of the inner axes' sizes.
  for (int a = 0; a < c.num_axes(); ++a) {
    int64_t stride = 1;
    for (int b = a + 1; b < c.num_axes(); ++b) stride *= c.mesh[b];
    const bool inside = stride * c.mesh[a] <= c.gpus_per_node;
    if (!inside) {
      c.links.push_back(inter);
      continue;
    }
    AxisLink link = HostLink(c.device, c.mesh[a], RanksPerNode(c), intra);
    if (options.intra_alpha >= 0) link.alpha = options.intra_alpha;
    if (options.intra_beta >= 0) link.beta = options.intra_beta;
    c.links.push_back(link);
  }
  return c;
}

absl::StatusOr<std::vector<int64_t>> ParseMesh(const std::string& text) {
  std::vector<int64_t> mesh;
  for (absl::string_view part : absl::StrSplit(text, 'x')) {
    int64_t v;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &v) || v <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("bad mesh '", text, "': use positive sizes joined by x, e.g. 2x4"));
    }
    mesh.push_back(v);
  }
  return mesh;
}

}  // namespace mapd

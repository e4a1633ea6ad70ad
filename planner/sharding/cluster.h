// The devices a plan targets: a logical N-d mesh over N devices, their type (compute rates and
// memory), the memory budget, and per-axis link costs for collectives (DESIGN §5).
//
// Axes are ordered outermost first. An axis's links are "intra-node" when all devices of one of
// its groups sit in one node (`gpus_per_node`), "inter-node" otherwise; its alpha (seconds per
// collective) and beta (seconds per byte) come from the device type's defaults unless given.
#ifndef MAPD_PLANNER_SHARDING_CLUSTER_H_
#define MAPD_PLANNER_SHARDING_CLUSTER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "planner/profile/device_profile.h"

namespace mapd {

// Link costs of one mesh axis.
struct AxisLink {
  double alpha = 0;  // seconds per collective (latency)
  double beta = 0;   // seconds per byte moved per device
  bool inter_node = false;
};

struct ClusterOptions {
  // Number of devices; 0 = the product of `mesh`.
  int64_t devices = 0;
  // Mesh shape, outermost axis first ("2x4" → {2, 4}); empty = a 1-D mesh of `devices`.
  std::vector<int64_t> mesh;
  // Catalogue name or a JSON profile from `mapctl calibrate`.
  std::string device_type = "h100-80g";
  // Memory budget per device in bytes; 0 = the device type's memory.
  int64_t memory_per_device = 0;
  // Devices per node (links inside a node are fast).
  int64_t gpus_per_node = 8;
  // The ranks of the whole job, of which this mesh may be a part (a pipeline stage's), that share
  // nodes: CPU ranks of one node share its cores, whichever stage they run (0: the mesh's devices).
  int64_t host_ranks = 0;
  // Overrides of the default link costs; < 0 = default. One value applies to every axis.
  double intra_alpha = -1, intra_beta = -1, inter_alpha = -1, inter_beta = -1;

  absl::Status Validate() const;
};

struct Cluster {
  std::vector<int64_t> mesh;
  std::vector<AxisLink> links;  // per axis
  DeviceProfile device;
  int64_t memory_per_device = 0;
  int64_t gpus_per_node = 0;
  int64_t host_ranks = 0;  // ClusterOptions::host_ranks

  int64_t num_devices() const;
  int num_axes() const { return static_cast<int>(mesh.size()); }
  std::string MeshString() const;  // "2x4"
};

absl::StatusOr<Cluster> MakeCluster(const ClusterOptions& options);

// "2x4", "8", "2x2x2".
absl::StatusOr<std::vector<int64_t>> ParseMesh(const std::string& text);

// Default link costs of a device type: {intra-node, inter-node}.
std::pair<AxisLink, AxisLink> DefaultLinks(const std::string& device_type);

}  // namespace mapd

#endif  // MAPD_PLANNER_SHARDING_CLUSTER_H_

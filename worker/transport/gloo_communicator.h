// The process groups of a rank over a TCPStore rendezvous: one Communicator per mesh-axis slice
// (DESIGN §8) — Gloo (c10d::ProcessGroupGloo, CPU), or NCCL on a GPU in CUDA builds
// (nccl_communicator.h).
#ifndef MAPD_WORKER_TRANSPORT_GLOO_COMMUNICATOR_H_
#define MAPD_WORKER_TRANSPORT_GLOO_COMMUNICATOR_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/transport/communicator.h"

namespace mapd {

struct RendezvousOptions {
  std::string host = "127.0.0.1";  // where the TCPStore server listens (rank 0's machine)
  int port = 0;                    // its port (0 is not valid here)
  // The address this rank's peers reach it at: Gloo's transport binds it (127.0.0.1 on one
  // machine; the worker's advertised host across machines).
  std::string local_host = "127.0.0.1";
  // How long a rank waits for its peers at rendezvous and in every collective before failing:
  // a crashed or hung rank ends the others' collectives with DEADLINE_EXCEEDED/UNAVAILABLE.
  std::chrono::milliseconds timeout{60000};
  // >= 0: NCCL on this GPU (CUDA builds; UNIMPLEMENTED elsewhere); -1: Gloo on the CPU.
  int cuda_device = -1;
  // CPU groups whose ranks share a machine carry their all-reduces, reduce-scatters, all-gathers
  // and barriers through a shared-memory segment (shm_communicator.h) with an arena of this many
  // bytes per rank (a multiple of 64; a larger collective goes by Gloo); 0: Gloo only. Host
  // memory outside the plan's device budget: size × this per group, reserved at connect.
  int64_t shared_memory_arena_bytes = int64_t{64} << 20;
  absl::Status Validate() const;
};

// MAPD_SHARED_MEMORY_MIB (when set: the arena in MiB, 0 for Gloo only) into `options`;
// INVALID_ARGUMENT naming the variable for anything but a whole number 0-65536.
absl::Status ApplySharedMemoryEnvironment(RendezvousOptions& options);

// A TCPStore server on `host` (port 0: any free port) for a launcher or a test; the ranks
// connect to its port. Keep the handle alive while the ranks run.
class StoreServer {
 public:
  static absl::StatusOr<std::unique_ptr<StoreServer>> Start(const std::string& host, int port);
  virtual ~StoreServer() = default;
  virtual int port() const = 0;
};

// The last rendezvous of a run: every rank says it is done, and rank 0 — whose process hosts the
// store — waits until all `world` have (or the timeout), so no rank loses the store it still uses.
absl::Status FinishRendezvous(const RendezvousOptions& options, int rank, int world);

// The communicators of rank `rank` of `mesh` (row-major), one per axis: the group of the ranks
// that share every coordinate but that axis's, with group rank = the rank's coordinate there.
absl::StatusOr<std::vector<std::unique_ptr<Communicator>>> ConnectMeshGroups(const RendezvousOptions& options,
                                                                            const std::vector<int64_t>& mesh, int rank);

}  // namespace mapd

#endif  // MAPD_WORKER_TRANSPORT_GLOO_COMMUNICATOR_H_

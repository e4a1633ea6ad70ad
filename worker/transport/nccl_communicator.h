// NCCL backend of Communicator (CUDA builds; nccl_communicator_none.cc elsewhere says so). Made
// by ConnectMeshGroups when RendezvousOptions::cuda_device >= 0: one ncclComm per mesh-axis
// group on that GPU, its ncclUniqueId passed from group rank 0 to the others through the
// rendezvous store (key "nccl-id" under the group's prefix).
//
// Tensors on the CPU — all of them with Debian's CPU-only LibTorch, where the ranks compute on
// the CPU — are staged through a device buffer the communicator keeps (grown on demand); CUDA
// tensors are used in place. NCCL calls block: a peer that never arrives is caught by the
// launcher's silence timeout (--rank-timeout), which stops every rank. Two ranks of one group
// must sit on different GPUs (NCCL refuses duplicates).
#ifndef MAPD_WORKER_TRANSPORT_NCCL_COMMUNICATOR_H_
#define MAPD_WORKER_TRANSPORT_NCCL_COMMUNICATOR_H_

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "worker/transport/communicator.h"

namespace mapd {

// True when this build has the NCCL backend.
bool NcclBackendBuilt();

// `store` is the group's own (prefixed) store. UNIMPLEMENTED in builds without CUDA/NCCL;
// UNAVAILABLE when the GPU or NCCL fails (the message says which call and why).
absl::StatusOr<std::unique_ptr<Communicator>> MakeNcclCommunicator(const c10::intrusive_ptr<c10d::Store>& store,
                                                                   int group_rank, int group_size, int cuda_device,
                                                                   const std::string& name);

}  // namespace mapd

#endif  // MAPD_WORKER_TRANSPORT_NCCL_COMMUNICATOR_H_

// Builds without the CUDA toolkit or NCCL (MAPD_WITH_CUDA=off, or not found): no NCCL backend.
#include "worker/transport/nccl_communicator.h"

#include "absl/strings/str_cat.h"

namespace mapd {

bool NcclBackendBuilt() { return false; }

absl::StatusOr<std::unique_ptr<Communicator>> MakeNcclCommunicator(const c10::intrusive_ptr<c10d::Store>&, int, int, int,
                                                                   const std::string& name) {
  return absl::UnimplementedError(absl::StrCat(name, ": this build has no NCCL backend (configure with the CUDA toolkit and "
                                               "NCCL present, -DMAPD_WITH_CUDA=on); use the CPU ranks (Gloo)"));
}

}  // namespace mapd

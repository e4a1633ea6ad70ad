// Where a job's ranks meet: the coordinator hosts one c10d TCPStore per running job (workers
// dial the coordinator, so its address is the one every rank can reach). An interface, so tests
// of the dispatcher need no LibTorch.
#ifndef MAPD_SERVER_DISPATCH_RENDEZVOUS_H_
#define MAPD_SERVER_DISPATCH_RENDEZVOUS_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"

namespace mapd {

class RendezvousHost {
 public:
  virtual ~RendezvousHost() = default;
  // Opens job `job_id`'s store; returns its port (on the coordinator's advertised host).
  virtual absl::StatusOr<int> Open(int64_t job_id) = 0;
  // Closes it (its ranks have ended). Unknown ids are ignored.
  virtual void Close(int64_t job_id) = 0;
};

// TCPStores from the distributed runtime (worker/dist), listening on `bind_host`.
std::unique_ptr<RendezvousHost> NewTcpStoreRendezvous(const std::string& bind_host);

}  // namespace mapd

#endif  // MAPD_SERVER_DISPATCH_RENDEZVOUS_H_

// The registered workers and their leases (DESIGN §9, after Ray's GCS node manager): a worker
// registers its devices and gets an id; each heartbeat renews its lease; a worker whose lease
// runs out (no heartbeat for `lease_seconds`) is LOST — its work is to be rescheduled — and must
// register again to come back. Thread-safe.
//
// Timeouts: workers heartbeat every `heartbeat_seconds` (default 1 s); the lease is
// `lease_seconds` (default 5 s), so a worker is declared lost after missing about five.
#ifndef MAPD_SERVER_WORKERS_WORKER_REGISTRY_H_
#define MAPD_SERVER_WORKERS_WORKER_REGISTRY_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "proto/mapd/v1/workers.pb.h"

namespace mapd {

struct LeaseOptions {
  double lease_seconds = 5;      // without a heartbeat this long, a worker is LOST
  double heartbeat_seconds = 1;  // what workers are told to send at (well inside the lease)
  absl::Status Validate() const;
};

// What a registration may claim and how many are kept (operator settings; docs/coordinator.md
// "Security model"). A worker's devices are what jobs are placed on, so a registration stating
// more than the operator allows is refused rather than believed.
struct RegistrationLimits {
  int max_devices_per_worker = 64;                        // devices one registration may list
  int64_t max_device_memory_bytes = int64_t{4} << 40;     // memory one device may state (4 TiB)
  int max_workers = 4096;                                 // registrations kept, alive and lost
  double lost_retention_seconds = 3600;                   // a LOST registration is dropped after this
  absl::Status Validate() const;
};

class WorkerRegistry {
 public:
  // `clock` must outlive the registry.
  WorkerRegistry(const LeaseOptions& options, Clock* clock, const RegistrationLimits& limits = {})
      : options_(options), limits_(limits), clock_(clock) {}

  // INVALID_ARGUMENT for a registration without devices, with a device of no memory, over the
  // limits (devices, memory per device, name lengths), or with a measured profile that does not
  // parse or is out of bounds (device_profile_proto.h); RESOURCE_EXHAUSTED when
  // `max_workers` registrations are alive (lost ones make room: the longest lost first).
  absl::StatusOr<v1::RegisterWorkerResponse> Register(const v1::RegisterWorkerRequest& request);
  // NOT_FOUND (unknown id, or `session` missing or not the registration's: the id now names
  // another worker) or FAILED_PRECONDITION (LOST): register again.
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const std::string& worker_id, const std::string& session);
  // NOT_FOUND when `worker_id` is unknown or `session` is missing or not its registration's.
  absl::Status CheckSession(const std::string& worker_id, const std::string& session) const;
  // Marks every worker whose lease ran out LOST, and drops those lost longer than
  // `lost_retention_seconds`; returns the ids newly lost.
  std::vector<std::string> ExpireLeases();
  std::vector<v1::Worker> List() const;  // by registration order
  const LeaseOptions& lease() const { return options_; }
  double NowUnixSeconds() const { return clock_->NowUnixSeconds(); }

 private:
  absl::Status CheckSessionLocked(const std::string& worker_id, const std::string& session) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Drops the LOST registration lost longest (its id is never given again); false when none is.
  bool DropLongestLostLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  LeaseOptions options_;
  RegistrationLimits limits_;
  Clock* clock_;
  mutable absl::Mutex mu_;
  std::map<int64_t, v1::Worker> workers_ ABSL_GUARDED_BY(mu_);  // by number
  std::map<int64_t, std::string> sessions_ ABSL_GUARDED_BY(mu_);  // by number: RegisterWorkerResponse.session
  int64_t next_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace mapd

#endif  // MAPD_SERVER_WORKERS_WORKER_REGISTRY_H_

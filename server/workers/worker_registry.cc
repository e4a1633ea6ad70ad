#include "server/workers/worker_registry.h"

#include <optional>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "planner/profile/device_profile_proto.h"

namespace mapd {

absl::Status LeaseOptions::Validate() const {
  if (!(heartbeat_seconds > 0) || !(lease_seconds > heartbeat_seconds)) {
    return absl::InvalidArgumentError(absl::StrCat("lease ", lease_seconds, " s and heartbeat ", heartbeat_seconds,
                                                   " s: the heartbeat must be positive and shorter than the lease"));
  }
  return absl::OkStatus();
}

absl::Status RegistrationLimits::Validate() const {
  if (max_devices_per_worker < 1 || max_device_memory_bytes < 1 || max_workers < 1 || !(lost_retention_seconds >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat("registration limits: ", max_devices_per_worker, " devices per worker, ",
                                                   max_device_memory_bytes, " bytes per device, ", max_workers, " workers, ",
                                                   lost_retention_seconds, " s of retention; each must be positive"));
  }
  return absl::OkStatus();
}

namespace {
// Longest names a registration may carry (a DNS name; a device name like "cuda:7"; host:port).
constexpr size_t kMaxHostname = 253, kMaxDeviceName = 64, kMaxMetricsAddress = 300;

// "w-12" → 12; -1 for anything else.
int64_t NumberOf(const std::string& id) {
  int64_t n = -1;
  if (id.rfind("w-", 0) != 0 || !absl::SimpleAtoi(id.substr(2), &n)) return -1;
  return n;
}
}  // namespace

absl::StatusOr<v1::RegisterWorkerResponse> WorkerRegistry::Register(const v1::RegisterWorkerRequest& r) {
  if (r.devices_size() == 0) {
    return absl::InvalidArgumentError(absl::StrCat("worker on '", r.hostname(), "' registers no device; give at least one (cpu or cuda:N)"));
  }
  if (r.hostname().size() > kMaxHostname || r.metrics_address().size() > kMaxMetricsAddress || r.shard_address().size() > kMaxMetricsAddress) {
    return absl::InvalidArgumentError(absl::StrCat("a registration's hostname is at most ", kMaxHostname,
                                                   " characters and its metrics and shard addresses ", kMaxMetricsAddress));
  }
  if (r.devices_size() > limits_.max_devices_per_worker) {
    return absl::InvalidArgumentError(absl::StrCat("worker on '", r.hostname(), "' registers ", r.devices_size(),
                                                   " devices; this coordinator takes at most ", limits_.max_devices_per_worker,
                                                   " per worker (mapd --max-devices-per-worker)"));
  }
  for (const auto& d : r.devices()) {
    if (d.name().empty() || d.name().size() > kMaxDeviceName || d.memory_bytes() <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("worker on '", r.hostname(), "': a device with ", d.memory_bytes(),
                                                     " bytes and a name of ", d.name().size(),
                                                     " characters; give a name (at most ", kMaxDeviceName, ") and its memory"));
    }
    if (d.memory_bytes() > limits_.max_device_memory_bytes) {
      return absl::InvalidArgumentError(absl::StrCat("worker on '", r.hostname(), "': device '", d.name(), "' states ",
                                                     d.memory_bytes(), " bytes; this coordinator believes at most ",
                                                     limits_.max_device_memory_bytes, " per device (mapd --max-device-memory)"));
    }
  }
  std::optional<v1::DeviceProfile> profile;  // as parsed and checked: nothing else of it is kept
  if (r.has_profile()) {
    auto parsed = DeviceProfileFromProto(r.profile());
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("worker on '", r.hostname(), "': ", parsed.status().message(),
                                                     "; measure again (mapd-worker --calibration auto) or start it with --calibration off"));
    }
    profile = DeviceProfileToProto(*parsed);
  }
  absl::MutexLock lock(&mu_);
  if (static_cast<int>(workers_.size()) >= limits_.max_workers && !DropLongestLostLocked()) {
    return absl::ResourceExhaustedError(absl::StrCat(limits_.max_workers, " workers are registered and alive, the most this "
                                                     "coordinator keeps (mapd --max-workers); try again when one is lost"));
  }
  const double now = clock_->NowUnixSeconds();
  v1::Worker w;
  w.set_id(absl::StrCat("w-", next_));
  w.set_hostname(r.hostname());
  *w.mutable_devices() = r.devices();
  w.set_state(v1::ALIVE);
  w.set_registered_unix_seconds(now);
  w.set_last_heartbeat_unix_seconds(now);
  w.set_metrics_address(r.metrics_address());
  w.set_shard_address(r.shard_address());
  if (profile) *w.mutable_profile() = *std::move(profile);
  std::random_device random;
  const std::string session = absl::StrFormat("%08x%08x%08x%08x", random(), random(), random(), random());
  sessions_[next_] = session;
  workers_[next_++] = w;
  v1::RegisterWorkerResponse out;
  out.set_worker_id(w.id());
  out.set_session(session);
  out.set_lease_seconds(options_.lease_seconds);
  out.set_heartbeat_seconds(options_.heartbeat_seconds);
  return out;
}

absl::Status WorkerRegistry::CheckSession(const std::string& id, const std::string& session) const {
  absl::MutexLock lock(&mu_);
  return CheckSessionLocked(id, session);
}

absl::Status WorkerRegistry::CheckSessionLocked(const std::string& id, const std::string& session) const {
  auto it = sessions_.find(NumberOf(id));
  if (it == sessions_.end()) return absl::NotFoundError(absl::StrCat("no worker '", id, "'; register again"));
  if (session.empty()) return absl::NotFoundError(absl::StrCat("a call as worker '", id, "' without its session; register first"));
  if (session != it->second) {
    return absl::NotFoundError(absl::StrCat("worker id '", id, "' belongs to another registration now (the coordinator restarted?); register again"));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::HeartbeatResponse> WorkerRegistry::Heartbeat(const std::string& id, const std::string& session) {
  absl::MutexLock lock(&mu_);
  if (auto st = CheckSessionLocked(id, session); !st.ok()) return st;
  auto it = workers_.find(NumberOf(id));
  if (it->second.state() == v1::LOST) {
    return absl::FailedPreconditionError(absl::StrCat("worker '", id, "' was declared lost (no heartbeat for ",
                                                      options_.lease_seconds, " s); register again"));
  }
  it->second.set_last_heartbeat_unix_seconds(clock_->NowUnixSeconds());
  v1::HeartbeatResponse out;
  out.set_lease_seconds(options_.lease_seconds);
  return out;
}

std::vector<std::string> WorkerRegistry::ExpireLeases() {
  absl::MutexLock lock(&mu_);
  const double now = clock_->NowUnixSeconds();
  std::vector<std::string> lost;
  for (auto it = workers_.begin(); it != workers_.end();) {
    v1::Worker& w = it->second;
    const double silent = now - w.last_heartbeat_unix_seconds();
    if (w.state() == v1::ALIVE && silent > options_.lease_seconds) {
      w.set_state(v1::LOST);
      lost.push_back(w.id());
    }
    if (w.state() == v1::LOST && silent > options_.lease_seconds + limits_.lost_retention_seconds) {
      sessions_.erase(it->first);
      it = workers_.erase(it);
    } else {
      ++it;
    }
  }
  return lost;
}

bool WorkerRegistry::DropLongestLostLocked() {
  auto longest = workers_.end();
  for (auto it = workers_.begin(); it != workers_.end(); ++it) {
    if (it->second.state() != v1::LOST) continue;
    if (longest == workers_.end() || it->second.last_heartbeat_unix_seconds() < longest->second.last_heartbeat_unix_seconds()) {
      longest = it;
    }
  }
  if (longest == workers_.end()) return false;
  sessions_.erase(longest->first);
  workers_.erase(longest);
  return true;
}

std::vector<v1::Worker> WorkerRegistry::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::Worker> out;
  for (const auto& [n, w] : workers_) out.push_back(w);
  return out;
}

}  // namespace mapd

#include "server/workers/worker_registry.h"

#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace mapd {

absl::Status LeaseOptions::Validate() const {
  if (!(heartbeat_seconds > 0) || !(lease_seconds > heartbeat_seconds)) {
    return absl::InvalidArgumentError(absl::StrCat("lease ", lease_seconds, " s and heartbeat ", heartbeat_seconds,
                                                   " s: the heartbeat must be positive and shorter than the lease"));
  }
  return absl::OkStatus();
}

namespace {
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
  for (const auto& d : r.devices()) {
    if (d.name().empty() || d.memory_bytes() <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("worker on '", r.hostname(), "': device '", d.name(), "' with ",
                                                     d.memory_bytes(), " bytes; give a name and its memory"));
    }
  }
  absl::MutexLock lock(&mu_);
  const double now = clock_->NowUnixSeconds();
  v1::Worker w;
  w.set_id(absl::StrCat("w-", next_));
  w.set_hostname(r.hostname());
  *w.mutable_devices() = r.devices();
  w.set_state(v1::ALIVE);
  w.set_registered_unix_seconds(now);
  w.set_last_heartbeat_unix_seconds(now);
  w.set_metrics_address(r.metrics_address());
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
  if (!session.empty() && session != it->second) {
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
  for (auto& [n, w] : workers_) {
    if (w.state() == v1::ALIVE && now - w.last_heartbeat_unix_seconds() > options_.lease_seconds) {
      w.set_state(v1::LOST);
      lost.push_back(w.id());
    }
  }
  return lost;
}

std::vector<v1::Worker> WorkerRegistry::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::Worker> out;
  for (const auto& [n, w] : workers_) out.push_back(w);
  return out;
}

}  // namespace mapd

// The worker daemon's link to the coordinator (DESIGN §9): register this machine's devices, keep
// the lease alive with heartbeats, and register again when the coordinator has forgotten or
// declared it lost. Heartbeat responses carry assignments — a job's ranks to run here, started as
// JobRunners — and the jobs to stop. Retries only transient failures (IsTransient: UNAVAILABLE —
// the coordinator is not up yet; DEADLINE_EXCEEDED; CANCELLED — it shut down with the call in
// flight), so it rides out a coordinator restart and registers again; anything else ends the
// agent with the coordinator's status.
#ifndef MAPD_WORKER_DAEMON_AGENT_H_
#define MAPD_WORKER_DAEMON_AGENT_H_

#include <atomic>
#include <chrono>
#include <map>
#include <optional>
#include <memory>
#include <set>
#include <utility>
#include <string>
#include <vector>

#include <grpcpp/security/credentials.h>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/metrics/metrics.h"
#include "proto/mapd/v1/workers.grpc.pb.h"
#include "worker/daemon/job_runner.h"

namespace mapd {

struct AgentOptions {
  std::string coordinator;      // host:port of mapd
  std::string token;            // its bearer token
  std::string tls_ca_file;      // PEM roots to check a TLS coordinator with; empty: plaintext
  std::string hostname;         // shown by `mapctl workers`
  std::vector<v1::Device> devices;  // what it offers (local_devices.h)
  // Its host as measured (host_profile.h), sent with every registration; absent: none.
  std::optional<v1::DeviceProfile> profile;
  std::string metrics_address;  // host:port of this worker's /metrics, told to the coordinator
  std::string shard_address;    // host:port of its shard service (worker/shards), told likewise; empty: none
  JobRunnerOptions runner;      // where and how assigned ranks run
  // A finished job's series (labelled job_id) stay on /metrics this long — long enough for
  // Prometheus to scrape the last values — and are then dropped, so a long-lived worker's series
  // do not grow with every job. Counters without a job (jobs_total, ...) stay.
  double metrics_retention_seconds = 300;
  absl::Status Validate() const;
};

class WorkerAgent {
 public:
  // `metrics` must outlive the agent (it counts registrations, heartbeats and jobs).
  WorkerAgent(AgentOptions options, MetricsRegistry* metrics);
  ~WorkerAgent();
  // Registers, then heartbeats until Stop(); returns OK when stopped (its ranks stopped too), or
  // the error that ended it.
  absl::Status Run();
  void Stop() { stop_ = true; }
  std::string worker_id() const;

 private:
  absl::Status Register();
  // Fencing: the coordinator ended this registration (a heartbeat answered NOT_FOUND or
  // FAILED_PRECONDITION: lost past its lease — a paused or partitioned worker — or forgotten by a
  // restart) and has already given its jobs' parts to other attempts; the ranks it still runs
  // belong to none, so they are stopped, and waited for, before the worker registers again.
  void StopFencedRanks();
  // A new channel to the coordinator with creds_ (at start, and when heartbeats have failed for
  // a while).
  void Connect();
  // Sets a heartbeat's or report's worker_id and session from the current registration.
  template <typename Request>
  void Identify(Request& req) const;
  std::shared_ptr<v1::WorkerService::Stub> Stub() const;
  // Starts the assignments not seen before, stops the jobs named, forgets finished runners.
  void Apply(const v1::HeartbeatResponse& response);
  // Drops the series of jobs that ended here more than metrics_retention_seconds ago.
  void DropOldJobSeries();
  // JobRunner's ReportFn: Report with retries of transient failures; true: stop the ranks.
  bool SendReport(const v1::ReportRequest& report);

  AgentOptions options_;
  MetricsRegistry* metrics_;
  std::shared_ptr<grpc::ChannelCredentials> creds_;  // set once in Run
  std::shared_ptr<v1::WorkerService::Stub> stub_ ABSL_GUARDED_BY(mu_);  // replaced by Connect
  std::atomic<bool> stop_{false};
  mutable absl::Mutex mu_;
  std::string worker_id_ ABSL_GUARDED_BY(mu_);
  std::string session_ ABSL_GUARDED_BY(mu_);  // the registration's (RegisterWorkerResponse.session)
  double heartbeat_seconds_ = 1;
  std::map<int64_t, std::unique_ptr<JobRunner>> runners_;  // heartbeat thread only
  std::set<std::pair<int64_t, int>> seen_;                 // every (job, attempt) assigned here: started once
  std::map<int64_t, std::chrono::steady_clock::time_point> ended_;  // jobs whose runner ended here, and when
};

}  // namespace mapd

#endif  // MAPD_WORKER_DAEMON_AGENT_H_

// The coordinator's gRPC server: the job store (SQLite, or memory when no path is given), the
// job manager, the worker registry, the dispatcher and the services (jobs, planner, workers),
// with grpc.health.v1, bearer-token auth, optional TLS and the /metrics endpoint.
#ifndef MAPD_SERVER_API_SERVER_H_
#define MAPD_SERVER_API_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "common/metrics/http_exporter.h"
#include "common/metrics/metrics.h"
#include "common/rpc/auth.h"
#include "server/api/job_service.h"
#include "server/api/planner_service.h"
#include "server/api/worker_service.h"
#include "server/dispatch/dispatcher.h"
#include "server/jobs/admitted_plans.h"
#include "server/jobs/job_manager.h"
#include "server/store/job_store.h"

namespace mapd {

struct ServerOptions {
  // host:port to listen on; port 0 picks a free one (tests). Default: loopback only.
  std::string listen = "127.0.0.1:7070";
  // The SQLite database of jobs and events (WAL mode); empty: in memory (lost on exit).
  std::string store_path;
  // The bearer token every client RPC must carry (jobs, plans, listing workers; required: see
  // LoadToken).
  std::string token;
  // The bearer token workers' calls must carry (Register, Heartbeat, Report): a credential of
  // their own, so that a client cannot pose as a worker. Empty: this coordinator takes no
  // workers (every such call is UNAUTHENTICATED). Must differ from `token`.
  std::string worker_token;
  // PEM files; both or neither. Without them the server speaks plaintext.
  std::string tls_cert_file, tls_key_file;
  // Workers' leases and heartbeat period (worker_registry.h).
  LeaseOptions lease;
  // What a worker's registration may claim, and how many are kept (worker_registry.h).
  RegistrationLimits registrations;
  // Plan each submitted job before queueing it (admission.h); off: queue every valid spec.
  bool admit = true;
  // host:port of the Prometheus /metrics endpoint (port 0: a free one); empty: no endpoint.
  std::string metrics_listen;
  // Running jobs on workers (dispatcher.h). Off: jobs stay queued (tests of the queue alone).
  bool dispatch = true;
  DispatchOptions dispatch_options;
  // Watch streams open at once, in all and from one client host (watch_stream.h); one more is
  // RESOURCE_EXHAUSTED. A stream holds no thread while it waits, only a little memory.
  int max_watch_streams = 1024;
  int max_watch_streams_per_client = 256;
  // The most threads the gRPC server runs its other calls on; a call that finds none free is
  // RESOURCE_EXHAUSTED (transient: mapctl and mapd-worker retry it).
  int max_threads = 512;
  // Searches (Submit's admission, Plan, Profile) run at once; a call waits for a place at most
  // `plan_wait_seconds` (or its deadline), then is RESOURCE_EXHAUSTED (plan_gate.h).
  int max_concurrent_plans = 2;
  // Finished jobs kept (job_manager.h), pruned every `prune_period_seconds` on the lease thread.
  RetentionOptions retention;
  // What a job (or a Plan/Profile request) may ask for (job_spec.h).
  SpecLimits spec_limits;
  // The largest request the server reads (a submitted graph with its weights inline).
  int64_t max_message_bytes = int64_t{256} << 20;
  double prune_period_seconds = 10;
  double plan_wait_seconds = 60;
  // What the plans admission made may take in memory while their jobs wait (admitted_plans.h):
  // a job whose plan was dropped past it is planned again when it starts (mapd
  // --admitted-plan-bytes; 0 keeps none).
  int64_t admitted_plan_bytes = int64_t{512} << 20;
  // How often the dispatcher looks at the queue and the leases.
  double dispatch_period_seconds = 0.2;

  absl::Status Validate() const;
};

class MapdServer {
 public:
  static absl::StatusOr<std::unique_ptr<MapdServer>> Start(const ServerOptions& options);
  ~MapdServer();

  int port() const { return port_; }
  int metrics_port() const { return exporter_ ? exporter_->port() : 0; }
  MetricsRegistry& metrics() { return metrics_; }
  JobManager& jobs() { return *jobs_; }
  WorkerRegistry& workers() { return *workers_; }
  PlanGate& plans() { return *plans_; }
  // Stops taking calls, lets running ones finish for up to `grace_seconds`, then cancels them.
  void Shutdown(double grace_seconds = 5);
  void Wait();

 private:
  MapdServer() = default;
  std::unique_ptr<JobStore> store_;
  std::unique_ptr<JobManager> jobs_;
  std::unique_ptr<TokenAuth> auth_, worker_auth_;
  std::unique_ptr<PlanGate> plans_;
  std::unique_ptr<JobServiceImpl> job_service_;
  std::unique_ptr<PlannerServiceImpl> planner_service_;
  std::unique_ptr<WorkerRegistry> workers_;
  std::unique_ptr<AdmittedPlans> admitted_;  // admission's plans, for the dispatcher
  std::unique_ptr<Dispatcher> dispatcher_;
  std::unique_ptr<WorkerServiceImpl> worker_service_;
  std::thread lease_thread_;     // expires workers' leases
  std::thread dispatch_thread_;  // Dispatcher::Watch
  std::thread start_thread_;     // Dispatcher::StartPending (plans new jobs)
  MetricsRegistry metrics_;
  std::unique_ptr<MetricsExporter> exporter_;
  // Refreshes the gauges read from the managers (jobs by state, workers) before a scrape.
  void Collect();
  absl::Notification stop_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  bool shut_down_ = false;
};

}  // namespace mapd

#endif  // MAPD_SERVER_API_SERVER_H_

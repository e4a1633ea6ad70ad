#include "server/api/server.h"

#include <grpcpp/health_check_service_interface.h>

#include <chrono>
#include <map>
#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/metrics/build_info.h"
#include "server/api/event_log.h"
#include "server/jobs/admission.h"

namespace mapd {

namespace {
absl::StatusOr<std::string> ReadPem(const std::string& path, const char* flag) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(flag, " ", path, ": cannot read it"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace

absl::Status ServerOptions::Validate() const {
  if (listen.empty() || listen.find(':') == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("--listen '", listen, "': give host:port (port 0 picks a free one)"));
  }
  if (token.empty()) return absl::FailedPreconditionError("no token: give --token-file FILE or set MAPD_TOKEN");
  if (!worker_token.empty() && worker_token == token) {
    return absl::InvalidArgumentError("the workers' token is the clients' token: give workers a token of their own "
                                      "(--worker-token-file), so that no client can pose as a worker");
  }
  if (auto st = lease.Validate(); !st.ok()) return st;
  if (auto st = retention.Validate(); !st.ok()) return st;
  if (auto st = spec_limits.Validate(); !st.ok()) return st;
  if (max_message_bytes < (int64_t{1} << 20) || max_message_bytes > (int64_t{2} << 30) - 1) {
    return absl::InvalidArgumentError(absl::StrCat("--max-message-bytes ", max_message_bytes, ": give 1MiB to 2GiB"));
  }
  if (auto st = registrations.Validate(); !st.ok()) return st;
  if (max_watch_streams < 1 || max_watch_streams_per_client < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--max-watch-streams ", max_watch_streams, " and --max-watch-streams-per-client ",
                                                   max_watch_streams_per_client, ": give at least 1 of each"));
  }
  if (max_concurrent_plans < 1 || !(plan_wait_seconds >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat("--max-concurrent-plans ", max_concurrent_plans, " and --plan-wait-seconds ",
                                                   plan_wait_seconds, ": give at least 1 plan and a wait of 0 or more"));
  }
  if (admitted_plan_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--admitted-plan-bytes ", admitted_plan_bytes, ": give 0 (keep none) or more"));
  }
  if (max_threads < 4) return absl::InvalidArgumentError(absl::StrCat("--max-threads ", max_threads, ": give at least 4"));
  if (auto st = dispatch_options.Validate(); !st.ok()) return st;
  if (dispatch_period_seconds <= 0) return absl::InvalidArgumentError("the dispatch period must be positive");
  if (tls_cert_file.empty() != tls_key_file.empty()) {
    return absl::InvalidArgumentError("TLS needs both --tls-cert and --tls-key (or neither, for plaintext)");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<MapdServer>> MapdServer::Start(const ServerOptions& options) {
  if (auto st = options.Validate(); !st.ok()) return st;
  std::unique_ptr<MapdServer> s(new MapdServer());
  if (options.store_path.empty()) {
    s->store_ = NewMemoryJobStore();
  } else {
    auto store = OpenSqliteJobStore(options.store_path);
    if (!store.ok()) return store.status();
    s->store_ = *std::move(store);
  }
  auto jobs = JobManager::Create(s->store_.get(), SystemClock());
  if (!jobs.ok()) return jobs.status();
  s->jobs_ = *std::move(jobs);
  s->jobs_->SetSpecLimits(options.spec_limits);
  s->jobs_->SetEventSink(LogJobEvent);  // every lifecycle event as one line of mapd's log
  // Metrics (DESIGN §10): what the coordinator knows; steps, throughput and measured memory come
  // from the workers' endpoints.
  MetricsRegistry& m = s->metrics_;
  for (auto st : {m.Gauge("mapd_up", "1 while the coordinator serves."),
                  m.Gauge("mapd_jobs", "Jobs by state."),
                  m.Gauge("mapd_workers", "Registered workers by state (ALIVE: lease current; LOST: lease ran out)."),
                  m.Counter("mapd_job_submissions_total", "Submissions by outcome: admitted (queued) or refused."),
                  m.Histogram("mapd_admission_seconds", "Time to build, verify and plan a submitted job (the planner's search).",
                              {0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60}),
                  m.Gauge("mapd_job_predicted_peak_bytes", "The plan's predicted peak memory per device, per job."),
                  m.Gauge("mapd_job_devices", "Devices each unfinished job runs on now (an elastic job's after it shrank or grew)."),
                  m.Counter("mapd_plan_searches_total",
                            "Plans searched for jobs, by phase: admission (one per submitted job), dispatch (a job planned again "
                            "as it starts or resumes: after a coordinator restart, on other devices, or its admitted plan dropped)."),
                  m.Gauge("mapd_admitted_plans_bytes", "What the plans admission kept for waiting jobs take in memory (serialized).")}) {
    if (!st.ok()) return st;
  }
  m.Set("mapd_up", {}, 1);
  ExportBuildInfo(&m, "coordinator");
  // Every outcome from the start, so rate() and increase() see the first one.
  for (const char* outcome : {"admitted", "refused"}) m.Add("mapd_job_submissions_total", {{"outcome", outcome}}, 0);
  for (const char* phase : {"admission", "dispatch"}) m.Add("mapd_plan_searches_total", {{"phase", phase}}, 0);
  s->admitted_ = std::make_unique<AdmittedPlans>(options.admitted_plan_bytes);
  if (options.admit) {
    MapdServer* raw = s.get();
    // (An elastic job resumes on other devices from checkpoints on shared storage, or from the
    // copies peer workers keep without it: dispatcher_shards.cc.)
    s->jobs_->SetAdmission([raw](const v1::JobSpec& spec, v1::Job& job) -> absl::StatusOr<AdmittedFn> {
      const auto start = std::chrono::steady_clock::now();
      auto admitted = AdmitJob(raw->dispatcher_->CostedSpec(spec));
      raw->metrics_.Add("mapd_plan_searches_total", {{"phase", "admission"}});
      raw->metrics_.Observe("mapd_admission_seconds", {},
                            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      raw->metrics_.Add("mapd_job_submissions_total", {{"outcome", admitted.ok() ? "admitted" : "refused"}});
      if (!admitted.ok()) return admitted.status();
      job.set_plan_summary(admitted->plan_summary);
      job.set_predicted_peak_bytes(admitted->predicted_peak_bytes);
      job.set_predicted_step_seconds(admitted->predicted_step_seconds);
      return AdmittedFn([raw, plan = admitted->plan](int64_t id) { raw->admitted_->Put(id, plan); });
    });
  }
  s->auth_ = std::make_unique<TokenAuth>(options.token);
  s->plans_ = std::make_unique<PlanGate>(options.max_concurrent_plans, absl::Seconds(options.plan_wait_seconds));
  s->job_service_ = std::make_unique<JobServiceImpl>(s->jobs_.get(), s->auth_.get(), s->plans_.get(), options.max_watch_streams,
                                                     options.max_watch_streams_per_client);
  s->planner_service_ = std::make_unique<PlannerServiceImpl>(s->auth_.get(), s->plans_.get(), options.spec_limits,
                                                             [raw = s.get()](const v1::JobSpec& spec) { return raw->dispatcher_->CostedSpec(spec); });
  s->workers_ = std::make_unique<WorkerRegistry>(options.lease, SystemClock(), options.registrations);
  {
    MapdServer* raw = s.get();
    // Every search the dispatcher makes is one admission did not save it (counted by phase).
    PlanJobFn plan = [raw](const v1::JobSpec& spec) {
      raw->metrics_.Add("mapd_plan_searches_total", {{"phase", "dispatch"}});
      return PlanJob(spec);
    };
    s->dispatcher_ = std::make_unique<Dispatcher>(s->jobs_.get(), s->workers_.get(), options.dispatch_options, plan, s->admitted_.get());
  }
  s->worker_auth_ = std::make_unique<TokenAuth>(
      options.worker_token, "mapd-worker: --token-file or MAPD_WORKER_TOKEN, the coordinator's worker token",
      "this coordinator takes no workers: start mapd with --worker-token-file (or MAPD_WORKER_TOKEN)");
  s->worker_service_ = std::make_unique<WorkerServiceImpl>(s->workers_.get(), s->dispatcher_.get(), s->worker_auth_.get(),
                                                           s->auth_.get());

  std::shared_ptr<grpc::ServerCredentials> creds = grpc::InsecureServerCredentials();
  if (!options.tls_cert_file.empty()) {
    auto cert = ReadPem(options.tls_cert_file, "--tls-cert");
    if (!cert.ok()) return cert.status();
    auto key = ReadPem(options.tls_key_file, "--tls-key");
    if (!key.ok()) return key.status();
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({*key, *cert});
    creds = grpc::SslServerCredentials(ssl);
  }
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  grpc::ResourceQuota quota("mapd");
  quota.SetMaxThreads(options.max_threads);
  builder.SetMaxReceiveMessageSize(static_cast<int>(options.max_message_bytes));
  builder.SetResourceQuota(quota);
  // The port is this coordinator's alone: gRPC sets SO_REUSEPORT by default, under which a
  // second mapd on the same port starts too and the kernel splits the clients between them.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(options.listen, creds, &s->port_);
  builder.RegisterService(s->job_service_.get());
  builder.RegisterService(s->planner_service_.get());
  builder.RegisterService(s->worker_service_.get());
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || s->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options.listen, ": the port is taken (another mapd?) or the host is ",
                                               "not an address of this machine; give another --listen (port 0: any free one)"));
  }
  if (!options.metrics_listen.empty()) {
    MapdServer* raw = s.get();
    auto exporter = MetricsExporter::Start(options.metrics_listen, &s->metrics_, [raw] { raw->Collect(); });
    if (!exporter.ok()) return exporter.status();
    s->exporter_ = *std::move(exporter);
  }
  // Leases are checked four times per heartbeat period.
  const double period = options.lease.heartbeat_seconds / 4;
  MapdServer* raw = s.get();
  s->lease_thread_ = std::thread([raw, period, retention = options.retention, prune_every = options.prune_period_seconds] {
    absl::Time next_prune = absl::Now();
    do {
      for (const std::string& lost : raw->workers_->ExpireLeases()) {
        LogLine("worker_lost", {{"worker", lost}, {"message", "no heartbeat within its lease; its jobs' parts are lost"}});
      }
      if (absl::Now() >= next_prune) {
        next_prune = absl::Now() + absl::Seconds(prune_every);
        if (auto pruned = raw->jobs_->PruneFinished(retention); !pruned.ok()) {
          std::cerr << "mapd: pruning finished jobs: " << pruned.status() << "\n";
        }
      }
    } while (!raw->stop_.WaitForNotificationWithTimeout(absl::Seconds(period)));
  });
  if (options.dispatch) {
    const double every = options.dispatch_period_seconds;
    // Two threads: planning a new job (seconds for a large model) must not delay noticing a
    // lost worker or a cancel.
    s->dispatch_thread_ = std::thread([raw, every] {
      do {
        raw->dispatcher_->Watch();
      } while (!raw->stop_.WaitForNotificationWithTimeout(absl::Seconds(every)));
    });
    s->start_thread_ = std::thread([raw, every] {
      do {
        raw->dispatcher_->StartPending();
      } while (!raw->stop_.WaitForNotificationWithTimeout(absl::Seconds(every)));
    });
  }
  return s;
}

void MapdServer::Shutdown(double grace_seconds) {
  exporter_.reset();
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (lease_thread_.joinable()) lease_thread_.join();
  if (dispatch_thread_.joinable()) dispatch_thread_.join();
  if (start_thread_.joinable()) start_thread_.join();
  if (shut_down_ || server_ == nullptr) return;
  shut_down_ = true;
  server_->Shutdown(std::chrono::system_clock::now() +
                    std::chrono::milliseconds(static_cast<int64_t>(grace_seconds * 1000)));
}

void MapdServer::Collect() {
  std::map<std::string, double> by_state;
  for (int st = v1::PENDING; st <= v1::RESTARTING; ++st) by_state[v1::JobState_Name(static_cast<v1::JobState>(st))] = 0;
  metrics_.Clear("mapd_job_predicted_peak_bytes");
  metrics_.Clear("mapd_job_devices");
  for (const v1::Job& job : jobs_->List()) {
    ++by_state[v1::JobState_Name(job.state())];
    if (IsFinished(job.state())) continue;
    const std::string id = std::to_string(job.id());
    if (job.predicted_peak_bytes() > 0) metrics_.Set("mapd_job_predicted_peak_bytes", {{"job_id", id}}, static_cast<double>(job.predicted_peak_bytes()));
    if (job.devices() > 0) metrics_.Set("mapd_job_devices", {{"job_id", id}}, job.devices());
  }
  for (const auto& [state, n] : by_state) metrics_.Set("mapd_jobs", {{"state", state}}, n);
  metrics_.Set("mapd_admitted_plans_bytes", {}, static_cast<double>(admitted_->bytes()));
  std::map<std::string, double> workers = {{"ALIVE", 0}, {"LOST", 0}};
  for (const v1::Worker& w : workers_->List()) ++workers[v1::WorkerState_Name(w.state())];
  for (const auto& [state, n] : workers) metrics_.Set("mapd_workers", {{"state", state}}, n);
}

void MapdServer::Wait() {
  if (server_ != nullptr) server_->Wait();
}

MapdServer::~MapdServer() { Shutdown(0); }

}  // namespace mapd

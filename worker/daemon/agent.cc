#include "worker/daemon/agent.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/rpc/auth.h"
#include "common/rpc/grpc_status.h"

namespace mapd {

// Fencing can be compiled out, for one build only: tests/multihost's `mapd-worker-unfenced`, a
// deliberately broken worker that keeps the ranks of an ended registration and of jobs the
// coordinator says it no longer runs, to show that the fault harness catches it.
#ifdef MAPD_BREAK_FENCING_FOR_TESTS
constexpr bool kFencing = false;
#else
constexpr bool kFencing = true;
#endif

absl::Status AgentOptions::Validate() const {
  if (coordinator.empty()) return absl::InvalidArgumentError("no coordinator: give --coordinator host:port or set MAPD_ADDRESS");
  if (token.empty()) return absl::FailedPreconditionError("no token: give --token-file FILE or set MAPD_WORKER_TOKEN (the coordinator's workers' token)");
  if (devices.empty()) return absl::InvalidArgumentError("no devices to offer: give --cpu-devices or --cuda-devices");
  if (metrics_retention_seconds < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--metrics-retention ", metrics_retention_seconds, ": give 0 seconds or more"));
  }
  if (runner.work_dir.empty()) return absl::InvalidArgumentError("--work-dir: give a directory for the ranks' files and checkpoints");
  if (runner.rank_program.empty() || access(runner.rank_program.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("--rank-program '", runner.rank_program,
                                                      "': not an executable mapd-rank (it runs the ranks); install it beside mapd-worker or give its path"));
  }
  return absl::OkStatus();
}

WorkerAgent::WorkerAgent(AgentOptions options, MetricsRegistry* metrics) : options_(std::move(options)), metrics_(metrics) {
  DeclareJobMetrics(metrics_);
  metrics_->Set("mapd_worker_ranks_running", {}, 0);
  (void)metrics_->Counter("mapd_worker_registrations_total", "Registrations with the coordinator (again after a lost lease).");
  (void)metrics_->Counter("mapd_worker_heartbeats_total", "Heartbeats sent, by outcome (ok, transient, rejected).");
  (void)metrics_->Gauge("mapd_worker_devices", "Devices this worker offers.");
  (void)metrics_->Counter("mapd_worker_fenced_total",
                          "Jobs whose ranks this worker stopped because the coordinator had ended its registration (fencing).");
  metrics_->Add("mapd_worker_fenced_total", {}, 0);
  // Every series from the start (at 0), so rate() and increase() see the first event.
  metrics_->Add("mapd_worker_registrations_total", {}, 0);
  for (const char* outcome : {"ok", "transient", "rejected"}) metrics_->Add("mapd_worker_heartbeats_total", {{"outcome", outcome}}, 0);
  metrics_->Set("mapd_worker_devices", {}, static_cast<double>(options_.devices.size()));
}

WorkerAgent::~WorkerAgent() { runners_.clear(); }

std::string WorkerAgent::worker_id() const {
  absl::MutexLock lock(&mu_);
  return worker_id_;
}

template <typename Request>
void WorkerAgent::Identify(Request& req) const {
  absl::MutexLock lock(&mu_);  // id and session of one registration
  req.set_worker_id(worker_id_);
  req.set_session(session_);
}

bool WorkerAgent::SendReport(const v1::ReportRequest& report) {
  v1::ReportRequest req = report;
  double backoff = 0.2;
  for (int attempt = 0; attempt < 6; ++attempt) {
    // The current registration (it may change while a restarted coordinator is retried).
    Identify(req);
    grpc::ClientContext ctx;
    AuthorizeCall(ctx, options_.token, 10);
    v1::ReportResponse out;
    const grpc::Status st = Stub()->Report(&ctx, req, &out);
    if (st.ok() && options_.runner.shards != nullptr) options_.runner.shards->Committed(report.job_id(), out.committed_step());
    if (st.ok()) return kFencing && out.cancel();
    if (st.error_code() == grpc::StatusCode::NOT_FOUND) return kFencing;  // the coordinator does not run this job here
    if (!IsTransient(st)) {
      std::cerr << "mapd-worker: report on job " << req.job_id() << " refused: " << st.error_message() << "\n";
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int64_t>(backoff * 1000)));
    backoff = std::min(backoff * 2, 2.0);
  }
  std::cerr << "mapd-worker: could not report on job " << req.job_id() << " (coordinator unavailable)\n";
  return false;
}

void WorkerAgent::Apply(const v1::HeartbeatResponse& response) {
  for (const v1::ShardGrant& g : response.shard_grants()) {
    if (options_.runner.shards == nullptr || g.secret().empty()) continue;
    options_.runner.shards->Allow(g.job_id(), g.secret());
    options_.runner.shards->Committed(g.job_id(), g.committed_step());
  }
  for (int64_t id : response.cancel_job_ids()) {
    if (auto it = runners_.find(id); kFencing && it != runners_.end()) it->second->Cancel();
  }
  for (const v1::RankAssignment& a : response.assignments()) {
    if (!seen_.insert({a.job_id(), a.attempt()}).second) continue;
    if (auto old = runners_.find(a.job_id()); old != runners_.end()) old->second->Cancel();  // an earlier attempt
    std::cout << "mapd-worker: job " << a.job_id() << (a.resume_step() > 0 ? absl::StrCat(" (from step ", a.resume_step(), ")") : "")
              << ": starting rank(s) " << a.ranks(0)
              << (a.ranks_size() > 1 ? absl::StrCat("-", a.ranks(a.ranks_size() - 1)) : "") << " (" << a.plan() << ")" << std::endl;
    JobRunnerOptions runner_options = options_.runner;
    runner_options.worker_id = worker_id();  // the `worker` label of the job's series
    auto runner = std::make_unique<JobRunner>(a, std::move(runner_options), [this](const v1::ReportRequest& r) { return SendReport(r); }, metrics_);
    runner->Start();
    runners_[a.job_id()] = std::move(runner);
    ended_.erase(a.job_id());  // its series are this attempt's now
  }
  int ranks = 0;
  for (auto it = runners_.begin(); it != runners_.end();) {
    if (it->second->done()) {
      ended_[it->first] = std::chrono::steady_clock::now();
      it = runners_.erase(it);
    } else {
      ranks += it->second->ranks();
      ++it;
    }
  }
  metrics_->Set("mapd_worker_ranks_running", {}, ranks);
  if (response.has_shard_keep() && options_.runner.shards != nullptr) {
    // The shards of jobs the coordinator has ended (and that no rank here runs) go.
    std::set<int64_t> keep(response.shard_keep().job_ids().begin(), response.shard_keep().job_ids().end());
    for (const auto& [id, runner] : runners_) keep.insert(id);
    options_.runner.shards->Retain(keep);
  }
}

void WorkerAgent::DropOldJobSeries() {
  const auto now = std::chrono::steady_clock::now();
  for (auto it = ended_.begin(); it != ended_.end();) {
    if (now - it->second < std::chrono::duration<double>(options_.metrics_retention_seconds)) {
      ++it;
      continue;
    }
    metrics_->RemoveSeries("job_id", std::to_string(it->first));
    it = ended_.erase(it);
  }
}

void WorkerAgent::StopFencedRanks() {
  if (runners_.empty() || !kFencing) return;
  std::cout << "mapd-worker: the coordinator ended registration " << worker_id() << " (lost past its lease, or forgotten by a restart); "
            << "stopping its ranks of " << runners_.size() << " job(s) before registering again" << std::endl;
  for (auto& [id, runner] : runners_) runner->Cancel();
  metrics_->Add("mapd_worker_fenced_total", {}, static_cast<double>(runners_.size()));
  runners_.clear();  // each waits for its ranks to be stopped
  metrics_->Set("mapd_worker_ranks_running", {}, 0);
}

absl::Status WorkerAgent::Register() {
  v1::RegisterWorkerRequest req;
  req.set_hostname(options_.hostname);
  req.set_metrics_address(options_.metrics_address);
  req.set_shard_address(options_.shard_address);
  for (const v1::Device& d : options_.devices) *req.add_devices() = d;
  if (options_.profile) *req.mutable_profile() = *options_.profile;
  // The coordinator may not be up yet (or be restarting): retry transient failures with backoff,
  // until stopped.
  double backoff = 0.1;
  while (!stop_) {
    grpc::ClientContext ctx;
    AuthorizeCall(ctx, options_.token, 10);
    v1::RegisterWorkerResponse out;
    const grpc::Status st = Stub()->Register(&ctx, req, &out);
    if (st.ok()) {
      {
        absl::MutexLock lock(&mu_);
        worker_id_ = out.worker_id();
        session_ = out.session();
      }
      heartbeat_seconds_ = out.heartbeat_seconds();
      metrics_->Add("mapd_worker_registrations_total", {});
      std::cout << "mapd-worker: registered as " << out.worker_id() << " with " << options_.coordinator << " (" << options_.devices.size()
                << " device(s); heartbeat every " << heartbeat_seconds_ << " s, lease " << out.lease_seconds() << " s)" << std::endl;
      return absl::OkStatus();
    }
    if (!IsTransient(st)) return FromGrpcStatus(st);
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int64_t>(backoff * 1000)));
    backoff = std::min(backoff * 2, 2.0);
  }
  return absl::OkStatus();
}

void WorkerAgent::Connect() {
  // Assignments carry the graph and rank programs: allow large ones.
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);
  // A restarted coordinator is found again within seconds (gRPC's default reconnect backoff
  // grows to two minutes).
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  // Its own connection, not one shared with an earlier channel to the same address.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto stub = std::shared_ptr<v1::WorkerService::Stub>(v1::WorkerService::NewStub(grpc::CreateCustomChannel(options_.coordinator, creds_, args)));
  absl::MutexLock lock(&mu_);
  stub_ = std::move(stub);
}

std::shared_ptr<v1::WorkerService::Stub> WorkerAgent::Stub() const {
  absl::MutexLock lock(&mu_);
  return stub_;
}

absl::Status WorkerAgent::Run() {
  if (auto st = options_.Validate(); !st.ok()) return st;
  auto creds = ClientCredentials(options_.tls_ca_file);  // read once: a reconnect reuses them
  if (!creds.ok()) return creds.status();
  creds_ = *std::move(creds);
  Connect();
  if (auto st = Register(); !st.ok()) return st;
  int transient_failures = 0;  // in a row
  while (!stop_) {
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int64_t>(heartbeat_seconds_ * 1000)));
    if (stop_) break;
    DropOldJobSeries();
    grpc::ClientContext ctx;
    AuthorizeCall(ctx, options_.token, heartbeat_seconds_ * 2 + 0.1);
    v1::HeartbeatRequest req;
    Identify(req);
    for (const auto& [id, runner] : runners_) {
      if (!runner->done()) req.add_running_job_ids(id);
    }
    v1::HeartbeatResponse out;
    const grpc::Status st = Stub()->Heartbeat(&ctx, req, &out);
    transient_failures = IsTransient(st) ? transient_failures + 1 : 0;
    if (st.ok()) {
      metrics_->Add("mapd_worker_heartbeats_total", {{"outcome", "ok"}});
      Apply(out);
    } else if (IsTransient(st)) {
      metrics_->Add("mapd_worker_heartbeats_total", {{"outcome", "transient"}});  // try again next period
      // A channel to a coordinator that restarted does not always recover (seen: connected, the
      // server's first frames never read): after a few seconds of failures, a fresh channel.
      if (transient_failures * heartbeat_seconds_ >= 3) {
        transient_failures = 0;
        Connect();
      }
    } else if (st.error_code() == grpc::StatusCode::NOT_FOUND || st.error_code() == grpc::StatusCode::FAILED_PRECONDITION) {
      metrics_->Add("mapd_worker_heartbeats_total", {{"outcome", "rejected"}});
      StopFencedRanks();
      if (auto r = Register(); !r.ok()) return r;  // forgotten or lost: register again
    } else {
      return FromGrpcStatus(st);
    }
  }
  // Stopping: the ranks stop with the daemon (each runner reports them cancelled).
  for (auto& [id, runner] : runners_) runner->Cancel();
  runners_.clear();
  return absl::OkStatus();
}

}  // namespace mapd

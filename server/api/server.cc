#include "server/api/server.h"

#include <grpcpp/health_check_service_interface.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
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
  if (auto st = lease.Validate(); !st.ok()) return st;
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
  if (options.admit) {
    s->jobs_->SetAdmission([](const v1::JobSpec& spec, v1::Job& job) {
      auto admitted = AdmitJob(spec);
      if (!admitted.ok()) return admitted.status();
      job.set_plan_summary(admitted->plan_summary);
      job.set_predicted_peak_bytes(admitted->predicted_peak_bytes);
      return absl::OkStatus();
    });
  }
  s->auth_ = std::make_unique<TokenAuth>(options.token);
  s->job_service_ = std::make_unique<JobServiceImpl>(s->jobs_.get(), s->auth_.get());
  s->workers_ = std::make_unique<WorkerRegistry>(options.lease, SystemClock());
  s->worker_service_ = std::make_unique<WorkerServiceImpl>(s->workers_.get(), s->auth_.get());

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
  builder.AddListeningPort(options.listen, creds, &s->port_);
  builder.RegisterService(s->job_service_.get());
  builder.RegisterService(s->worker_service_.get());
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || s->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options.listen, " (in use, or not an address of this machine?)"));
  }
  // Leases are checked four times per heartbeat period.
  const double period = options.lease.heartbeat_seconds / 4;
  MapdServer* raw = s.get();
  s->lease_thread_ = std::thread([raw, period] {
    do {
      raw->workers_->ExpireLeases();
    } while (!raw->stop_.WaitForNotificationWithTimeout(absl::Seconds(period)));
  });
  return s;
}

void MapdServer::Shutdown(double grace_seconds) {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (lease_thread_.joinable()) lease_thread_.join();
  if (shut_down_ || server_ == nullptr) return;
  shut_down_ = true;
  server_->Shutdown(std::chrono::system_clock::now() +
                    std::chrono::milliseconds(static_cast<int64_t>(grace_seconds * 1000)));
}

void MapdServer::Wait() {
  if (server_ != nullptr) server_->Wait();
}

MapdServer::~MapdServer() { Shutdown(0); }

}  // namespace mapd

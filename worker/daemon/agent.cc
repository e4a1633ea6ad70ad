#include "worker/daemon/agent.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "server/api/grpc_status.h"

namespace mapd {

absl::Status AgentOptions::Validate() const {
  if (coordinator.empty()) return absl::InvalidArgumentError("no coordinator: give --coordinator host:port or set MAPD_ADDRESS");
  if (token.empty()) return absl::FailedPreconditionError("no token: give --token-file FILE or set MAPD_TOKEN (the coordinator's)");
  if (cpu_devices < 1) return absl::InvalidArgumentError(absl::StrCat("--cpu-devices ", cpu_devices, ": give at least 1"));
  if (memory_per_device < 0) return absl::InvalidArgumentError("--memory-per-device must be positive");
  return absl::OkStatus();
}

WorkerAgent::WorkerAgent(AgentOptions options, MetricsRegistry* metrics) : options_(std::move(options)), metrics_(metrics) {
  stub_ = v1::WorkerService::NewStub(grpc::CreateChannel(options_.coordinator, grpc::InsecureChannelCredentials()));
  (void)metrics_->Counter("mapd_worker_registrations_total", "Registrations with the coordinator (again after a lost lease).");
  (void)metrics_->Counter("mapd_worker_heartbeats_total", "Heartbeats sent, by outcome (ok, transient, rejected).");
  (void)metrics_->Gauge("mapd_worker_devices", "Devices this worker offers.");
  metrics_->Set("mapd_worker_devices", {}, options_.cpu_devices);
}

std::string WorkerAgent::worker_id() const { return worker_id_; }

absl::Status WorkerAgent::Register() {
  int64_t memory = options_.memory_per_device;
  if (memory == 0) memory = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE) / options_.cpu_devices;
  v1::RegisterWorkerRequest req;
  req.set_hostname(options_.hostname);
  req.set_metrics_address(options_.metrics_address);
  for (int i = 0; i < options_.cpu_devices; ++i) {
    auto* d = req.add_devices();
    d->set_name(absl::StrCat("cpu:", i));
    d->set_memory_bytes(memory);
  }
  // The coordinator may not be up yet: retry UNAVAILABLE with backoff, until stopped.
  double backoff = 0.1;
  while (!stop_) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + options_.token);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::RegisterWorkerResponse out;
    const grpc::Status st = stub_->Register(&ctx, req, &out);
    if (st.ok()) {
      worker_id_ = out.worker_id();
      heartbeat_seconds_ = out.heartbeat_seconds();
      metrics_->Add("mapd_worker_registrations_total", {});
      std::cout << "mapd-worker: registered as " << worker_id_ << " with " << options_.coordinator << " (" << options_.cpu_devices
                << " device(s); heartbeat every " << heartbeat_seconds_ << " s, lease " << out.lease_seconds() << " s)" << std::endl;
      return absl::OkStatus();
    }
    if (st.error_code() != grpc::StatusCode::UNAVAILABLE) return FromGrpcStatus(st);
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int64_t>(backoff * 1000)));
    backoff = std::min(backoff * 2, 2.0);
  }
  return absl::OkStatus();
}

absl::Status WorkerAgent::Run() {
  if (auto st = options_.Validate(); !st.ok()) return st;
  if (auto st = Register(); !st.ok()) return st;
  while (!stop_) {
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int64_t>(heartbeat_seconds_ * 1000)));
    if (stop_) break;
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + options_.token);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(heartbeat_seconds_ * 2000) + 100));
    v1::HeartbeatRequest req;
    req.set_worker_id(worker_id_);
    v1::HeartbeatResponse out;
    const grpc::Status st = stub_->Heartbeat(&ctx, req, &out);
    if (st.ok()) {
      metrics_->Add("mapd_worker_heartbeats_total", {{"outcome", "ok"}});
    } else if (st.error_code() == grpc::StatusCode::UNAVAILABLE || st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
      metrics_->Add("mapd_worker_heartbeats_total", {{"outcome", "transient"}});  // try again next period
    } else if (st.error_code() == grpc::StatusCode::NOT_FOUND || st.error_code() == grpc::StatusCode::FAILED_PRECONDITION) {
      metrics_->Add("mapd_worker_heartbeats_total", {{"outcome", "rejected"}});
      if (auto r = Register(); !r.ok()) return r;  // forgotten or lost: register again
    } else {
      return FromGrpcStatus(st);
    }
  }
  return absl::OkStatus();
}

}  // namespace mapd

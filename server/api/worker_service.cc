#include "server/api/worker_service.h"

#include "common/rpc/grpc_status.h"

#include "absl/strings/str_cat.h"
#include "server/api/event_log.h"

namespace mapd {

grpc::Status WorkerServiceImpl::Register(grpc::ServerContext* ctx, const v1::RegisterWorkerRequest* req,
                                         v1::RegisterWorkerResponse* out) {
  if (auto st = worker_auth_->Check(*ctx); !st.ok()) return st;
  auto registered = workers_->Register(*req);
  if (registered.ok()) {
    LogLine("worker_registered", {{"worker", registered->worker_id()}, {"host", req->hostname()},
                                  {"devices", absl::StrCat(req->devices_size())}, {"peer", ctx->peer()}});
  } else {
    LogLine("worker_refused", {{"host", req->hostname()}, {"peer", ctx->peer()}, {"code", absl::StatusCodeToString(registered.status().code())},
                               {"message", std::string(registered.status().message())}});
  }
  return Reply(std::move(registered), out);
}

grpc::Status WorkerServiceImpl::Heartbeat(grpc::ServerContext* ctx, const v1::HeartbeatRequest* req, v1::HeartbeatResponse* out) {
  if (auto st = worker_auth_->Check(*ctx); !st.ok()) return st;
  auto lease = workers_->Heartbeat(req->worker_id(), req->session());
  if (lease.ok()) {
    dispatcher_->OnHeartbeat(req->worker_id(), {req->running_job_ids().begin(), req->running_job_ids().end()}, &*lease);
  }
  return Reply(std::move(lease), out);
}

grpc::Status WorkerServiceImpl::Report(grpc::ServerContext* ctx, const v1::ReportRequest* req, v1::ReportResponse* out) {
  if (auto st = worker_auth_->Check(*ctx); !st.ok()) return st;
  // A report under an id that now names another registration is not that worker's: NOT_FOUND
  // (its ranks stop; it registers again at its next heartbeat).
  if (auto st = workers_->CheckSession(req->worker_id(), req->session()); !st.ok()) return ToGrpcStatus(st);
  auto answer = dispatcher_->OnReport(*req);
  if (answer.ok() && !req->store_address().empty()) {  // where the attempt's ranks meet (never its secret)
    LogLine("rendezvous", {{"worker", req->worker_id()}, {"job", absl::StrCat(req->job_id())}, {"attempt", absl::StrCat(req->attempt())},
                           {"store", req->store_address()}});
  }
  if (!answer.ok() && answer.status().code() != absl::StatusCode::kNotFound) {  // (NOT_FOUND: a job ended here; its ranks stop)
    LogLine("report_refused", {{"worker", req->worker_id()}, {"job", absl::StrCat(req->job_id())}, {"attempt", absl::StrCat(req->attempt())},
                               {"code", absl::StatusCodeToString(answer.status().code())}, {"message", std::string(answer.status().message())}});
  }
  return Reply(std::move(answer), out);
}

grpc::Status WorkerServiceImpl::List(grpc::ServerContext* ctx, const v1::ListWorkersRequest*, v1::ListWorkersResponse* out) {
  if (auto st = client_auth_->Check(*ctx); !st.ok()) return st;
  for (const v1::Worker& w : workers_->List()) *out->add_workers() = w;
  return grpc::Status::OK;
}

}  // namespace mapd

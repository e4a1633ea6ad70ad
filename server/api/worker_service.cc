#include "server/api/worker_service.h"

#include "common/rpc/grpc_status.h"

namespace mapd {

grpc::Status WorkerServiceImpl::Register(grpc::ServerContext* ctx, const v1::RegisterWorkerRequest* req,
                                         v1::RegisterWorkerResponse* out) {
  if (auto st = worker_auth_->Check(*ctx); !st.ok()) return st;
  return Reply(workers_->Register(*req), out);
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
  return Reply(dispatcher_->OnReport(*req), out);
}

grpc::Status WorkerServiceImpl::List(grpc::ServerContext* ctx, const v1::ListWorkersRequest*, v1::ListWorkersResponse* out) {
  if (auto st = client_auth_->Check(*ctx); !st.ok()) return st;
  for (const v1::Worker& w : workers_->List()) *out->add_workers() = w;
  return grpc::Status::OK;
}

}  // namespace mapd

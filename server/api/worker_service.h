// The gRPC WorkerService: thin handlers over the WorkerRegistry (registration, leases) and the
// Dispatcher (assignments in heartbeat responses, reports), behind the same bearer token.
#ifndef MAPD_SERVER_API_WORKER_SERVICE_H_
#define MAPD_SERVER_API_WORKER_SERVICE_H_

#include "common/rpc/auth.h"
#include "proto/mapd/v1/workers.grpc.pb.h"
#include "server/dispatch/dispatcher.h"
#include "server/workers/worker_registry.h"

namespace mapd {

class WorkerServiceImpl final : public v1::WorkerService::Service {
 public:
  // Everything given must outlive the service. Workers' calls (Register, Heartbeat, Report)
  // are checked with `worker_auth`, the listing of workers (a client's) with `client_auth`.
  WorkerServiceImpl(WorkerRegistry* workers, Dispatcher* dispatcher, const TokenAuth* worker_auth, const TokenAuth* client_auth)
      : workers_(workers), dispatcher_(dispatcher), worker_auth_(worker_auth), client_auth_(client_auth) {}

  grpc::Status Register(grpc::ServerContext* ctx, const v1::RegisterWorkerRequest* req, v1::RegisterWorkerResponse* out) override;
  grpc::Status Heartbeat(grpc::ServerContext* ctx, const v1::HeartbeatRequest* req, v1::HeartbeatResponse* out) override;
  grpc::Status List(grpc::ServerContext* ctx, const v1::ListWorkersRequest* req, v1::ListWorkersResponse* out) override;
  grpc::Status Report(grpc::ServerContext* ctx, const v1::ReportRequest* req, v1::ReportResponse* out) override;

 private:
  WorkerRegistry* workers_;
  Dispatcher* dispatcher_;
  const TokenAuth* worker_auth_;
  const TokenAuth* client_auth_;
};

}  // namespace mapd

#endif  // MAPD_SERVER_API_WORKER_SERVICE_H_

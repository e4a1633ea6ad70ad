// The gRPC JobService: thin handlers over the JobManager (DESIGN §9) — auth, then the manager's
// call, its absl::Status carried over with the same code and message.
#ifndef MAPD_SERVER_API_JOB_SERVICE_H_
#define MAPD_SERVER_API_JOB_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "common/rpc/auth.h"
#include "common/rpc/grpc_status.h"
#include "proto/mapd/v1/job_service.grpc.pb.h"
#include "server/api/plan_gate.h"
#include "server/api/watch_stream.h"
#include "server/jobs/job_manager.h"

namespace mapd {

// Watch is a callback stream (watch_stream.h: it holds no thread while it waits); the others are
// sync calls on the server's bounded thread pool.
class JobServiceImpl final : public v1::JobService::WithCallbackMethod_Watch<v1::JobService::Service> {
 public:
  // `jobs`, `auth` and `plans` must outlive the service; a Submit's admission holds a place of
  // `plans`. At most `max_watch_streams` Watch streams are open at once,
  // `max_watch_streams_per_client` from one client host: one more is RESOURCE_EXHAUSTED.
  JobServiceImpl(JobManager* jobs, const TokenAuth* auth, PlanGate* plans, int max_watch_streams,
                 int max_watch_streams_per_client)
      : jobs_(jobs), auth_(auth), plans_(plans), watch_limits_(max_watch_streams, max_watch_streams_per_client) {}

  grpc::Status Submit(grpc::ServerContext* ctx, const v1::SubmitJobRequest* req, v1::Job* out) override;
  grpc::Status Get(grpc::ServerContext* ctx, const v1::GetJobRequest* req, v1::Job* out) override;
  grpc::Status List(grpc::ServerContext* ctx, const v1::ListJobsRequest* req, v1::ListJobsResponse* out) override;
  grpc::ServerWriteReactor<v1::JobEvent>* Watch(grpc::CallbackServerContext* ctx, const v1::WatchJobRequest* req) override;
  grpc::Status Events(grpc::ServerContext* ctx, const v1::JobEventsRequest* req, v1::JobEventsResponse* out) override;
  grpc::Status Cancel(grpc::ServerContext* ctx, const v1::CancelJobRequest* req, v1::Job* out) override;
  grpc::Status Delete(grpc::ServerContext* ctx, const v1::DeleteJobRequest* req, v1::DeleteJobResponse* out) override;
  grpc::Status Logs(grpc::ServerContext* ctx, const v1::JobLogsRequest* req, v1::JobLogsResponse* out) override;

 private:
  JobManager* jobs_;
  const TokenAuth* auth_;
  PlanGate* plans_;
  WatchLimits watch_limits_;
};

}  // namespace mapd

#endif  // MAPD_SERVER_API_JOB_SERVICE_H_

// The gRPC JobService: thin handlers over the JobManager (DESIGN §9) — auth, then the manager's
// call, its absl::Status carried over with the same code and message.
#ifndef MAPD_SERVER_API_JOB_SERVICE_H_
#define MAPD_SERVER_API_JOB_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <atomic>

#include "absl/status/status.h"
#include "common/rpc/auth.h"
#include "common/rpc/grpc_status.h"
#include "proto/mapd/v1/job_service.grpc.pb.h"
#include "server/jobs/job_manager.h"

namespace mapd {

class JobServiceImpl final : public v1::JobService::Service {
 public:
  // `jobs` and `auth` must outlive the service. At most `max_watch_streams` Watch streams are
  // open at once (each holds a server thread while it waits): one more is RESOURCE_EXHAUSTED,
  // so that idle watchers cannot take the threads other calls need.
  JobServiceImpl(JobManager* jobs, const TokenAuth* auth, int max_watch_streams = 64)
      : jobs_(jobs), auth_(auth), max_watch_streams_(max_watch_streams) {}

  grpc::Status Submit(grpc::ServerContext* ctx, const v1::SubmitJobRequest* req, v1::Job* out) override;
  grpc::Status Get(grpc::ServerContext* ctx, const v1::GetJobRequest* req, v1::Job* out) override;
  grpc::Status List(grpc::ServerContext* ctx, const v1::ListJobsRequest* req, v1::ListJobsResponse* out) override;
  grpc::Status Watch(grpc::ServerContext* ctx, const v1::WatchJobRequest* req, grpc::ServerWriter<v1::JobEvent>* out) override;
  grpc::Status Events(grpc::ServerContext* ctx, const v1::JobEventsRequest* req, v1::JobEventsResponse* out) override;
  grpc::Status Cancel(grpc::ServerContext* ctx, const v1::CancelJobRequest* req, v1::Job* out) override;

 private:
  JobManager* jobs_;
  const TokenAuth* auth_;
  const int max_watch_streams_;
  std::atomic<int> watch_streams_{0};  // open now
};

}  // namespace mapd

#endif  // MAPD_SERVER_API_JOB_SERVICE_H_

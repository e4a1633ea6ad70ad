// The gRPC PlannerService: profile and plan a job spec without running it (job_planner.h),
// behind the same bearer token as the job service.
#ifndef MAPD_SERVER_API_PLANNER_SERVICE_H_
#define MAPD_SERVER_API_PLANNER_SERVICE_H_

#include "common/rpc/auth.h"
#include "proto/mapd/v1/planner_service.grpc.pb.h"

namespace mapd {

class PlannerServiceImpl final : public v1::PlannerService::Service {
 public:
  // `auth` must outlive the service.
  explicit PlannerServiceImpl(const TokenAuth* auth) : auth_(auth) {}

  grpc::Status Profile(grpc::ServerContext* ctx, const v1::ProfileRequest* req, v1::ProfileResponse* out) override;
  grpc::Status Plan(grpc::ServerContext* ctx, const v1::PlanRequest* req, v1::PlanResponse* out) override;

 private:
  const TokenAuth* auth_;
};

}  // namespace mapd

#endif  // MAPD_SERVER_API_PLANNER_SERVICE_H_

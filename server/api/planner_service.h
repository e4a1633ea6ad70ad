// The gRPC PlannerService: profile and plan a job spec without running it (job_planner.h),
// behind the same bearer token as the job service.
#ifndef MAPD_SERVER_API_PLANNER_SERVICE_H_
#define MAPD_SERVER_API_PLANNER_SERVICE_H_

#include <functional>
#include <utility>

#include "common/rpc/auth.h"
#include "server/api/plan_gate.h"
#include "server/jobs/job_spec.h"
#include "proto/mapd/v1/planner_service.grpc.pb.h"

namespace mapd {

class PlannerServiceImpl final : public v1::PlannerService::Service {
 public:
  // The spec a job would be planned with (Dispatcher::CostedSpec: a spec without a device_type
  // costed on the workers' measured profile).
  using CostSpecFn = std::function<v1::JobSpec(const v1::JobSpec&)>;
  // `auth` and `plans` must outlive the service; each call holds a place of `plans`, its spec is
  // checked against `limits` as a submitted job's is, and costed as `cost` says (null: as given,
  // the catalogue's cpu for none).
  PlannerServiceImpl(const TokenAuth* auth, PlanGate* plans, const SpecLimits& limits, CostSpecFn cost = nullptr)
      : auth_(auth), plans_(plans), limits_(limits), cost_(std::move(cost)) {}

  grpc::Status Profile(grpc::ServerContext* ctx, const v1::ProfileRequest* req, v1::ProfileResponse* out) override;
  grpc::Status Plan(grpc::ServerContext* ctx, const v1::PlanRequest* req, v1::PlanResponse* out) override;

 private:
  const TokenAuth* auth_;
  PlanGate* plans_;
  const SpecLimits limits_;
  const CostSpecFn cost_;
};

}  // namespace mapd

#endif  // MAPD_SERVER_API_PLANNER_SERVICE_H_

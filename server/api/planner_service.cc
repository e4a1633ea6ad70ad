#include "server/api/planner_service.h"

#include "common/rpc/grpc_status.h"
#include "planner/profile/profiler.h"
#include "planner/runnable/runnable_plan.h"
#include "server/jobs/job_planner.h"
#include "server/jobs/job_spec.h"

namespace mapd {

namespace {

// What both calls start from: the spec checked as a job's would be (steps do not matter here)
// with its defaults, its training graph and the planner's options.
struct Prepared {
  v1::JobSpec spec;
  Graph graph;
  PlannerOptions options;
};

absl::StatusOr<Prepared> Prepare(v1::JobSpec spec, const SpecLimits& limits, const PlannerServiceImpl::CostSpecFn& cost) {
  if (auto st = ValidateJobSpec(spec, limits); !st.ok()) return st;
  spec = WithDefaults(std::move(spec));
  if (cost) spec = cost(spec);
  if (spec.device_type().empty()) spec.set_device_type("cpu");
  auto graph = BuildJobGraph(spec);
  if (!graph.ok()) return graph.status();
  auto request = JobPlanRequest(spec);
  if (!request.ok()) return request.status();
  return Prepared{std::move(spec), *std::move(graph), request->planner};
}

absl::StatusOr<v1::ProfileResponse> ProfileSpec(const v1::JobSpec& request, const SpecLimits& limits,
                                                const PlannerServiceImpl::CostSpecFn& cost) {
  auto p = Prepare(request, limits, cost);
  if (!p.ok()) return p.status();
  auto device = LoadDeviceProfile(p->spec.device_type());
  if (!device.ok()) return device.status();
  ProfileOptions po = p->options.profile;
  po.device = *device;
  po.timeline = false;
  auto report = ProfileTrainingStep(p->graph, po);
  if (!report.ok()) return report.status();
  v1::ProfileResponse out;
  out.set_parameters(report->params);
  out.set_parameter_bytes(report->parameter_bytes);
  out.set_forward_flops(report->forward_flops);
  out.set_backward_flops(report->backward_flops);
  out.set_predicted_peak_bytes(report->predicted_peak_bytes);
  out.set_peak_at(report->peak_at);
  out.set_predicted_step_seconds(report->predicted_step_seconds());
  out.set_device_type(p->spec.device_type());
  return out;
}

absl::StatusOr<v1::PlanResponse> PlanSpec(const v1::JobSpec& request, const SpecLimits& limits, const PlannerServiceImpl::CostSpecFn& cost) {
  auto p = Prepare(request, limits, cost);
  if (!p.ok()) return p.status();
  auto result = SearchPlan(p->graph, p->options);
  if (!result.ok()) return result.status();
  v1::PlanResponse out;
  out.set_fits(result->fits);
  out.set_search_seconds(result->search_seconds);
  if (result->fits) {
    if (auto st = CheckPlausiblePeak(p->graph, p->spec.ranks(), result->plan.cost.peak_bytes()); !st.ok()) return st;
    *out.mutable_plan() = ToPlanProto(p->graph, *result, p->options);
    out.mutable_plan()->set_model(p->spec.model());
    out.set_summary(PlanSummary(result->plan, p->options.profile.precision));
  } else {
    // The figure `mapctl plan` and a job's error name for this model and device count.
    auto least = LeastMemoryAnywhere(p->graph, p->options);
    if (!least.ok()) return least.status();
    out.set_min_memory_bytes(least->bytes);
  }
  return out;
}

}  // namespace

grpc::Status PlannerServiceImpl::Profile(grpc::ServerContext* ctx, const v1::ProfileRequest* req, v1::ProfileResponse* out) {
  if (auto st = auth_->Check(*ctx); !st.ok()) return st;
  auto ticket = plans_->Enter(absl::FromChrono(ctx->deadline()));
  if (!ticket.ok()) return ToGrpcStatus(ticket.status());
  return Reply(ProfileSpec(req->spec(), limits_, cost_), out);
}

grpc::Status PlannerServiceImpl::Plan(grpc::ServerContext* ctx, const v1::PlanRequest* req, v1::PlanResponse* out) {
  if (auto st = auth_->Check(*ctx); !st.ok()) return st;
  auto ticket = plans_->Enter(absl::FromChrono(ctx->deadline()));
  if (!ticket.ok()) return ToGrpcStatus(ticket.status());
  return Reply(PlanSpec(req->spec(), limits_, cost_), out);
}

}  // namespace mapd

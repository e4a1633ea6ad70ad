// A job's graph and planning request, made from its spec the way `mapctl` makes them from its
// flags (planner/runnable/plan_request.h): what admission, the dispatcher and the planner service
// plan, and what the job-spec fuzzer checks. No search here (job_planner.h runs it).
#ifndef MAPD_SERVER_JOBS_JOB_GRAPH_H_
#define MAPD_SERVER_JOBS_JOB_GRAPH_H_

#include "absl/status/statusor.h"
#include "model/ir/graph.h"
#include "planner/runnable/plan_request.h"
#include "proto/mapd/v1/jobs.pb.h"

namespace mapd {

// The graph the job trains: a zoo model with its loss, or the submitted graph (which has one),
// verified. INVALID_ARGUMENT naming what is wrong (an unknown model or op, a graph that does not
// verify).
absl::StatusOr<Graph> BuildJobGraph(const v1::JobSpec& spec);

// The planning request for the spec (with its defaults; planner/runnable/plan_request.h, as
// mapctl's): devices, mesh, device type, budget, optimizer, precision, ZeRO stage, micro-batches,
// pipeline stages, recompute; MAP's plan, no baselines.
absl::StatusOr<PlanRequest> JobPlanRequest(const v1::JobSpec& spec);

}  // namespace mapd

#endif  // MAPD_SERVER_JOBS_JOB_GRAPH_H_

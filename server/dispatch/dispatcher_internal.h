// What the dispatcher's parts (dispatcher.cc and the dispatcher_*.cc beside it) share besides the
// class itself: a few helpers on its values. Internal to server/dispatch; nothing else includes it.
#ifndef MAPD_SERVER_DISPATCH_DISPATCHER_INTERNAL_H_
#define MAPD_SERVER_DISPATCH_DISPATCHER_INTERNAL_H_

#include <cstdint>
#include <string>

#include "planner/runnable/runnable_plan.h"
#include "proto/mapd/v1/checkpoint.pb.h"
#include "proto/mapd/v1/workers.pb.h"
#include "server/jobs/job_manager.h"

namespace mapd {
namespace dispatcher_internal {

// "2-3" or "2".
std::string RankRange(const v1::RankAssignment& a);

// FAILED with `why` as the event and the job's error (no-op for a job already finished).
void MarkFailed(JobManager* jobs, int64_t id, const std::string& why);

// The committed step `job` would resume from was written under another plan than its own.
bool WrittenUnderAnotherPlan(const v1::CheckpointMeta& committed_under, const RunnablePlan& plan);

}  // namespace dispatcher_internal
}  // namespace mapd

#endif  // MAPD_SERVER_DISPATCH_DISPATCHER_INTERNAL_H_

// Elastic jobs (docs/coordinator.md "Elastic jobs"): the device counts a job may run on, the spec
// it is planned with for each, and the plans found for them. A job with an elastic policy goes
// on with the devices left after a lost worker and grows again into free devices at its
// checkpoints; the dispatcher chooses the count (ElasticPlans::Choose) and plans the counts it
// lacks outside its lock (PlanForDevices). Plain values, kept under the dispatcher's lock.
#ifndef MAPD_SERVER_DISPATCH_ELASTIC_H_
#define MAPD_SERVER_DISPATCH_ELASTIC_H_

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "planner/runnable/runnable_plan.h"
#include "proto/mapd/v1/jobs.pb.h"

namespace mapd {

// Plans a job for its ranks (PlanJob; tests may stand in a faster one).
using PlanJobFn = std::function<absl::StatusOr<RunnablePlan>(const v1::JobSpec&)>;

// The fewest and most devices a job runs on: its elastic policy's (with its defaults), or
// `ranks` both for a job without one.
struct DeviceBounds {
  int min_devices = 1;
  int max_devices = 1;
};
DeviceBounds BoundsOf(const v1::JobSpec& spec);

// The job planned for `devices`: the same model, global batch, budget, optimizer and precision
// on that many ranks. Its micro-batches make up for fewer devices: a pinned count that no plan
// fits with is left to the planner (auto), and so is a pinned count of pipeline stages that does
// not divide the devices. FAILED_PRECONDITION (from the planner) when nothing fits.
absl::StatusOr<RunnablePlan> PlanForDevices(const PlanJobFn& plan, const v1::JobSpec& spec, int devices);

// One job's plans by device count, and the counts no plan fits (with why).
class ElasticPlans {
 public:
  void Found(std::shared_ptr<const RunnablePlan> plan);  // for plan->world() devices
  void Refused(int devices, std::string why);

  // Which count to run on, from `hi` down to `lo`: the largest with a plan. Counts above it not
  // planned yet come first: `plan_from`..`plan_to` are to be planned (largest first, down to the
  // first that fits) and nothing is chosen until they have been. Neither: no count in the range
  // fits, `why` says so with the last refusal.
  struct Choice {
    std::shared_ptr<const RunnablePlan> plan;
    int plan_from = 0, plan_to = 0;  // 0: nothing to plan
    std::string why;
  };
  Choice Choose(int lo, int hi) const;

 private:
  std::map<int, std::shared_ptr<const RunnablePlan>> plans_;
  std::map<int, std::string> refused_;
};

}  // namespace mapd

#endif  // MAPD_SERVER_DISPATCH_ELASTIC_H_

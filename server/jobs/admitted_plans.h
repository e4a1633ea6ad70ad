// The plans admission made, kept for the dispatcher so that a job is searched once: admission
// plans a submitted job whole (searched, lowered to rank programs, each checked against the
// budget) and the dispatcher starts it on that plan when it gets the devices the plan is for.
// The plans are held in memory only, within a byte budget (mapd --admitted-plan-bytes): the
// oldest go first past it, and a job whose plan is gone (evicted, a coordinator restart, an
// elastic job starting on fewer devices) is planned again at dispatch — its event says why.
// Thread-safe: admission runs on gRPC threads, the dispatcher on its own.
#ifndef MAPD_SERVER_JOBS_ADMITTED_PLANS_H_
#define MAPD_SERVER_JOBS_ADMITTED_PLANS_H_

#include <cstdint>
#include <list>
#include <map>
#include <memory>

#include "absl/synchronization/mutex.h"
#include "planner/runnable/runnable_plan.h"

namespace mapd {

class AdmittedPlans {
 public:
  // `max_bytes`: what the kept plans may take in all (their graphs and rank programs as
  // serialized); 0 keeps none.
  explicit AdmittedPlans(int64_t max_bytes) : max_bytes_(max_bytes) {}

  // Keeps `plan` for job `id`, dropping the oldest kept plans while over the budget (a plan
  // larger than the whole budget is not kept).
  void Put(int64_t id, std::shared_ptr<const RunnablePlan> plan);
  // The plan kept for `id`, now no longer kept; null when there is none.
  std::shared_ptr<const RunnablePlan> Take(int64_t id);

  int64_t bytes() const;   // what the kept plans take
  int64_t count() const;   // how many are kept

  // What a plan counts against the budget: its graph and rank programs, serialized.
  static int64_t BytesOf(const RunnablePlan& plan);

 private:
  struct Kept {
    std::shared_ptr<const RunnablePlan> plan;
    int64_t bytes = 0;
  };
  const int64_t max_bytes_;
  mutable absl::Mutex mu_;
  std::map<int64_t, Kept> kept_ ABSL_GUARDED_BY(mu_);
  std::list<int64_t> order_ ABSL_GUARDED_BY(mu_);  // ids, oldest first
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace mapd

#endif  // MAPD_SERVER_JOBS_ADMITTED_PLANS_H_

#include "server/dispatch/elastic.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace mapd {

DeviceBounds BoundsOf(const v1::JobSpec& spec) {
  if (!spec.has_elastic()) return {spec.ranks(), spec.ranks()};
  const int lo = std::max(1, spec.elastic().min_devices());
  return {lo, std::max({lo, spec.ranks(), spec.elastic().max_devices()})};
}

absl::StatusOr<RunnablePlan> PlanForDevices(const PlanJobFn& plan, const v1::JobSpec& spec, int devices) {
  v1::JobSpec at = spec;
  at.set_ranks(devices);
  at.clear_mesh();  // (an elastic spec has none; ValidateJobSpec)
  int stages = 1;
  if (absl::SimpleAtoi(at.pipeline_stages(), &stages) && stages > 1 && devices % stages != 0) at.set_pipeline_stages("auto");
  auto found = plan(at);
  const bool pinned_micro_batches = at.training().micro_batches() != "auto";
  if (found.ok() || found.status().code() != absl::StatusCode::kFailedPrecondition || !pinned_micro_batches) return found;
  // Fewer devices hold more of the global batch each: let the planner split it into more passes.
  at.mutable_training()->set_micro_batches("auto");
  auto retried = plan(at);
  if (retried.ok()) return retried;
  return found.status();
}

void ElasticPlans::Found(std::shared_ptr<const RunnablePlan> plan) {
  const int devices = plan->world();
  refused_.erase(devices);
  plans_[devices] = std::move(plan);
}

void ElasticPlans::Refused(int devices, std::string why) {
  plans_.erase(devices);
  refused_[devices] = std::move(why);
}

ElasticPlans::Choice ElasticPlans::Choose(int lo, int hi) const {
  Choice out;
  std::string last_refusal;
  for (int n = hi; n >= lo && n >= 1; --n) {
    if (auto it = plans_.find(n); it != plans_.end()) {
      out.plan = it->second;
      return out;
    }
    if (auto it = refused_.find(n); it != refused_.end()) {
      last_refusal = absl::StrCat(n, " device(s): ", it->second);
      continue;
    }
    out.plan_from = n;
    out.plan_to = lo;
    return out;
  }
  out.why = lo > hi ? absl::StrCat("no device count from ", lo, " to ", hi)
                    : absl::StrCat("no plan fits ", lo == hi ? absl::StrCat(lo) : absl::StrCat(lo, " to ", hi),
                                   " device(s) (", last_refusal, ")");
  return out;
}

}  // namespace mapd

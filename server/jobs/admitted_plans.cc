#include "server/jobs/admitted_plans.h"

#include <algorithm>

namespace mapd {

int64_t AdmittedPlans::BytesOf(const RunnablePlan& plan) {
  int64_t bytes = static_cast<int64_t>(plan.graph.ByteSizeLong());
  for (const v1::RankProgram& p : plan.lowered.programs) bytes += static_cast<int64_t>(p.ByteSizeLong());
  return bytes;
}

void AdmittedPlans::Put(int64_t id, std::shared_ptr<const RunnablePlan> plan) {
  const int64_t bytes = BytesOf(*plan);
  absl::MutexLock lock(&mu_);
  if (auto it = kept_.find(id); it != kept_.end()) {
    bytes_ -= it->second.bytes;
    order_.remove(id);
    kept_.erase(it);
  }
  if (bytes > max_bytes_) return;
  while (bytes_ + bytes > max_bytes_ && !order_.empty()) {
    auto oldest = kept_.find(order_.front());
    bytes_ -= oldest->second.bytes;
    kept_.erase(oldest);
    order_.pop_front();
  }
  kept_[id] = Kept{std::move(plan), bytes};
  order_.push_back(id);
  bytes_ += bytes;
}

std::shared_ptr<const RunnablePlan> AdmittedPlans::Take(int64_t id) {
  absl::MutexLock lock(&mu_);
  auto it = kept_.find(id);
  if (it == kept_.end()) return nullptr;
  std::shared_ptr<const RunnablePlan> plan = std::move(it->second.plan);
  bytes_ -= it->second.bytes;
  kept_.erase(it);
  order_.remove(id);
  return plan;
}

int64_t AdmittedPlans::bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

int64_t AdmittedPlans::count() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(kept_.size());
}

}  // namespace mapd

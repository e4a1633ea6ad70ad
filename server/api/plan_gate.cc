#include "server/api/plan_gate.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace mapd {

absl::StatusOr<std::unique_ptr<PlanGate::Ticket>> PlanGate::Enter(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  const auto free = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return in_flight_ < max_in_flight_; };
  if (!mu_.AwaitWithDeadline(absl::Condition(&free), std::min(absl::Now() + max_wait_, deadline))) {
    return absl::ResourceExhaustedError(absl::StrCat(
        max_in_flight_, " plans are being searched, the most this coordinator runs at once (mapd --max-concurrent-plans), "
                        "and none finished within ", absl::FormatDuration(max_wait_), " (--plan-wait-seconds); try again"));
  }
  ++in_flight_;
  return std::make_unique<Ticket>(this);
}

void PlanGate::Leave() {
  absl::MutexLock lock(&mu_);
  --in_flight_;
}

int PlanGate::in_flight() const {
  absl::MutexLock lock(&mu_);
  return in_flight_;
}

}  // namespace mapd

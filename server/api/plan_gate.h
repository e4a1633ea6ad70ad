// PlanGate: how many searches the coordinator's callers may run at once.
//
// Submit (admission), Plan and Profile each build a graph and search a plan — seconds of CPU and
// up to a GiB of memory for the largest models. Unbounded, a burst of them takes every core and
// memory page from heartbeats and the dispatcher. A call waits for one of `max_in_flight` places
// for at most `max_wait` (or its own deadline, if sooner), then is RESOURCE_EXHAUSTED — a
// transient code, which mapctl retries with backoff.
#ifndef MAPD_SERVER_API_PLAN_GATE_H_
#define MAPD_SERVER_API_PLAN_GATE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace mapd {

class PlanGate {
 public:
  PlanGate(int max_in_flight, absl::Duration max_wait) : max_in_flight_(max_in_flight), max_wait_(max_wait) {}

  // A held place, given back when destroyed.
  class Ticket {
   public:
    explicit Ticket(PlanGate* gate) : gate_(gate) {}
    ~Ticket() { gate_->Leave(); }
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;

   private:
    PlanGate* gate_;
  };

  // Waits for a place until `max_wait` from now or `deadline`, whichever is first.
  absl::StatusOr<std::unique_ptr<Ticket>> Enter(absl::Time deadline = absl::InfiniteFuture());

  int in_flight() const;

 private:
  void Leave();

  const int max_in_flight_;
  const absl::Duration max_wait_;
  mutable absl::Mutex mu_;
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace mapd

#endif  // MAPD_SERVER_API_PLAN_GATE_H_

// The dispatcher's elastic policy (elastic.h holds its plain values): an elastic job started on
// fewer devices than it asks for, its plan chosen for the devices free when it resumes (after the
// grace for a replacement), its growth at a committed checkpoint, and the plans for the counts it
// lacks, searched on StartPending's thread outside the lock.
#include "server/dispatch/dispatcher.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace mapd {

namespace {

// Device counts an elastic job is planned for in one round of the planning thread: a job whose
// plans do not fit many counts (a client's min_devices 1 on thousands of devices) goes on being
// planned in later rounds, after the other jobs' starts, rather than hold the thread for each.
constexpr int kElasticPlansPerRound = 4;

}  // namespace

absl::StatusOr<RunnablePlan> Dispatcher::PlanSmallerStart(const v1::JobSpec& spec, int devices) const {
  // The few largest counts (kElasticPlansPerRound): a job that fits none of them waits for all.
  const int lo = std::max(BoundsOf(spec).min_devices, devices - kElasticPlansPerRound + 1);
  ElasticPlans plans;
  for (int n = devices; n >= lo; --n) {
    auto plan = PlanForDevices(plan_, spec, n);
    if (plan.ok() || plan.status().code() != absl::StatusCode::kFailedPrecondition) return plan;
    plans.Refused(n, std::string(plan.status().message()));
  }
  return absl::FailedPreconditionError(plans.Choose(lo, devices).why);
}

bool Dispatcher::ChooseElasticPlanLocked(int64_t id, ActiveJob& job) {
  const DeviceBounds bounds = BoundsOf(job.spec);
  const int free = FreeForLocked(job.spec);
  const double now = workers_->NowUnixSeconds();
  const bool in_grace = now < job.resize_after && job.devices_before > bounds.min_devices;
  const int lo = in_grace ? job.devices_before : bounds.min_devices;
  const int hi = std::min(bounds.max_devices, free);
  if (hi < lo) {
    if (in_grace) {
      TellWaitLocked(id, job, "grace",
                     absl::StrCat(WaitingMessage(job.spec, job.devices_before, free), " (to resume from step ", job.checkpoints.committed(),
                                  "); going on with fewer, at least ", bounds.min_devices, ", if none come within ",
                                  absl::StrFormat("%.0f", job.resize_after - now), " s"));
    } else {
      TellWaitLocked(id, job, "devices",
                     absl::StrCat(WaitingMessage(job.spec, bounds.min_devices, free), " (the elastic job's min_devices, to resume from step ",
                                  job.checkpoints.committed(), ")"));
    }
    return false;
  }
  const ElasticPlans::Choice choice = job.plans.Choose(lo, hi);
  if (choice.plan_from > 0) {
    job.plan_from = choice.plan_from, job.plan_to = choice.plan_to;  // StartPending plans them
    TellWaitLocked(id, job, "planning",
                   absl::StrCat("planning the job for ", choice.plan_from,
                                choice.plan_to < choice.plan_from ? absl::StrCat(" (or down to ", choice.plan_to, ")") : "", " device(s), ",
                                free, " free now, to resume from step ", job.checkpoints.committed()));
    return false;
  }
  if (choice.plan == nullptr) {
    TellWaitLocked(id, job, "plan", absl::StrCat("waiting: ", choice.why, "; ", free, " free devices now (to resume from step ",
                                                 job.checkpoints.committed(), ")"));
    return false;
  }
  job.plan = choice.plan;
  return true;
}

void Dispatcher::MaybeGrowLocked(int64_t id, ActiveJob& job, int64_t step) {
  if (!job.spec.has_elastic() || job.phase != Phase::kRunning) return;
  const int world = job.plan->world();
  const int free = FreeForLocked(job.spec);
  const int hi = GrowthCeilingLocked(job, free);
  // Devices a queued job waits for are not grown into.
  if (hi <= world || jobs_->HasPending()) return;
  const ElasticPlans::Choice choice = job.plans.Choose(world + 1, hi);
  if (choice.plan == nullptr) return;  // (WantGrowthPlansLocked asks for the plans)
  MoveLocked(id, job, Phase::kRestarting);
  ++job.attempt;  // a new attempt, but no restart
  job.devices_before = 0;
  job.resize_after = 0;
  job.told_wait.clear();
  Defer([this, id, message = absl::StrCat("growing from ", world, " to ", choice.plan->world(), " devices at the checkpoint of step ", step,
                                          ": ", free, " more free")] { (void)jobs_->Transition(id, v1::RESTARTING, message); });
}

int Dispatcher::GrowthCeilingLocked(const ActiveJob& job, int free) const {
  return std::min(BoundsOf(job.spec).max_devices, job.plan->world() + free);
}

void Dispatcher::WantGrowthPlansLocked() {
  std::optional<bool> queued;  // a job is PENDING (asked once, and only when some job could grow)
  for (auto& [id, job] : active_) {
    if (!job.spec.has_elastic() || job.phase != Phase::kRunning) continue;
    const int world = job.plan->world();
    const int hi = GrowthCeilingLocked(job, FreeForLocked(job.spec));
    if (hi <= world) continue;
    if (!queued.has_value()) queued = jobs_->HasPending();
    if (*queued) return;
    const ElasticPlans::Choice choice = job.plans.Choose(world + 1, hi);
    if (choice.plan_from > 0) job.plan_from = choice.plan_from, job.plan_to = choice.plan_to;
  }
}

void Dispatcher::PlanElasticCounts() {
  struct Wanted {
    int64_t id;
    v1::JobSpec spec;
    int from, to;
  };
  std::vector<Wanted> wanted;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, job] : active_) {
      if (job.plan_from == 0) continue;
      wanted.push_back({id, job.spec, job.plan_from, job.plan_to});
      job.plan_from = job.plan_to = 0;
    }
  }
  for (const Wanted& w : wanted) {
    // Largest first, down to the first count a plan fits: the dispatcher takes the largest (the
    // counts below, if none of these fits, in a later round: Choose asks for them).
    for (int n = w.from; n >= w.to && n > w.from - kElasticPlansPerRound; --n) {
      auto plan = PlanForDevices(plan_, w.spec, n);
      absl::MutexLock lock(&mu_);
      auto it = active_.find(w.id);
      if (it == active_.end()) break;
      if (plan.ok()) {
        it->second.plans.Found(std::make_shared<const RunnablePlan>(*std::move(plan)));
        break;
      }
      it->second.plans.Refused(n, std::string(plan.status().message()));
    }
  }
}

}  // namespace mapd

// The dispatcher's recovery: a job of a lost worker restarted from its last committed checkpoint
// (or failed), placed again once its other ranks have ended, and — after a coordinator restart —
// the previous coordinator's jobs queued again, resumed from their checkpoints or failed.
#include "server/dispatch/dispatcher.h"

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/checkpoint/checkpoint_commit.h"
#include "server/dispatch/dispatcher_internal.h"

namespace mapd {

using dispatcher_internal::MarkFailed;
using dispatcher_internal::WrittenUnderAnotherPlan;

void Dispatcher::LoseLocked(int64_t id, ActiveJob& job, const std::string& why) {
  const int64_t committed = job.checkpoints.committed();
  const bool shared = !options_.checkpoint_dir.empty();
  // Without shared storage, each rank's shards of the step are on its worker and that worker's
  // peer (dispatcher_shards.cc): the job resumes while a live worker keeps every rank's.
  const std::vector<int32_t> unkept = shared || committed == 0 ? std::vector<int32_t>{} : UnkeptRanksLocked(job);
  if (committed == 0 || !unkept.empty() || job.restarts >= options_.max_restarts) {
    // Which case applies, said in the job's error.
    FailLocked(id, job,
               absl::StrCat(why, committed == 0 ? " (no checkpoint committed yet to restart from)"
                                 : !unkept.empty()
                                     ? absl::StrCat("; the job cannot resume: there is no shared checkpoint storage, and the shards of rank(s) ",
                                                    absl::StrJoin(unkept, ","), " of step ", committed,
                                                    " were kept only on workers now lost (each worker's shards are kept by one peer: "
                                                    "two workers lost together, or a worker without a shard service, lose them; mapd "
                                                    "--checkpoint-dir on storage every worker reaches keeps them all)")
                                     : absl::StrCat(" (restarted ", job.restarts, " time(s) already)")));
    return;
  }
  MoveLocked(id, job, Phase::kRestarting);
  ++job.restarts;
  ++job.attempt;  // the next attempt's number
  job.told_wait.clear();
  // An elastic job waits the grace for as many devices as it had, then goes on with fewer.
  job.devices_before = job.plan->world();
  job.resize_after = workers_->NowUnixSeconds() + options_.elastic_grace_seconds;
  Defer([this, id, message = absl::StrCat(why, "; restarting from the checkpoint of step ", committed, " (restart ", job.restarts, " of at most ",
                                          options_.max_restarts, "), ",
                                          shared ? "on the shared checkpoint storage"
                                                 : "whose shards the workers left keep (no shared storage: each worker's are kept by a peer too)")] {
    (void)jobs_->Transition(id, v1::RESTARTING, message);
  });
}

void Dispatcher::TellWaitLocked(int64_t id, ActiveJob& job, const std::string& kind, const std::string& why) {
  if (job.told_wait == kind) return;
  job.told_wait = kind;
  Defer([this, id, why] { (void)jobs_->Note(id, why); });
}

void Dispatcher::TryResumeLocked(int64_t id, ActiveJob& job) {
  const int64_t from = job.checkpoints.committed();
  // The devices it ran on (after a coordinator restart: its checkpoint's world, not the plan
  // found for `ranks`).
  const int before = job.devices_before > 0 ? job.devices_before : job.plan->world();
  if (job.spec.has_elastic() && !ChooseElasticPlanLocked(id, job)) return;
  if (auto st = PlaceLocked(id, job, from); !st.ok()) {  // (parts unchanged: they have all ended)
    TellWaitLocked(id, job, "devices", absl::StrCat(st.message(), " (to resume from step ", from, ")"));
    return;
  }
  job.told_wait.clear();
  job.held_by.clear();
  job.progress.last_step = from;
  const RunnablePlan& plan = *job.plan;
  std::string message = absl::StrCat("resumed from the checkpoint of step ", from, " on ", Where(job));
  if (job.spec.has_elastic()) {
    message = absl::StrCat("resumed on ", plan.world(), " of ", BoundsOf(job.spec).max_devices, " devices from the checkpoint of step ", from,
                           before != plan.world() ? absl::StrCat(" (", before, " before)") : "", ": plan ", plan.summary, "; on ", Where(job));
  }
  // Cancelled meanwhile: the transition fails, and Watch stops the job as any cancelled one.
  Defer([this, id, attempt = job.attempt, restarts = job.restarts, devices = plan.world(), summary = plan.summary,
         peak = plan.predicted_peak_bytes, message] {
    StopIfUnrecorded(id, jobs_->Transition(id, v1::RUNNING, message, [&](v1::Job& j) {
      j.set_attempt(attempt);
      j.set_restarts(restarts);
      j.set_devices(devices);
      j.set_plan_summary(summary);
      j.set_predicted_peak_bytes(peak);
    }).status());
  });
}

void Dispatcher::RecoverOrphans() {
  double recover_after = 0;
  {
    absl::MutexLock lock(&mu_);
    recover_after = recover_after_ = workers_->NowUnixSeconds() + workers_->lease().lease_seconds;
  }
  for (const v1::Job& job : jobs_->List()) {
    if (job.state() == v1::PLANNING) {
      (void)jobs_->Transition(job.id(), v1::PENDING, "the coordinator restarted while planning the job; back in the queue");
      continue;
    }
    if (job.state() != v1::RUNNING && job.state() != v1::RESTARTING) continue;
    auto recovered = RecoverJob(job);
    if (!recovered.ok()) {
      MarkFailed(jobs_, job.id(),
                 absl::StrCat("the coordinator restarted while the job was ", v1::JobState_Name(job.state()), " and ",
                              recovered.status().message(), "; its ranks were stopped (a restarted coordinator does not adopt running ranks) — submit it again"));
      continue;
    }
    const std::string why = absl::StrCat("the coordinator restarted; restarting from the checkpoint of step ", recovered->checkpoints.committed(),
                                         " (restart ", recovered->restarts, " of at most ", options_.max_restarts,
                                         ") once no worker runs the job's earlier ranks",
                                         WrittenUnderAnotherPlan(recovered->committed_under, *recovered->plan)
                                             ? absl::StrCat("; planned anew as ", recovered->plan->checkpoint_plan,
                                                            ", so the checkpoint is resharded into it")
                                             : "");
    auto noted = job.state() == v1::RUNNING ? jobs_->Transition(job.id(), v1::RESTARTING, why) : jobs_->Note(job.id(), why);
    if (!noted.ok()) continue;  // cancelled meanwhile
    absl::MutexLock lock(&mu_);
    // An elastic job waits a grace past the workers' return for as many devices as it last had.
    recovered->resize_after = recover_after + options_.elastic_grace_seconds;
    active_[job.id()] = *std::move(recovered);
  }
  orphans_checked_ = true;
}

absl::StatusOr<Dispatcher::ActiveJob> Dispatcher::RecoverJob(const v1::Job& job) {
  if (options_.checkpoint_dir.empty()) {
    return absl::FailedPreconditionError("it has no checkpoint to resume from (no --checkpoint-dir)");
  }
  auto meta = ReadLatestCheckpoint(JobCheckpointDir(job.id()));
  if (!meta.ok()) return absl::FailedPreconditionError(absl::StrCat("it cannot resume: ", meta.status().message()));
  // (Jobs stored before Job.restarts existed, and jobs that are not elastic, restart with every
  // attempt.)
  const int restarted = job.spec().has_elastic() ? job.restarts() : std::max(job.attempt(), job.restarts());
  if (restarted + 1 > options_.max_restarts) {
    return absl::FailedPreconditionError(absl::StrCat("it has restarted ", restarted, " time(s) already (--max-restarts ", options_.max_restarts, ")"));
  }
  auto plan = plan_(job.spec());
  if (!plan.ok()) return absl::FailedPreconditionError(absl::StrCat("planning it again failed: ", plan.status().message()));
  ActiveJob active;
  // A plan other than the checkpoint's (the planner or its cost model changed, or an elastic job
  // ran on fewer devices) resumes resharded: each rank takes its blocks of the whole tensors.
  active.committed_under = *meta;
  active.spec = job.spec();
  active.plan = std::make_shared<const RunnablePlan>(*std::move(plan));
  active.phase = Phase::kRecovering;
  active.attempt = job.attempt() + 1;
  active.restarts = restarted + 1;
  if (active.spec.has_elastic()) {
    active.plans.Found(active.plan);
    active.devices_before = meta->ranks();
  }
  active.checkpoints.Committed(meta->step());
  active.progress.last_step = meta->step();
  return active;
}

bool Dispatcher::RecoveredMayResumeLocked(const ActiveJob& job) const {
  if (workers_->NowUnixSeconds() < recover_after_) return false;
  std::set<std::string> alive;
  for (const v1::Worker& w : workers_->List()) {
    if (w.state() == v1::ALIVE) alive.insert(w.id());
  }
  for (const std::string& w : job.held_by) {
    if (alive.count(w)) return false;
  }
  return true;
}

}  // namespace mapd

// The dispatcher's loop and its jobs' phases: the two halves (Watch, StartPending) and their
// round (Tick), the one phase change (MoveLocked), a job's stop, failure and drop, and the effects
// run after the lock. What they decide with is in parts of their own behind the same lock:
// placement (dispatcher_placement.cc), worker heartbeats and reports (dispatcher_reports.cc),
// restarts and a coordinator restart's recovery (dispatcher_recovery.cc), and elastic jobs'
// shrinking and growing (dispatcher_elastic.cc).
#include "server/dispatch/dispatcher.h"

#include "server/dispatch/measured_profiles.h"

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint_commit.h"
#include "server/dispatch/dispatcher_internal.h"

namespace mapd {

namespace dispatcher_internal {

std::string RankRange(const v1::RankAssignment& a) {
  if (a.ranks().empty()) return "";
  const int lo = a.ranks(0), hi = a.ranks(a.ranks_size() - 1);
  return lo == hi ? absl::StrCat(lo) : absl::StrCat(lo, "-", hi);
}

void MarkFailed(JobManager* jobs, int64_t id, const std::string& why) {
  (void)jobs->Transition(id, v1::FAILED, why, [&](v1::Job& j) { j.set_error(why); });
}

bool WrittenUnderAnotherPlan(const v1::CheckpointMeta& committed_under, const RunnablePlan& plan) {
  return !CheckCheckpointMatches(committed_under, plan.world(), plan.mesh, plan.checkpoint_plan, "").ok();
}

}  // namespace dispatcher_internal

using dispatcher_internal::MarkFailed;
using dispatcher_internal::RankRange;

absl::Status DispatchOptions::Validate() const {
  if (max_restarts < 0) return absl::InvalidArgumentError(absl::StrCat("--max-restarts ", max_restarts, ": give 0 or more"));
  if (keep_checkpoints < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--keep-checkpoints ", keep_checkpoints, ": give 1 or more (the last committed step is always kept)"));
  }
  if (!(elastic_grace_seconds >= 0) || elastic_grace_seconds > 86400) {
    return absl::InvalidArgumentError(absl::StrCat("--elastic-grace-seconds ", elastic_grace_seconds, ": give 0 to 86400 seconds"));
  }
  if (!checkpoint_dir.empty() && checkpoint_dir[0] != '/') {
    return absl::InvalidArgumentError(absl::StrCat("--checkpoint-dir ", checkpoint_dir, ": give an absolute path (workers use it as is)"));
  }
  return absl::OkStatus();
}

const char* Dispatcher::PhaseName(Phase p) {
  switch (p) {
    case Phase::kRunning: return "running";
    case Phase::kStopping: return "stopping";
    case Phase::kRestarting: return "restarting";
    case Phase::kRecovering: return "recovering";
  }
  return "?";
}

void Dispatcher::MoveLocked(int64_t id, ActiveJob& job, Phase to) {
  const Phase from = job.phase;
  // The diagram in dispatcher.h; staying where one is, is always allowed.
  const bool allowed = from == to || to == Phase::kStopping || (to == Phase::kRunning && from != Phase::kStopping) ||
                       (to == Phase::kRestarting && from != Phase::kRecovering);
  if (!allowed) {
    std::fprintf(stderr, "mapd: dispatcher bug: job %lld moved from %s to %s\n", static_cast<long long>(id), PhaseName(from), PhaseName(to));
    std::abort();
  }
  job.phase = to;
}

void Dispatcher::RunEffects() {
  absl::MutexLock order(&effects_mu_);  // one batch at a time, in the order they were queued
  for (;;) {  // (an effect may queue more: a committed checkpoint lets a job grow)
    std::vector<std::function<void()>> run;
    {
      absl::MutexLock lock(&mu_);
      run.swap(effects_);
    }
    if (run.empty()) return;
    for (auto& effect : run) effect();
  }
}

Dispatcher::Dispatcher(JobManager* jobs, WorkerRegistry* workers, DispatchOptions options, PlanJobFn plan, AdmittedPlans* admitted)
    : jobs_(jobs),
      workers_(workers),
      options_(std::move(options)),
      // Every plan made here is costed on the profile of the workers that will run it.
      plan_([inner = std::move(plan), workers](const v1::JobSpec& spec) { return inner(mapd::CostedSpec(spec, workers->List())); }),
      admitted_(admitted) {}

v1::JobSpec Dispatcher::CostedSpec(const v1::JobSpec& spec) const { return mapd::CostedSpec(spec, workers_->List()); }

std::string Dispatcher::JobCheckpointDir(int64_t id) const { return absl::StrCat(options_.checkpoint_dir, "/job-", id); }

void Dispatcher::Tick() {
  Watch();
  StartPending();
}

void Dispatcher::StartPending() {
  if (!orphans_checked_) return;  // the previous coordinator's jobs first: they hold checkpoints
  PlanElasticCounts();
  for (const v1::Job& job : jobs_->Pending()) {
    TryStart(job);
    RunEffects();
  }
}

void Dispatcher::Watch() {
  if (!orphans_checked_) RecoverOrphans();
  {
    absl::MutexLock lock(&mu_);
    std::map<std::string, v1::WorkerState> state;
    for (const v1::Worker& w : workers_->List()) state[w.id()] = w.state();
    for (auto& [id, job] : active_) {
      auto j = jobs_->Get(id);
      const bool finished = j.ok() && IsFinished(j->state());  // cancelled by the user
      if (finished) {
        MoveLocked(id, job, Phase::kStopping);
        job.failure.clear();
        job.lost.clear();
      }
      for (Part& part : job.parts) {
        if (part.finished || state[part.worker_id] == v1::ALIVE) continue;
        part.finished = true;  // nothing to wait for from a lost worker
        const std::string why = absl::StrCat("worker ", part.worker_id, " was lost (its lease ran out) while running rank ",
                                             RankRange(part.assignment), "; the other ranks were stopped");
        if (!job.stopping()) {
          LoseLocked(id, job, why);
        } else if (!job.failure.empty() && job.lost.empty()) {
          job.lost = why;  // the reported failure was (likely) this loss's doing: settled in ReapLocked
        }
      }
    }
    ReapLocked();
    // Jobs whose ranks have all stopped after a lost worker: placed again when devices allow.
    for (auto& [id, job] : active_) {
      const bool may_resume = job.phase == Phase::kRestarting || (job.phase == Phase::kRecovering && RecoveredMayResumeLocked(job));
      if (may_resume && job.parts_ended()) TryResumeLocked(id, job);
    }
    WantGrowthPlansLocked();
    for (std::set<int64_t>* pending : {&told_waiting_, &small_start_refused_}) {
      for (auto it = pending->begin(); it != pending->end();) {
        auto j = jobs_->Get(*it);
        it = (!j.ok() || j->state() != v1::PENDING) ? pending->erase(it) : std::next(it);
      }
    }
  }
  RunEffects();
}

void Dispatcher::StopIfUnrecorded(int64_t id, const absl::Status& moved) {
  // OK, or FAILED_PRECONDITION: cancelled meanwhile, and Watch stops the job as any cancelled one.
  if (moved.ok() || moved.code() == absl::StatusCode::kFailedPrecondition) return;
  // The store refused the write (a full disk, an I/O error): ranks must not run on a start no
  // restart would know of. Stop them and fail the job; if that cannot be written either, the job
  // stays PLANNING in the store, and a restarted coordinator queues it again.
  std::cerr << "mapd: job " << id << ": its start could not be recorded: " << moved << "; stopping its ranks\n";
  absl::MutexLock lock(&mu_);
  auto it = active_.find(id);
  if (it == active_.end() || it->second.stopping()) return;
  FailLocked(id, it->second,
             absl::StrCat("the coordinator could not record the job's start (", moved.message(), "); its ranks were stopped"));
}

void Dispatcher::FailLocked(int64_t id, ActiveJob& job, const std::string& why) {
  MoveLocked(id, job, Phase::kStopping);
  Defer([this, id, why] { MarkFailed(jobs_, id, why); });
}

namespace {

// Whether a rank that failed with `code` may train on after a restart from the last checkpoint.
// Not when the job's program or input is at fault — it fails the same way wherever it runs;
// whatever else ends a rank (a link broken or slow past the rank timeout, a full disk, a rank
// killed, memory short on its host) may not happen again, and --max-restarts bounds the tries.
bool RestartsAfter(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kUnimplemented:
      return false;
    default:
      return code != absl::StatusCode::kOk;
  }
}

}  // namespace

void Dispatcher::SettleFailureLocked(int64_t id, ActiveJob& job) {
  const std::string failure = std::exchange(job.failure, "");
  const absl::StatusCode code = std::exchange(job.failure_code, absl::StatusCode::kOk);
  if (!job.lost.empty()) {
    LoseLocked(id, job, std::exchange(job.lost, ""));
  } else if (RestartsAfter(code)) {
    LoseLocked(id, job, failure);
  } else {
    FailLocked(id, job, absl::StrCat(failure, " (", absl::StatusCodeToString(code), ": the job's program or input is at fault, so it is not restarted)"));
  }
}

void Dispatcher::ReapLocked() {
  for (auto it = active_.begin(); it != active_.end();) {
    if (!it->second.parts_ended()) {
      ++it;
      continue;
    }
    if (!it->second.failure.empty()) SettleFailureLocked(it->first, it->second);
    if (it->second.restarting()) {
      ++it;
    } else {
      it = active_.erase(it);
    }
  }
}

}  // namespace mapd

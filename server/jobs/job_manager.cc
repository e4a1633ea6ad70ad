#include "server/jobs/job_manager.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "server/jobs/job_spec.h"

namespace mapd {

bool IsAllowedTransition(v1::JobState from, v1::JobState to) {
  if (IsFinished(from)) return false;
  if (to == v1::FAILED || to == v1::CANCELLED) return true;
  switch (from) {
    case v1::PENDING: return to == v1::PLANNING;
    case v1::PLANNING: return to == v1::RUNNING || to == v1::PENDING;  // back in the queue: devices went away
    case v1::RUNNING: return to == v1::SUCCEEDED || to == v1::RESTARTING;
    case v1::RESTARTING: return to == v1::RUNNING;
    default: return false;
  }
}

absl::StatusOr<std::unique_ptr<JobManager>> JobManager::Create(JobStore* store, Clock* clock) {
  std::unique_ptr<JobManager> m(new JobManager(store, clock));
  auto jobs = store->LoadJobs();
  if (!jobs.ok()) return jobs.status();
  auto deleted = store->MaxDeletedId();
  if (!deleted.ok()) return deleted.status();
  absl::MutexLock lock(&m->mu_);
  m->next_id_ = *deleted + 1;
  for (v1::Job& job : *jobs) {
    auto events = store->LoadEvents(job.id(), 0);
    if (!events.ok()) return events.status();
    m->last_seq_[job.id()] = events->empty() ? 0 : events->back().seq();
    m->next_id_ = std::max(m->next_id_, job.id() + 1);
    m->jobs_[job.id()] = std::move(job);
  }
  return m;
}

absl::StatusOr<v1::Job> JobManager::Record(v1::Job job, v1::JobEvent event, bool lifecycle) {
  const double now = clock_->NowUnixSeconds();
  job.set_updated_unix_seconds(now);
  event.set_job_id(job.id());
  event.set_seq(last_seq_[job.id()] + 1);
  event.set_unix_seconds(now);
  event.set_state(job.state());
  if (auto st = store_->Write(job, event); !st.ok()) return st;
  if (lifecycle && sink_) sink_(job, event);
  last_seq_[job.id()] = event.seq();
  jobs_[job.id()] = job;
  return job;
}

absl::StatusOr<v1::Job> JobManager::Submit(const v1::JobSpec& spec) {
  if (auto st = ValidateJobSpec(spec, limits_); !st.ok()) return st;
  v1::Job job;
  *job.mutable_spec() = WithDefaults(spec);
  AdmittedFn admitted;
  if (admission_) {
    auto decided = admission_(job.spec(), job);
    if (!decided.ok()) return decided.status();
    admitted = *std::move(decided);
  }
  absl::MutexLock lock(&mu_);
  job.set_id(next_id_);
  if (admitted) admitted(next_id_);  // (a failed Record leaves the id to the next job, which replaces it)
  job.set_state(v1::PENDING);
  job.set_created_unix_seconds(clock_->NowUnixSeconds());
  v1::JobEvent event;
  event.set_message(absl::StrCat("submitted: ", job.spec().name(), ", ", job.spec().training().steps(), " steps on ", job.spec().ranks(),
                                 " rank(s)", job.plan_summary().empty() ? "" : absl::StrCat("; plan: ", job.plan_summary())));
  auto recorded = Record(std::move(job), std::move(event));
  if (recorded.ok()) ++next_id_;
  return recorded;
}

absl::StatusOr<v1::Job> JobManager::Get(int64_t id) const {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job ", id, "; `mapctl jobs` lists them"));
  return it->second;
}

std::vector<v1::Job> JobManager::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::Job> out;
  for (const auto& [id, job] : jobs_) out.push_back(job);
  return out;
}

absl::Status RetentionOptions::Validate() const {
  if (!(finished_job_seconds > 0) || max_finished_jobs < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--job-retention-seconds ", finished_job_seconds, " and --max-finished-jobs ",
                                                   max_finished_jobs, ": give a positive time and a count of 0 or more"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> JobManager::PruneFinished(const RetentionOptions& retention) {
  absl::MutexLock lock(&mu_);
  const double now = clock_->NowUnixSeconds();
  std::vector<std::pair<double, int64_t>> finished;  // (last change, id)
  for (const auto& [id, job] : jobs_) {
    if (IsFinished(job.state())) finished.emplace_back(job.updated_unix_seconds(), id);
  }
  std::sort(finished.begin(), finished.end());
  const size_t over = finished.size() > static_cast<size_t>(retention.max_finished_jobs)
                          ? finished.size() - static_cast<size_t>(retention.max_finished_jobs) : 0;
  int deleted = 0;
  for (size_t i = 0; i < finished.size(); ++i) {
    const auto [updated, id] = finished[i];
    if (i >= over && now - updated < retention.finished_job_seconds) break;  // oldest first: the rest are kept
    if (auto st = store_->Delete(id); !st.ok()) return st;
    jobs_.erase(id);
    last_seq_.erase(id);
    rank_logs_.Forget(id);
    ++deleted;
  }
  return deleted;
}

absl::Status JobManager::Delete(int64_t id) {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job ", id));
  if (!IsFinished(it->second.state())) {
    return absl::FailedPreconditionError(absl::StrCat("job ", id, " is ", v1::JobState_Name(it->second.state()),
                                                      ": cancel it first (mapctl cancel ", id, ")"));
  }
  if (auto st = store_->Delete(id); !st.ok()) return st;
  jobs_.erase(it);
  last_seq_.erase(id);
  rank_logs_.Forget(id);
  return absl::OkStatus();
}

void JobManager::AppendRankOutput(int64_t id, int rank, std::string_view text, int64_t dropped_before) {
  int ranks = 1;
  {
    absl::MutexLock lock(&mu_);
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return;  // deleted meanwhile
    ranks = it->second.spec().ranks();
  }
  rank_logs_.Append(id, ranks, rank, text, dropped_before);
}

absl::StatusOr<v1::JobLogsResponse> JobManager::RankOutput(const v1::JobLogsRequest& request) const {
  constexpr int kMaxTailLines = 100000;
  bool finished = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = jobs_.find(request.id());
    if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job ", request.id()));
    const int ranks = it->second.spec().ranks();
    if (request.rank() < 0 || request.rank() >= ranks) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", request.rank(), ": job ", request.id(), " has ranks 0..", ranks - 1));
    }
    finished = IsFinished(it->second.state());
  }
  if (request.tail_lines() < 0 || request.tail_lines() > kMaxTailLines) {
    return absl::InvalidArgumentError(absl::StrCat("tail_lines ", request.tail_lines(), ": give 0 (all) to ", kMaxTailLines));
  }
  if (request.after_offset() < 0) return absl::InvalidArgumentError(absl::StrCat("after_offset ", request.after_offset(), " is negative"));
  const RankLogs::Slice slice = rank_logs_.Read(request.id(), request.rank(), request.after_offset(), request.tail_lines());
  v1::JobLogsResponse out;
  out.set_text(slice.text);
  out.set_start_offset(slice.start_offset);
  out.set_next_offset(slice.next_offset);
  out.set_dropped_bytes(slice.dropped_bytes);
  out.set_finished(finished);
  return out;
}

JobManager::Page JobManager::ListPage(int64_t after_id, int limit) const {
  absl::MutexLock lock(&mu_);
  Page page;
  for (auto it = jobs_.upper_bound(after_id); it != jobs_.end(); ++it) {
    if (static_cast<int>(page.jobs.size()) == limit) {
      page.more = true;
      break;
    }
    v1::Job& job = page.jobs.emplace_back(it->second);
    if (job.spec().has_graph()) {
      std::string name = job.spec().graph().name();
      job.mutable_spec()->mutable_graph()->Clear();
      job.mutable_spec()->mutable_graph()->set_name(std::move(name));
    }
  }
  return page;
}

absl::StatusOr<std::vector<v1::JobEvent>> JobManager::Events(int64_t id, int64_t after_seq) const {
  absl::MutexLock lock(&mu_);
  if (!jobs_.count(id)) return absl::NotFoundError(absl::StrCat("no job ", id, "; `mapctl jobs` lists them"));
  return store_->LoadEvents(id, after_seq);
}

bool JobManager::HasPending() const {
  absl::MutexLock lock(&mu_);
  for (const auto& [id, job] : jobs_) {
    if (job.state() == v1::PENDING) return true;
  }
  return false;
}

std::optional<v1::Job> JobManager::NextPending() const {
  absl::MutexLock lock(&mu_);
  for (const auto& [id, job] : jobs_) {
    if (job.state() == v1::PENDING) return job;
  }
  return std::nullopt;
}

std::vector<v1::Job> JobManager::Pending() const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::Job> out;
  for (const auto& [id, job] : jobs_) {
    if (job.state() == v1::PENDING) out.push_back(job);
  }
  return out;
}

absl::StatusOr<v1::Job> JobManager::Note(int64_t id, const std::string& message) {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job ", id, "; `mapctl jobs` lists them"));
  if (IsFinished(it->second.state())) {
    return absl::FailedPreconditionError(absl::StrCat("job ", id, " has finished (", v1::JobState_Name(it->second.state()), ")"));
  }
  v1::JobEvent event;
  event.set_message(message);
  return Record(it->second, std::move(event));
}

absl::StatusOr<v1::Job> JobManager::Transition(int64_t id, v1::JobState to, const std::string& message,
                                               const std::function<void(v1::Job&)>& mutate) {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job ", id, "; `mapctl jobs` lists them"));
  if (!IsAllowedTransition(it->second.state(), to)) {
    return absl::FailedPreconditionError(absl::StrCat("job ", id, " is ", v1::JobState_Name(it->second.state()),
                                                      "; it cannot become ", v1::JobState_Name(to)));
  }
  v1::Job job = it->second;
  job.set_state(to);
  if (mutate) mutate(job);
  v1::JobEvent event;
  event.set_message(message);
  return Record(std::move(job), std::move(event));
}

absl::StatusOr<v1::Job> JobManager::Cancel(int64_t id) {
  auto job = Get(id);
  if (!job.ok()) return job.status();
  if (IsFinished(job->state())) {
    return absl::FailedPreconditionError(absl::StrCat("job ", id, " has already finished (", v1::JobState_Name(job->state()),
                                                      "); nothing to cancel"));
  }
  return Transition(id, v1::CANCELLED, "cancelled by the user");
}

absl::StatusOr<v1::Job> JobManager::RunningJobLocked(int64_t id, absl::string_view does) const {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job ", id));
  if (it->second.state() != v1::RUNNING) {
    return absl::FailedPreconditionError(absl::StrCat("job ", id, " is ", v1::JobState_Name(it->second.state()),
                                                      "; only a RUNNING job ", does));
  }
  return it->second;
}

absl::StatusOr<v1::Job> JobManager::ReportProgress(int64_t id, const JobProgress& p) {
  absl::MutexLock lock(&mu_);
  MAPD_ASSIGN_OR_RETURN(v1::Job job, RunningJobLocked(id, "reports progress"));
  job.set_step(p.step);
  job.set_loss(p.loss);
  if (p.measured_step_seconds > 0) job.set_measured_step_seconds(p.measured_step_seconds);
  // A job's history holds at most about kMaxProgressEvents steps: every stride-th, the first and
  // the last. The others only move the job's step and loss (Get, List), not its events.
  const int64_t steps = std::max<int64_t>(1, job.spec().training().steps());
  const int64_t stride = (steps + kMaxProgressEvents - 1) / kMaxProgressEvents;
  if (p.step != 1 && p.step != steps && p.step % stride != 0) {
    v1::Job& kept = jobs_.at(id);
    kept = std::move(job);
    return kept;
  }
  v1::JobEvent event;
  event.set_message(absl::StrCat("step ", p.step));
  event.set_step(p.step);
  event.set_loss(p.loss);
  event.set_items_per_second(p.items_per_second);
  event.set_peak_bytes(p.peak_bytes);
  event.set_lr(p.lr);
  return Record(std::move(job), std::move(event), /*lifecycle=*/false);
}

absl::StatusOr<v1::Job> JobManager::ReportEvaluation(int64_t id, const v1::Evaluation& evaluation) {
  absl::MutexLock lock(&mu_);
  MAPD_ASSIGN_OR_RETURN(v1::Job job, RunningJobLocked(id, "is evaluated"));
  *job.mutable_last_evaluation() = evaluation;
  v1::JobEvent event;
  event.set_message(absl::StrFormat("eval after step %d: loss %.4f (%d batch%s, no gradients)", evaluation.step(), evaluation.loss(),
                                    evaluation.batches(), evaluation.batches() == 1 ? "" : "es"));
  *event.mutable_evaluation() = evaluation;
  return Record(std::move(job), std::move(event), /*lifecycle=*/false);
}

absl::StatusOr<std::vector<v1::JobEvent>> JobManager::WaitForEvents(int64_t id, int64_t after_seq, double timeout_seconds) const {
  absl::MutexLock lock(&mu_);
  if (!jobs_.count(id)) return absl::NotFoundError(absl::StrCat("no job ", id, "; `mapctl jobs` lists them"));
  auto ready = [&]() {
    auto it = last_seq_.find(id);
    return it != last_seq_.end() && it->second > after_seq;
  };
  mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Seconds(timeout_seconds));
  if (!ready()) return std::vector<v1::JobEvent>{};
  return store_->LoadEvents(id, after_seq);
}

}  // namespace mapd

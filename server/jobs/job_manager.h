// The coordinator's jobs (DESIGN §9): the queue and each job's state machine, persisted through a
// JobStore so a restarted coordinator reloads every job with its history.
//
//   PENDING ◄─► PLANNING ──► RUNNING ──► SUCCEEDED
//      │            │          │  ▲          (PLANNING → PENDING: devices went away meanwhile)
//      │            │          ▼  │
//      │            │       RESTARTING (a lost worker, an elastic job growing: resume from the last checkpoint)
//      ▼            ▼          ▼
//   CANCELLED | FAILED  (from any state that is not finished)
//
// Every change is written (job + event, one transaction) before it is visible, so what a caller
// is told is what a restart reloads. Thread-safe: one mutex serialises the manager, as the gRPC
// handlers and the dispatcher call it from their threads.
#ifndef MAPD_SERVER_JOBS_JOB_MANAGER_H_
#define MAPD_SERVER_JOBS_JOB_MANAGER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "proto/mapd/v1/jobs.pb.h"
#include "server/jobs/job_spec.h"
#include "common/job_state.h"
#include "server/jobs/rank_logs.h"
#include "server/store/job_store.h"

namespace mapd {

// Whether `from` → `to` is an edge of the state machine above.
bool IsAllowedTransition(v1::JobState from, v1::JobState to);

// Progress a running job reports (one event per report).
struct JobProgress {
  int64_t step = 0;
  double loss = 0;
  double items_per_second = 0;
  int64_t peak_bytes = 0;
  double lr = 0;  // the learning rate of the step's update
  double measured_step_seconds = 0;  // the median of rank 0's steps after the first, so far
};

// Decides whether a valid spec (defaults filled in) may be queued, and what to record with it
// (admission.h): its error is the submission's, and nothing is stored. What it returns runs
// with the job's id once it has one, before the job can be seen (the admitted plan kept for it).
using AdmittedFn = std::function<void(int64_t id)>;
using AdmissionFn = std::function<absl::StatusOr<AdmittedFn>(const v1::JobSpec& spec, v1::Job& job)>;

// How long finished jobs are kept (operator settings: mapd --job-retention-seconds,
// --max-finished-jobs). Unfinished jobs are never deleted.
struct RetentionOptions {
  // A finished job (SUCCEEDED, FAILED, CANCELLED) and its events are deleted this long after
  // its last change.
  double finished_job_seconds = 30 * 24 * 3600.0;
  // At most this many finished jobs are kept; past it, the longest-finished go first.
  int max_finished_jobs = 10000;
  absl::Status Validate() const;
};

class JobManager {
 public:
  // Reloads every job from `store` (which, like `clock`, must outlive the manager).
  static absl::StatusOr<std::unique_ptr<JobManager>> Create(JobStore* store, Clock* clock);

  // Runs before a job is queued, outside the manager's lock (planning takes time). None: every
  // valid spec is queued.
  void SetAdmission(AdmissionFn admission) { admission_ = std::move(admission); }
  // Called, under the manager's lock, with each lifecycle event as it is recorded — a
  // submission, a note (placement, failure, resume, a refused report), a state change — not the
  // per-step progress or evaluations (mapd logs them: event_log.h). Set before calls begin.
  using EventSinkFn = std::function<void(const v1::Job&, const v1::JobEvent&)>;
  void SetEventSink(EventSinkFn sink) { sink_ = std::move(sink); }
  // What a submitted spec may ask for (default: SpecLimits' defaults).
  void SetSpecLimits(const SpecLimits& limits) { limits_ = limits; }

  // Validates, admits and queues a job (PENDING). INVALID_ARGUMENT for a bad spec, the
  // admission's error otherwise; nothing is stored for a refused job.
  absl::StatusOr<v1::Job> Submit(const v1::JobSpec& spec);
  // NOT_FOUND for an unknown id.
  absl::StatusOr<v1::Job> Get(int64_t id) const;
  std::vector<v1::Job> List() const;  // by id

  // At most `limit` jobs with ids after `after_id`, by id, each spec's graph reduced to its name;
  // `more` says whether jobs follow the last one.
  struct Page {
    std::vector<v1::Job> jobs;
    bool more = false;
  };
  Page ListPage(int64_t after_id, int limit) const;
  absl::StatusOr<std::vector<v1::JobEvent>> Events(int64_t id, int64_t after_seq = 0) const;
  // Deletes the finished jobs `retention` no longer keeps, with their events; how many it deleted.
  // A deleted job's id is never given again (JobStore::MaxDeletedId).
  absl::StatusOr<int> PruneFinished(const RetentionOptions& retention);
  // The oldest PENDING job, if any.
  std::optional<v1::Job> NextPending() const;
  // Whether a job is PENDING (without copying one: a job may carry a graph of megabytes).
  bool HasPending() const;
  // Every PENDING job, oldest first.
  std::vector<v1::Job> Pending() const;

  // Moves a job along the state machine with a message for its event; FAILED_PRECONDITION for
  // an edge the machine does not have (a finished job stays finished). `mutate` (optional)
  // updates the job's other fields in the same write.
  absl::StatusOr<v1::Job> Transition(int64_t id, v1::JobState to, const std::string& message,
                                     const std::function<void(v1::Job&)>& mutate = nullptr);
  // CANCELLED; FAILED_PRECONDITION if the job has finished.
  absl::StatusOr<v1::Job> Cancel(int64_t id);
  // An event that leaves the state as it is ("waiting for 4 devices", "checkpoint: step 10");
  // FAILED_PRECONDITION for a finished job.
  absl::StatusOr<v1::Job> Note(int64_t id, const std::string& message);
  // A step finished (RUNNING only). The job's step and loss move every time; an event is recorded
  // for at most about kMaxProgressEvents of its steps (every stride-th, the first and the last),
  // so that a long job's history stays bounded.
  absl::StatusOr<v1::Job> ReportProgress(int64_t id, const JobProgress& progress);
  static constexpr int64_t kMaxProgressEvents = 1000;
  // The model was evaluated (RUNNING only): an event saying so, and the job's last evaluation.
  absl::StatusOr<v1::Job> ReportEvaluation(int64_t id, const v1::Evaluation& evaluation);

  // Forgets finished job `id` with its events and output (mapctl delete); NOT_FOUND, or
  // FAILED_PRECONDITION while it has not finished.
  absl::Status Delete(int64_t id);

  // What rank `rank` of job `id` wrote (rank_logs.h), appended by the dispatcher from workers'
  // reports and read by JobService.Logs: NOT_FOUND for an unknown job, INVALID_ARGUMENT for a
  // rank it has not.
  void AppendRankOutput(int64_t id, int rank, std::string_view text, int64_t dropped_before);
  absl::StatusOr<v1::JobLogsResponse> RankOutput(const v1::JobLogsRequest& request) const;

  // Blocks until the job has an event after `after_seq` or `timeout_seconds` pass; returns them
  // (empty on timeout). For Watch streams.
  absl::StatusOr<std::vector<v1::JobEvent>> WaitForEvents(int64_t id, int64_t after_seq, double timeout_seconds) const;

 private:
  JobManager(JobStore* store, Clock* clock) : store_(store), clock_(clock) {}
  // Writes the job with a new event (seq = last + 1) and keeps it. Requires mu_.
  // `lifecycle`: the event goes to the sink too.
  absl::StatusOr<v1::Job> Record(v1::Job job, v1::JobEvent event, bool lifecycle = true) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A copy of RUNNING job `id`; NOT_FOUND, or FAILED_PRECONDITION saying "only a RUNNING job `does`".
  absl::StatusOr<v1::Job> RunningJobLocked(int64_t id, absl::string_view does) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  JobStore* store_;
  Clock* clock_;
  AdmissionFn admission_;
  EventSinkFn sink_;
  mutable absl::Mutex mu_;
  std::map<int64_t, v1::Job> jobs_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, int64_t> last_seq_ ABSL_GUARDED_BY(mu_);
  SpecLimits limits_;  // set before calls begin
  RankLogs rank_logs_;
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace mapd

#endif  // MAPD_SERVER_JOBS_JOB_MANAGER_H_

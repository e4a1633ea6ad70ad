// What workers tell the dispatcher: heartbeats (answered with the parts a worker is to start and
// the jobs whose ranks it is to stop) and reports (a part's steps, ranks' output, evaluations,
// written checkpoints, rank 0's store address, and its end). A report no rank of the job could
// have sent is refused whole.
#include "server/dispatch/dispatcher.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/bytes.h"
#include "common/checkpoint/checkpoint_commit.h"
#include "common/report_limits.h"

namespace mapd {

namespace {

// The most rank steps one report may carry (workers send theirs at least every 256, job_runner.cc).
constexpr int kMaxStepsPerReport = 4096;
// And evaluations (one per eval_every steps at most; a worker sends each as it comes).
constexpr int kMaxEvaluationsPerReport = 256;

bool AssignsRank(const v1::RankAssignment& a, int32_t rank) {
  return std::find(a.ranks().begin(), a.ranks().end(), rank) != a.ranks().end();
}

bool HasRankZero(const v1::RankAssignment& a) { return AssignsRank(a, 0); }

// A store address a worker reports: host:port, bounded, printable, no spaces.
absl::Status CheckStoreAddress(const std::string& address) {
  const size_t colon = address.rfind(':');
  int port = 0;
  const bool printable = std::all_of(address.begin(), address.end(), [](char c) { return c > ' ' && c < 127; });
  if (address.size() > 256 || !printable || colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 1 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("store_address '", address.substr(0, 64), "' is not host:port (at most 256 characters)"));
  }
  return absl::OkStatus();
}

// The ranks' output a report carries: only this worker's ranks, within the per-report bound.
absl::Status CheckRankOutputs(const v1::ReportRequest& report, const v1::RankAssignment& assignment) {
  // A worker keeps at least kMinRankOutputBufferBytes a rank, so a report may carry that much
  // for each of its ranks even past the per-report bound.
  const int64_t bound = std::max<int64_t>(kMaxRankOutputBytesPerReport, kMinRankOutputBufferBytes * assignment.ranks_size());
  int64_t bytes = 0;
  for (const v1::RankOutput& o : report.outputs()) {
    if (std::find(assignment.ranks().begin(), assignment.ranks().end(), o.rank()) == assignment.ranks().end()) {
      return absl::InvalidArgumentError(absl::StrCat("output of rank ", o.rank(), ", which does not run on worker ", report.worker_id()));
    }
    if (o.dropped_bytes() < 0) return absl::InvalidArgumentError(absl::StrCat("output of rank ", o.rank(), ": dropped_bytes < 0"));
    bytes += static_cast<int64_t>(o.text().size());
  }
  if (bytes > bound) {
    return absl::InvalidArgumentError(absl::StrCat("a report of ", bytes, " bytes of ranks' output; workers send at most ", bound));
  }
  return absl::OkStatus();
}

// A report of a job of `spec` from the worker that runs `assignment`: within the bounds on what one
// report carries, and nothing no rank of that part could send (evaluations from a part without
// rank 0, a step past the job's, a store address that is not host:port).
absl::Status CheckReport(const v1::ReportRequest& report, const v1::JobSpec& spec, const v1::RankAssignment& assignment) {
  const int64_t id = report.job_id();
  if (report.steps_size() > kMaxStepsPerReport) {
    return absl::InvalidArgumentError(absl::StrCat("a report of ", report.steps_size(), " steps; workers send at most ",
                                                   kMaxStepsPerReport, " at once"));
  }
  if (report.evaluations_size() > kMaxEvaluationsPerReport ||
      (report.evaluations_size() > 0 && (spec.training().eval_every() <= 0 || !HasRankZero(assignment)))) {
    return absl::InvalidArgumentError(absl::StrCat("a report of ", report.evaluations_size(), " evaluations of job ", id,
                                                   ", whose rank 0 evaluates every ", spec.training().eval_every(), " steps"));
  }
  if (auto st = CheckRankOutputs(report, assignment); !st.ok()) return st;
  if (report.checkpoint_step() > spec.training().steps()) {
    // No rank of this job writes such a step: a forged or broken report, not counted.
    return absl::InvalidArgumentError(absl::StrCat("checkpoint step ", report.checkpoint_step(), " of job ", id,
                                                   ", which trains ", spec.training().steps(), " steps"));
  }
  if (!report.store_address().empty() && HasRankZero(assignment)) {
    if (auto st = CheckStoreAddress(report.store_address()); !st.ok()) return st;
  }
  return absl::OkStatus();
}

// "; step 45.1 ms measured (median), 38.6 ms predicted (1.17x)": a finished job's step time beside
// its plan's (nothing when no step after the first was measured).
std::string StepTimeLine(double measured, double predicted) {
  if (!(measured > 0)) return "";
  return absl::StrCat(absl::StrFormat("; step %.1f ms measured (median), ", measured * 1e3),
                      predicted > 0 ? absl::StrFormat("%.1f ms predicted (measured / predicted %.2f)", predicted * 1e3, measured / predicted)
                                    : "none predicted");
}

}  // namespace

void Dispatcher::OnHeartbeat(const std::string& worker_id, const std::vector<int64_t>& running, v1::HeartbeatResponse* out) {
  {
    absl::MutexLock lock(&mu_);
    HeartbeatLocked(worker_id, running, out);
  }
  RunEffects();
}

void Dispatcher::HeartbeatLocked(const std::string& worker_id, const std::vector<int64_t>& running, v1::HeartbeatResponse* out) {
  const std::set<int64_t> runs(running.begin(), running.end());
  // Without shared storage, the jobs whose shards the worker is to go on keeping (the rest it drops).
  v1::ShardKeep* keep = options_.checkpoint_dir.empty() ? out->mutable_shard_keep() : nullptr;
  for (auto& [id, job] : active_) {
    if (keep != nullptr && KeepsShards(job, worker_id)) keep->add_job_ids(id);
    // A job recovered after a coordinator restart waits for the ranks of its earlier attempt
    // (told to stop below: no part of it runs there yet).
    if (job.phase == Phase::kRecovering) {
      if (runs.count(id)) {
        job.held_by.insert(worker_id);
      } else {
        job.held_by.erase(worker_id);
      }
    }
    // The peer of a part keeps its shards (dispatcher_shards.cc): admitted by the job's secret,
    // which it has from an assignment of its own or, keeping for a job it does not run, here.
    if (std::any_of(job.parts.begin(), job.parts.end(), [&](const Part& p) { return p.shard_peer_id == worker_id; })) {
      v1::ShardGrant* grant = out->add_shard_grants();
      grant->set_job_id(id);
      grant->set_secret(job.shard_secret);
      grant->set_committed_step(job.checkpoints.committed());
    }
    for (Part& part : job.parts) {
      if (part.worker_id != worker_id || part.finished) continue;
      if (job.stopping()) {
        out->add_cancel_job_ids(id);
        if (!runs.count(id)) part.finished = true;  // never started there, or already ended
      } else if (!runs.count(id) && (HasRankZero(part.assignment) || !part.assignment.store_address().empty())) {
        // The part with rank 0 first; the others once rank 0 hosts the rendezvous store.
        *out->add_assignments() = part.assignment;
      }
    }
  }
  for (int64_t id : runs) {
    auto it = active_.find(id);
    bool ours = false;
    if (it != active_.end()) {
      for (const Part& p : it->second.parts) ours = ours || p.worker_id == worker_id;
    }
    if (!ours) out->add_cancel_job_ids(id);  // a job this coordinator does not run there
  }
  ReapLocked();
}

absl::StatusOr<v1::ReportResponse> Dispatcher::OnReport(const v1::ReportRequest& report) {
  absl::StatusOr<v1::ReportResponse> out;
  {
    absl::MutexLock lock(&mu_);
    out = ReportLocked(report);
  }
  RunEffects();
  return out;
}

absl::StatusOr<v1::ReportResponse> Dispatcher::ReportLocked(const v1::ReportRequest& report) {
  auto it = active_.find(report.job_id());
  Part* part = nullptr;
  if (it != active_.end()) {
    for (Part& p : it->second.parts) {
      if (p.worker_id == report.worker_id()) part = &p;
    }
  }
  if (part == nullptr) {
    return absl::NotFoundError(absl::StrCat("job ", report.job_id(), " does not run on worker ", report.worker_id(),
                                            " here; stop its ranks"));
  }
  const int64_t id = report.job_id();
  ActiveJob& job = it->second;
  if (report.attempt() != job.attempt) {
    // From the attempt before a restart: its ranks are to stop (and their end lets the job be
    // placed again).
    if (job.restarting() && report.finished()) part->finished = true;
    v1::ReportResponse out;
    out.set_cancel(true);
    ReapLocked();
    return out;
  }
  // Nothing of a report that no rank of this job could send is taken.
  if (auto st = CheckReport(report, job.spec, part->assignment); !st.ok()) return st;
  if (!report.store_address().empty() && HasRankZero(part->assignment)) {  // (its address checked above)
    for (Part& p : job.parts) {
      if (!HasRankZero(p.assignment)) p.assignment.set_store_address(report.store_address());
    }
  }
  const bool was_stopping = job.stopping();
  RecordProgressLocked(id, job, report, part->assignment);
  const int part_index = static_cast<int>(part - job.parts.data());
  if (report.checkpoint_step() > 0 && !job.stopping() &&
      job.checkpoints.Written(report.checkpoint_step(), part_index, static_cast<int>(job.parts.size()))) {
    CommitCheckpointLocked(id, job, report.checkpoint_step());
  }
  for (const v1::RankStep& s : report.steps()) {
    if (s.step() == job.spec.training().steps() && AssignsRank(part->assignment, s.rank())) part->ranks_at_last_step.insert(s.rank());
  }
  v1::ReportResponse out;
  if (report.finished() && !part->finished) {
    const bool resumed_at_the_end = part->assignment.resume_step() >= job.spec.training().steps();  // nothing left to train
    if (report.code() == 0 && !job.stopping() && !resumed_at_the_end &&
        static_cast<int>(part->ranks_at_last_step.size()) < part->assignment.ranks_size()) {
      // Ended "OK" before its last step: not a success — its peers train on, and their
      // collectives fail if these ranks are truly gone (a failure then, handled as one).
      const std::string why = absl::StrCat("worker ", report.worker_id(), " reported its ranks of job ", id, " finished OK, but ",
                                           part->assignment.ranks_size() - static_cast<int>(part->ranks_at_last_step.size()), " of its ",
                                           part->assignment.ranks_size(), " rank(s) never reported the last step (", job.spec.training().steps(),
                                           "); the report is refused and the job goes on");
      if (!part->early_end_noted) Defer([this, id, why] { (void)jobs_->Note(id, why); });  // once: a worker cannot flood the history
      part->early_end_noted = true;
      ReapLocked();
      return absl::FailedPreconditionError(why);
    }
    part->finished = true;
    if (report.code() != 0 && !job.stopping()) {
      // Stop the other parts; FAILED or RESTARTING once they have ended (SettleFailureLocked).
      MoveLocked(id, job, Phase::kStopping);
      job.failure = absl::StrCat("worker ", report.worker_id(), ": ", report.error());
      // (a code no absl status has, from a broken or forged report, counts as UNKNOWN)
      job.failure_code = report.code() >= 1 && report.code() <= 16 ? static_cast<absl::StatusCode>(report.code()) : absl::StatusCode::kUnknown;
      if (!job.parts_ended()) Defer([this, id, why = absl::StrCat(job.failure, "; stopping the other ranks")] { (void)jobs_->Note(id, why); });
    } else if (!job.stopping() && job.parts_ended()) {
      MoveLocked(id, job, Phase::kStopping);
      const JobProgressStats& p = job.progress;
      Defer([this, id, message = absl::StrCat(absl::StrFormat("trained %d steps on %d rank(s): loss %.4f -> %.4f; worst rank's peak %s", p.last_step,
                                                              job.plan->world(), p.first_loss, p.last_loss, FormatBytes(p.worst_peak_bytes)),
                                              StepTimeLine(p.MedianStepSeconds(), job.plan->predicted_step_seconds))] {
        (void)jobs_->Transition(id, v1::SUCCEEDED, message);
      });
    }
  }
  // A finished report is told whether the job was stopping before it came (its ranks were then
  // stopped, or failed because their peers were); a running one whether to stop now.
  out.set_cancel(report.finished() ? was_stopping : job.stopping());
  out.set_committed_step(job.checkpoints.committed());
  ReapLocked();
  return out;
}

void Dispatcher::RecordProgressLocked(int64_t id, ActiveJob& job, const v1::ReportRequest& report, const v1::RankAssignment& a) {
  for (const v1::RankStep& s : report.steps()) {
    if (!job.progress.Add(s, job.spec.training().steps()) || job.stopping()) continue;
    JobProgress p;
    p.step = s.step();
    p.loss = s.loss();
    p.items_per_second = s.seconds() > 0 ? static_cast<double>(a.items_per_step()) / s.seconds() : 0;
    p.peak_bytes = job.progress.worst_peak_bytes;
    p.lr = s.lr();
    p.measured_step_seconds = job.progress.MedianStepSeconds();
    Defer([this, id, p] { (void)jobs_->ReportProgress(id, p); });
  }
  // Output counts even from a job that is stopping: a failing rank's last words are in it.
  for (const v1::RankOutput& o : report.outputs()) {
    Defer([this, id, o] { jobs_->AppendRankOutput(id, o.rank(), o.text(), o.dropped_bytes()); });
  }
  for (const v1::Evaluation& e : report.evaluations()) {
    if (e.step() < 1 || e.step() > job.spec.training().steps() || job.stopping()) continue;
    Defer([this, id, e] { (void)jobs_->ReportEvaluation(id, e); });
  }
}

void Dispatcher::CommitCheckpointLocked(int64_t id, ActiveJob& job, int64_t step) {
  const v1::CheckpointMeta meta = CheckpointMetaFor(step, job.plan->world(), job.plan->mesh, job.plan->checkpoint_plan);
  if (options_.checkpoint_dir.empty()) {
    // Each worker committed its shards on its own disk and its peer keeps a copy (a job on one
    // worker: on it alone).
    job.checkpoints.Committed(step);
    job.committed_under = meta;
    NoteShardHoldersLocked(job);
    Defer([this, id, step, peers = PeersOf(job)] {
      (void)jobs_->Note(id, absl::StrCat("checkpoint: step ", step, " committed on every worker; each worker's shards kept by a peer too (",
                                         peers, ")"));
    });
    // (It grows only while every rank's shards are kept where a resume can fetch them: workers
    // started without a shard service keep them for no one.)
    if (UnkeptRanksLocked(job).empty()) MaybeGrowLocked(id, job, step);
  } else {
    // Every rank's shard is on the shared storage: commit the step (checkpoint_commit.h),
    // outside the lock; the job resumes from it once it is recorded.
    Defer([this, id, attempt = job.attempt, dir = JobCheckpointDir(id), meta] {
      const absl::Status st = CommitCheckpointStep(dir, meta, options_.keep_checkpoints, attempt);  // that attempt's shards
      if (st.ok()) {
        absl::MutexLock lock(&mu_);
        auto it = active_.find(id);
        if (it != active_.end() && it->second.attempt == attempt) {
          it->second.checkpoints.Committed(meta.step());
          it->second.committed_under = meta;
          MaybeGrowLocked(id, it->second, meta.step());  // (its event comes after this batch's)
        }
      }
      (void)jobs_->Note(id, st.ok() ? absl::StrCat("checkpoint: step ", meta.step(), " committed to ", CheckpointStepDir(dir, meta.step()))
                                    : absl::StrCat("checkpoint: step ", meta.step(), " not committed: ", st.message()));
    });
  }
}

}  // namespace mapd

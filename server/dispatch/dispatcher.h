// The dispatcher (DESIGN §9): runs queued jobs on registered workers.
//
// Two halves, each called a few times a second on a thread of its own in the server, so that
// planning a large model (seconds) never delays noticing a lost worker, a cancel or a restart:
//   1. (Watch) A running job one of whose workers was lost (lease ran out) FAILS, naming the worker and
//      its ranks; the other workers are told to stop theirs. A job the manager finished meanwhile
//      (cancelled by the user) is stopped on its workers the same way.
//   2. (StartPending) PENDING jobs, oldest first, start when ALIVE workers have enough free devices of the job's
//      kind (cpu or cuda) with the memory the job's budget asks for: PLANNING — the plan searched, lowered to one program per
//      rank and checked against the budget (job_planner.h) — then the ranks are placed, the job's
//      job is RUNNING. A job that does not
//      fit now waits (one event says for what); a later, smaller one may start before it.
// Placement fills the workers with the most free devices first, with consecutive ranks together,
// so the innermost mesh axis (the one with the most traffic) stays inside a worker.
//
// Workers receive their part (RankAssignment) in heartbeat responses — again on each heartbeat
// until they list the job as running — and report steps, checkpoints and their outcome (Report).
// Rank 0's process hosts the job's rendezvous store (as torchrun's rank 0 does): the part with
// rank 0 is sent first; its worker reports the store's address, and the other parts are sent
// with it.
// Rank 0's steps are the job's progress. When every worker has finished OK — each of its ranks
// having reported the job's last step first; an earlier end is refused, naming the ranks — the
// job SUCCEEDS;
// the first failure stops the other parts and, once they have all ended, is settled as a lost
// worker's (below) — if a worker was lost meanwhile, or the failure is one a restart can cure (a
// link broken or slow past the rank timeout, a full disk, a killed rank: any code but those of
// an invalid program or input) — or FAILS the job with the failing rank's error. A job's devices
// stay taken until its workers say its ranks have ended (or are lost).
//
// A lost worker (or a rank failure a restart can cure): with shared checkpoint storage
// (DispatchOptions::checkpoint_dir) and a step committed there — or, without, each rank's shards
// of it on a live worker — the job goes RESTARTING — its other ranks are stopped, and once they have
// ended it is placed again with the same plan and world size (on any free devices of its kind)
// and resumes from that step (RUNNING again); otherwise, or after `max_restarts`, it FAILS.
// An elastic job (JobSpec.elastic; elastic.h) starts on the devices free when fewer than it asks
// for (at least its min_devices, if a plan fits them). After a lost worker it waits
// `elastic_grace_seconds` for as many devices, then goes on with those left (at least its
// min_devices): planned for them (StartPending plans the counts it lacks, outside the lock) and
// resumed from the step resharded. At each checkpoint committed later, while no job is PENDING,
// it grows into free devices (up to max_devices): its ranks are stopped (RESTARTING, no restart
// counted) and it resumes on more.
//
// After a coordinator restart (the first round): jobs that were PLANNING go back to the queue.
// Jobs that were RUNNING or RESTARTING resume like a lost worker's job when a step of theirs is
// committed on the shared checkpoint storage and they have restarts left (a coordinator restart
// counts as one): planned again (the plan must be the checkpoint's), RESTARTING, and placed with
// the next attempt number once a lease period has passed — every live worker has heartbeated to
// this coordinator by then — and no worker lists the job's earlier ranks any more (workers that
// do are told to stop them). Otherwise they FAIL saying why (a restarted coordinator does not
// adopt running ranks: they are told to stop).
//
// Thread-safe. The job store's writes (events, progress, state changes) and the shared-storage
// checkpoint commit are queued under the dispatcher's mutex (Defer) and run after it is released
// (RunEffects), one batch at a time in the order queued — so a heartbeat never waits for SQLite
// or a shared filesystem. A checkpoint step counts for a restart once its commit has run: a
// worker lost in the moment between (microseconds) restarts from the step before. Lock order:
// the effects' mutex, then the dispatcher's, then the job manager's and the registry's.
//
// One class behind one lock, defined in a file per part: dispatcher.cc (the two halves, phases,
// effects), dispatcher_placement.cc, dispatcher_reports.cc (heartbeats and reports),
// dispatcher_recovery.cc (restarts, a coordinator restart) and dispatcher_elastic.cc.
#ifndef MAPD_SERVER_DISPATCH_DISPATCHER_H_
#define MAPD_SERVER_DISPATCH_DISPATCHER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "proto/mapd/v1/checkpoint.pb.h"
#include "proto/mapd/v1/workers.pb.h"
#include "server/dispatch/elastic.h"
#include "server/dispatch/job_tracking.h"
#include "server/jobs/admitted_plans.h"
#include "server/jobs/job_manager.h"
#include "server/jobs/job_planner.h"
#include "server/workers/worker_registry.h"

namespace mapd {

struct DispatchOptions {
  // Storage the coordinator and every worker reach at this path (a shared filesystem; any
  // directory on one machine): jobs' checkpoints go to DIR/job-<id>/ and the coordinator
  // commits each step once every rank has written its shard, so a job whose worker is lost can
  // resume (RESTARTING). Empty: each worker keeps its own ranks' checkpoints and a lost worker
  // fails the job.
  std::string checkpoint_dir;
  // How many times a job may resume after lost workers or rank failures before it fails.
  int max_restarts = 3;
  // Committed steps kept per job on that storage (mapd --keep-checkpoints): each commit deletes
  // the steps older than the newest this many (never the one LATEST names).
  int keep_checkpoints = 3;
  // How long an elastic job whose worker was lost waits for as many devices as it had before it
  // goes on with fewer (mapd --elastic-grace-seconds): a worker restarting in place comes back
  // within it and the job keeps its plan.
  double elastic_grace_seconds = 10;
  absl::Status Validate() const;
};

class Dispatcher {
 public:
  // Everything given must outlive the dispatcher. `admitted`: the plans admission made (a job
  // starts on its own when it is there and for the devices the job gets); null: every job is
  // planned as it starts.
  Dispatcher(JobManager* jobs, WorkerRegistry* workers, DispatchOptions options, PlanJobFn plan = PlanJob,
             AdmittedPlans* admitted = nullptr);

  // Watch then StartPending: one round on one thread (tests; a server without threads).
  void Tick();
  // Half 1 (above): recovery after a restart (first call), lost workers, cancelled jobs, ended
  // jobs, restarts. Never plans a new job.
  void Watch();
  // Half 2 (above): starts PENDING jobs, planning each outside the dispatcher's lock. Does
  // nothing until Watch has recovered the previous coordinator's jobs.
  void StartPending();

  // Adds to a heartbeat's response the assignments `worker_id` has not started yet and the jobs
  // whose ranks it must stop (`running` are the jobs it runs now).
  void OnHeartbeat(const std::string& worker_id, const std::vector<int64_t>& running, v1::HeartbeatResponse* out);

  // A worker's report on its ranks of a job. NOT_FOUND when the coordinator does not run that
  // job on that worker (the worker should stop its ranks).
  absl::StatusOr<v1::ReportResponse> OnReport(const v1::ReportRequest& report);

  // Devices taken by running jobs, per worker id.
  std::map<std::string, int> BusyDevices() const;

  // The spec the job is planned with now: with no device_type, the measured profile of the
  // workers it would run on (measured_profiles.h). Every plan the dispatcher makes uses it.
  v1::JobSpec CostedSpec(const v1::JobSpec& spec) const;

 private:
  struct Part {
    std::string worker_id;
    v1::RankAssignment assignment;
    bool finished = false;  // its ranks have ended (reported), or its worker was lost
    // Its ranks that have reported the job's last step: a part whose ranks end OK before every
    // one of them has is refused (a broken or forged report), and the job goes on.
    std::set<int32_t> ranks_at_last_step;
    bool early_end_noted = false;  // such a refusal is in the job's events (once a part)
    // Without shared storage: the worker that keeps a copy of this part's checkpoint shards
    // (empty: none).
    std::string shard_peer_id;
  };
  // A worker keeping a rank's shards of the committed step, and its shard service's address.
  struct ShardHolder {
    std::string worker_id;
    std::string address;
  };
  // Where a job the dispatcher runs is. MoveLocked is the one place it changes:
  //   (placed) ──────────────────────────────────────────────► kRunning
  //   kRunning ── succeeded, failed, a failure reported, cancelled ─► kStopping (parts end; dropped)
  //   kRunning | kStopping ── a worker lost, a checkpoint to resume ─► kRestarting (parts end;
  //                                                                    placed again → kRunning)
  //   (a coordinator restart, a checkpoint to resume) ────────────► kRecovering (the previous
  //        coordinator's ranks end and a lease passes; placed again → kRunning)
  //   kRestarting | kRecovering ── cancelled by the user ──────────► kStopping
  enum class Phase { kRunning, kStopping, kRestarting, kRecovering };
  static const char* PhaseName(Phase p);
  struct ActiveJob {
    v1::JobSpec spec;
    std::shared_ptr<const RunnablePlan> plan;  // kept to place the job again after a lost worker
    std::vector<Part> parts;
    Phase phase = Phase::kRunning;
    bool stopping() const { return phase != Phase::kRunning; }  // no new assignments; parts told to stop
    bool restarting() const { return phase == Phase::kRestarting || phase == Phase::kRecovering; }
    // What its wait to resume was last told as ("devices", "grace", "plan"; empty: not waiting),
    // so that each kind of wait has one event.
    std::string told_wait;
    // The first rank failure a worker reported while the job ran ("worker w-2: rank 2 exited
    // ..."), and a worker lost after it. The job's fate waits until every part has ended: a
    // worker that dies takes its ranks with it, and their peers on other workers fail at once
    // ("connection closed by peer"), seconds before its lease runs out; that failure is the lost
    // worker's, so the job restarts like any other lost-worker job rather than failing.
    std::string failure;
    absl::StatusCode failure_code = absl::StatusCode::kOk;  // the failing part's (ReportRequest.code)
    std::string lost;
    // kRecovering: the workers that still list the job's earlier ranks (it waits until they
    // have stopped them).
    std::set<std::string> held_by;
    int attempt = 0;   // the run of the job its ranks are: workers start each (job, attempt) once
    int restarts = 0;  // attempts after a lost worker, a rank failure or a coordinator restart (--max-restarts)
    // The world, mesh and plan the committed step was written under: a placement under another
    // plan resumes from it resharded.
    v1::CheckpointMeta committed_under;
    // Elastic jobs (elastic.h): the plans by device count; while restarting, fewer devices than
    // `devices_before` only once `resize_after` (unix seconds) has passed (the grace for a
    // replacement); the counts StartPending is to plan next (plan_from down to plan_to, 0: none).
    ElasticPlans plans;
    int devices_before = 0;
    double resize_after = 0;
    int plan_from = 0, plan_to = 0;
    JobProgressStats progress;
    CheckpointTracker checkpoints;
    // Without shared storage (dispatcher_shards.cc): the secret of the job's shards on workers'
    // shard services (drawn at its first placement, the same for every attempt), and who keeps
    // each rank's shards of the committed step (its own worker, then its part's peer).
    std::string shard_secret;
    std::map<int32_t, std::vector<ShardHolder>> shard_holders;
    bool parts_ended() const {
      for (const Part& p : parts) {
        if (!p.finished) return false;
      }
      return true;
    }
  };

  // Defined in dispatcher.cc (the loop and the phases):
  // Queues a write to the job store or shared storage for RunEffects (above).
  void Defer(std::function<void()> effect) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { effects_.push_back(std::move(effect)); }
  void RunEffects() ABSL_LOCKS_EXCLUDED(mu_, effects_mu_);
  // The job's one phase change (above); a move the diagram has not is a bug in the dispatcher.
  void MoveLocked(int64_t id, ActiveJob& job, Phase to) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The first failure of a running job: FAILED with `why`, the other parts stopped.
  void FailLocked(int64_t id, ActiveJob& job, const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After the move to RUNNING: when the store refused it, stops the job's ranks and fails it.
  void StopIfUnrecorded(int64_t id, const absl::Status& moved) ABSL_LOCKS_EXCLUDED(mu_);
  // Once every part of a job with a reported failure has ended: RESTARTING (or FAILED) as for a
  // lost worker if one was lost meanwhile or the failure's code is one a restart can cure
  // (RestartsAfter: a broken link, a timeout, a full disk, a killed rank), FAILED with the reported
  // failure otherwise (an invalid program fails the same way wherever it runs).
  void SettleFailureLocked(int64_t id, ActiveJob& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Settles the failures of jobs whose parts have all ended, then drops those jobs (not those
  // restarting).
  void ReapLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string JobCheckpointDir(int64_t id) const;

  // Defined in dispatcher_reports.cc (what workers tell):
  void HeartbeatLocked(const std::string& worker_id, const std::vector<int64_t>& running, v1::HeartbeatResponse* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<v1::ReportResponse> ReportLocked(const v1::ReportRequest& report) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A report's steps (rank 0's are the job's progress), its ranks' output and its evaluations, as
  // events for the job store; `a` is the reporting part's assignment.
  void RecordProgressLocked(int64_t id, ActiveJob& job, const v1::ReportRequest& report, const v1::RankAssignment& a)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every part has written checkpoint `step`: committed on the shared storage after the lock (the
  // job may grow then), or noted as committed on every worker without it.
  void CommitCheckpointLocked(int64_t id, ActiveJob& job, int64_t step) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Defined in dispatcher_placement.cc (placement):
  // Starts `job` if devices allow (an elastic job on fewer, at least its min_devices); false when
  // it must wait.
  bool TryStart(const v1::Job& job);
  // TryStart's end, under the lock: places the job planned for `devices` (`elastic_start` says how
  // many it asks for when fewer) and queues its move to RUNNING; false when it must wait (back in
  // the queue: devices went away while it was planned).
  bool StartOnPlanLocked(const v1::JobSpec& spec, int64_t id, std::shared_ptr<const RunnablePlan> plan, int devices,
                         const std::string& elastic_start) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Places the job's ranks on free devices (consecutive ranks, workers with the most free devices
  // first) and makes its parts; FAILED_PRECONDITION (saying what it waits for) when devices are
  // short.
  absl::Status PlaceLocked(int64_t id, ActiveJob& job, int64_t resume_step) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static std::string WaitingMessage(const v1::JobSpec& spec, int devices, int free);
  static std::string Where(const ActiveJob& job);  // "w-1 (rank 0-1), w-2 (rank 2-3)"
  // Free devices a job of `spec` could run on: of its kind, with its budget each.
  int FreeForLocked(const v1::JobSpec& spec) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Devices taken by parts whose ranks have not ended, per worker id.
  std::map<std::string, std::set<std::string>> BusyLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Free devices (names) of `kind` ("cpu", "cuda") per ALIVE worker with at least `min_memory`
  // bytes each.
  std::map<std::string, std::vector<std::string>> FreeDevicesLocked(const std::string& kind, int64_t min_memory) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Defined in dispatcher_recovery.cc (restarts, and recovery after a coordinator restart):
  // A lost worker, or a rank failure the job's program is not at fault for (RestartsAfter):
  // RESTARTING when a committed checkpoint the job can reach and a restart left allow (the other
  // parts are stopped, then the job is placed again), FAILED otherwise — the message says which.
  void LoseLocked(int64_t id, ActiveJob& job, const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Places a RESTARTING job again, from its committed step, when devices allow.
  void TryResumeLocked(int64_t id, ActiveJob& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // An event saying why the job waits to resume, unless the last one was of the same kind.
  void TellWaitLocked(int64_t id, ActiveJob& job, const std::string& kind, const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Jobs left PLANNING, RUNNING or RESTARTING by a previous coordinator (once, on the first
  // round): queued again, resumed from their checkpoint, or FAILED (above).
  void RecoverOrphans();
  // A job that was RUNNING or RESTARTING under the previous coordinator, ready to resume from its
  // last committed checkpoint; FAILED_PRECONDITION saying why it cannot.
  absl::StatusOr<ActiveJob> RecoverJob(const v1::Job& job);
  // A recovered job may be placed: a lease period has passed since this coordinator's first
  // round and no ALIVE worker lists its earlier ranks.
  bool RecoveredMayResumeLocked(const ActiveJob& job) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Defined in dispatcher_shards.cc (checkpoints without shared storage, kept by peer workers):
  // The job's shard secret and each part's peer — the next part's worker, in a ring; a job on one
  // worker, another live worker with a shard service (granted the secret in its heartbeats) — set
  // in its assignment, and where a resume's shards are (`resume_step` > 0).
  absl::Status AssignShardPeersLocked(ActiveJob& job, int64_t resume_step) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The committed step's holders, from the parts that reported it (each kept by its peer too).
  void NoteShardHoldersLocked(ActiveJob& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ranks of the committed step that no ALIVE worker keeps (all of them when none is noted).
  std::vector<int32_t> UnkeptRanksLocked(const ActiveJob& job) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // "w-1 on w-2, w-2 on w-1": whose shards each peer keeps.
  static std::string PeersOf(const ActiveJob& job);
  // Whether `worker_id` runs a part of the job, is a part's peer or holds a rank's shards of its
  // committed step: its shards there are to be kept (HeartbeatResponse.shard_keep).
  static bool KeepsShards(const ActiveJob& job, const std::string& worker_id);

  // Defined in dispatcher_elastic.cc (the elastic policy):
  // An elastic job's plan for the most of `devices` (down to its min_devices, at most
  // kElasticPlansPerRound counts) that a plan fits; FAILED_PRECONDITION saying why none does.
  absl::StatusOr<RunnablePlan> PlanSmallerStart(const v1::JobSpec& spec, int devices) const;
  // An elastic job about to resume: its plan for the most devices free now (within its bounds
  // and, during the grace, no fewer than before); false when it must wait — for devices, or for
  // StartPending to plan the counts it lacks — with one event for each kind of wait.
  bool ChooseElasticPlanLocked(int64_t id, ActiveJob& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // At a committed checkpoint of a running elastic job: RESTARTING to grow into free devices
  // when a plan for more is at hand and no job is PENDING.
  void MaybeGrowLocked(int64_t id, ActiveJob& job, int64_t step) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The most devices an elastic job could run on with `free` more, within its max_devices.
  int GrowthCeilingLocked(const ActiveJob& job, int free) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Asks StartPending for plans of running elastic jobs for the devices they could grow into.
  void WantGrowthPlansLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Plans the device counts elastic jobs asked for (outside the lock; StartPending's thread).
  void PlanElasticCounts() ABSL_LOCKS_EXCLUDED(mu_);

  JobManager* jobs_;
  WorkerRegistry* workers_;
  DispatchOptions options_;
  PlanJobFn plan_;
  AdmittedPlans* admitted_;
  absl::Mutex effects_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  std::vector<std::function<void()>> effects_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, ActiveJob> active_ ABSL_GUARDED_BY(mu_);
  std::set<int64_t> told_waiting_ ABSL_GUARDED_BY(mu_);  // pending jobs whose wait has an event
  // Pending elastic jobs no plan fitted on fewer devices than they ask for: they wait for all.
  std::set<int64_t> small_start_refused_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> orphans_checked_{false};  // set by Watch once it has recovered them
  double recover_after_ ABSL_GUARDED_BY(mu_) = 0;  // when recovered jobs may be placed (unix seconds)
};

}  // namespace mapd

#endif  // MAPD_SERVER_DISPATCH_DISPATCHER_H_

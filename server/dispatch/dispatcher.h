// The dispatcher (DESIGN §9): runs queued jobs on registered workers.
//
// One round (Tick, on the server's dispatch thread, a few times a second):
//   1. A running job one of whose workers was lost (lease ran out) FAILS, naming the worker and
//      its ranks; the other workers are told to stop theirs. A job the manager finished meanwhile
//      (cancelled by the user) is stopped on its workers the same way.
//   2. PENDING jobs, oldest first, start when ALIVE workers have enough free devices of the job's
//      kind (cpu or cuda) with the memory the job's budget asks for: PLANNING — the plan searched, lowered to one program per
//      rank and checked against the budget (job_planner.h) — then the ranks are placed, the job's
//      rendezvous store opened on the coordinator, and the job is RUNNING. A job that does not
//      fit now waits (one event says for what); a later, smaller one may start before it.
// Placement fills the workers with the most free devices first, with consecutive ranks together,
// so the innermost mesh axis (the one with the most traffic) stays inside a worker.
//
// Workers receive their part (RankAssignment) in heartbeat responses — again on each heartbeat
// until they list the job as running — and report steps, checkpoints and their outcome (Report).
// Rank 0's steps are the job's progress. When every worker has finished OK the job SUCCEEDS;
// the first failure FAILS it with the failing rank's error and stops the others. A job's devices
// stay taken until its workers say its ranks have ended (or are lost).
//
// After a coordinator restart, jobs that were PLANNING or RUNNING cannot be resumed (their
// rendezvous store is gone): they FAIL saying so, and workers still running their ranks are told
// to stop. Resuming from a checkpoint on the devices left (RESTARTING) is not built yet.
//
// Thread-safe; lock order: the dispatcher's mutex, then the job manager's and the registry's.
#ifndef MAPD_SERVER_DISPATCH_DISPATCHER_H_
#define MAPD_SERVER_DISPATCH_DISPATCHER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "proto/mapd/v1/workers.pb.h"
#include "server/dispatch/rendezvous.h"
#include "server/jobs/job_manager.h"
#include "server/jobs/job_planner.h"
#include "server/workers/worker_registry.h"

namespace mapd {

struct DispatchOptions {
  // The host the workers' ranks reach the coordinator's rendezvous stores at.
  std::string advertise_host = "127.0.0.1";
  absl::Status Validate() const;
};

// Plans a job for its ranks (PlanJob; tests may stand in a faster one).
using PlanJobFn = std::function<absl::StatusOr<JobPlan>(const v1::JobSpec&)>;

class Dispatcher {
 public:
  // Everything given must outlive the dispatcher.
  Dispatcher(JobManager* jobs, WorkerRegistry* workers, RendezvousHost* rendezvous, DispatchOptions options,
             PlanJobFn plan = PlanJob);

  // One round (above). Planning happens here, outside the dispatcher's lock.
  void Tick();

  // Adds to a heartbeat's response the assignments `worker_id` has not started yet and the jobs
  // whose ranks it must stop (`running` are the jobs it runs now).
  void OnHeartbeat(const std::string& worker_id, const std::vector<int64_t>& running, v1::HeartbeatResponse* out);

  // A worker's report on its ranks of a job. NOT_FOUND when the coordinator does not run that
  // job on that worker (the worker should stop its ranks).
  absl::StatusOr<v1::ReportResponse> OnReport(const v1::ReportRequest& report);

  // Devices taken by running jobs, per worker id.
  std::map<std::string, int> BusyDevices() const;

 private:
  struct Part {
    std::string worker_id;
    v1::RankAssignment assignment;
    bool finished = false;  // its ranks have ended (reported), or its worker was lost
  };
  struct ActiveJob {
    std::vector<Part> parts;
    int world = 0;
    bool stopping = false;         // finished in the manager; waiting for the parts to end
    bool failed = false;           // a part failed (the job is FAILED)
    int64_t worst_peak_bytes = 0;  // over every rank's steps so far
    double first_loss = 0, last_loss = 0;
    int64_t last_step = 0;
    std::map<int64_t, int> checkpoints;  // step → parts that committed it
  };

  // Fails jobs left PLANNING/RUNNING by a previous coordinator (once, on the first round).
  void FailOrphans();
  // Starts `job` if devices allow; false when it must wait.
  bool TryStart(const v1::Job& job);
  // The first failure of a running job: FAILED with `why`, the other parts stopped.
  void FailLocked(int64_t id, ActiveJob& job, const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops jobs whose parts have all ended, closing their stores.
  void ReapLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Free devices (names) of `kind` ("cpu", "cuda") per ALIVE worker with at least `min_memory`
  // bytes each.
  std::map<std::string, std::vector<std::string>> FreeDevicesLocked(const std::string& kind, int64_t min_memory) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  JobManager* jobs_;
  WorkerRegistry* workers_;
  RendezvousHost* rendezvous_;
  DispatchOptions options_;
  PlanJobFn plan_;
  mutable absl::Mutex mu_;
  std::map<int64_t, ActiveJob> active_ ABSL_GUARDED_BY(mu_);
  std::set<int64_t> told_waiting_ ABSL_GUARDED_BY(mu_);  // pending jobs whose wait has an event
  bool orphans_checked_ = false;  // dispatch thread only
};

}  // namespace mapd

#endif  // MAPD_SERVER_DISPATCH_DISPATCHER_H_

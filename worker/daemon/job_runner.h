// One job's ranks on this worker (DESIGN §9): from the coordinator's RankAssignment, writes the
// run directory (worker/launch/rank_command.h), starts one `mapd-rank` process per rank
// (worker/launch) — when rank 0 is here it starts first, hosts the job's rendezvous store, and the
// store's address is reported to the coordinator for the other workers — and while they train
// reports their steps (rank 0's are the job's progress), commits this worker's checkpoint shards,
// and keeps the worker's metrics (step time, throughput, MFU, memory against the prediction,
// collectives); at the end it reports the outcome. Cancel() stops the ranks.
//
// Files: WORK_DIR/job-<id>/ (job-<id>-<attempt>/ after a restart) holds graph.pb and
// rank_<r>.pb. Checkpoints go to the assignment's shared directory, where the coordinator commits
// them, or else to WORK_DIR/job-<id>/checkpoints/ (step-NNNNNNNN/, LATEST), committed here for
// this worker's ranks.
#ifndef MAPD_WORKER_DAEMON_JOB_RUNNER_H_
#define MAPD_WORKER_DAEMON_JOB_RUNNER_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "absl/status/statusor.h"
#include "common/metrics/metrics.h"
#include "proto/mapd/v1/rank_job.pb.h"
#include "proto/mapd/v1/workers.pb.h"
#include "worker/daemon/rotating_log.h"
#include "worker/shards/shard_replicator.h"
#include "worker/shards/shard_store.h"

namespace mapd {

struct JobRunnerOptions {
  std::string work_dir;           // run directories and checkpoints go under it
  std::string rank_program;       // the mapd-rank binary that runs one rank
  int rank_timeout_seconds = 60;  // a rank silent this long (or waiting in a collective) fails the job
  // The address other machines reach this worker's ranks at (the rendezvous store rank 0 hosts,
  // Gloo's transport).
  std::string advertise_host = "127.0.0.1";
  // Jobs' data files (text:FILE, tokens:FILE, npy:INPUTS[,TARGETS]) are resolved under it and nowhere else (job_data.h);
  // empty: jobs here train on synthetic data only.
  std::string data_root;
  // The coordinator's id for this worker ("w-3"): with the device, a label of every rank's series
  // (`worker`, `device`), so they join with a device exporter's (DCGM's) by host and device.
  std::string worker_id;
  // Without shared storage, where this worker keeps its jobs' committed shards for its peers and
  // theirs for it (worker/shards/shard_store.h); null: none kept, and a lost worker's job cannot
  // resume.
  ShardStore* shards = nullptr;
};

// Sends a report to the coordinator; true when the coordinator says to stop the ranks.
using ReportFn = std::function<bool(const v1::ReportRequest&)>;

// Declares the metric families JobRunners update (once per registry).
void DeclareJobMetrics(MetricsRegistry* metrics);

class JobRunner {
 public:
  // `metrics` (with DeclareJobMetrics) must outlive the runner.
  JobRunner(v1::RankAssignment assignment, JobRunnerOptions options, ReportFn report, MetricsRegistry* metrics);
  ~JobRunner();  // stops the ranks and waits for them

  void Start();   // on a thread of its own
  void Cancel() { cancel_ = true; }
  bool done() const { return done_; }
  int64_t job_id() const { return assignment_.job_id(); }
  int attempt() const { return assignment_.attempt(); }
  int ranks() const { return assignment_.ranks_size(); }

 private:
  void Run();
  void OnEvent(int index, const v1::RankEvent& event);
  void OnStep(int index, const v1::StepDone& step);  // `index`: of the rank in the assignment
  void OnCheckpoint(int64_t step);
  // Without shared storage: the step's shards kept in the shard store and queued for the peer.
  void KeepShards(int64_t step);
  // Reports the last step the peer kept, when it is new.
  void ReportReplicated();
  // Puts the last step the peer kept in the pending report, when it is new; true if it did.
  bool TakeReplicated();
  // Tells the coordinator this worker's shards of `step` are committed (and kept by its peer).
  void ReportCheckpoint(int64_t step);
  // What the rank at `index` wrote: appended to its log file and sent with the next report (at
  // least once a second while it writes).
  void OnOutput(int index, std::string_view text);
  // job_id, rank, worker and device: the labels of the series of the rank at `index`.
  Labels RankLabels(int index) const;
  // What each of this worker's ranks runs; PERMISSION_DENIED for data outside the data root.
  absl::StatusOr<v1::RankJob> RankJobOf() const;
  void Send(v1::ReportRequest& report);

  v1::RankAssignment assignment_;
  JobRunnerOptions options_;
  ReportFn report_;
  MetricsRegistry* metrics_;
  std::string dir_, checkpoint_dir_;
  bool shared_checkpoints_ = false;
  int world_ = 1;  // ranks in the job (the mesh's product)
  std::atomic<bool> cancel_{false}, done_{false};
  std::thread thread_;
  // On the launcher's thread only:
  v1::ReportRequest pending_;                // steps not yet reported
  struct RankOutputBuffer {
    std::string text;           // not yet reported
    int64_t dropped_bytes = 0;  // cut from its front (over the bound: the file has them)
  };
  std::map<int, RankOutputBuffer> output_;    // by global rank
  std::map<int, RotatingLog> logs_;           // each rank's file here, by global rank
  std::chrono::steady_clock::time_point last_sent_{};
  std::map<int64_t, int> checkpoint_shards_; // step → local ranks that wrote it
  int64_t reported_checkpoint_ = 0;           // the last checkpoint_step reported
  std::unique_ptr<ShardReplicator> replicator_;  // to the shard peer (null: none)
  std::vector<std::string> shard_files_;         // this worker's files of a step: meta.pb, rank_<r>.pb
};

}  // namespace mapd

#endif  // MAPD_WORKER_DAEMON_JOB_RUNNER_H_

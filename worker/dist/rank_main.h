// One rank of `mapctl run --ranks N` or of a job on mapd-workers (the hidden `mapctl _rank`):
// reads the training graph and this rank's program from the run directory the launcher wrote,
// joins the mesh's process groups on the launcher's (or coordinator's) TCPStore, and trains,
// printing one JSON line per step on stdout:
//   {"rank": 0, "step": 1, "loss": 5.54, "seconds": 0.012, "peak_bytes": 1234567,
//    "live_bytes": 456789, "collectives": {"all_reduce": {"seconds": 0.001, "bytes": 4096}}}
// preceded by {"rank": 0, "begin": 1} as each step begins, and a last line
// {"rank": 0, "done": true, "peak_bytes": ...}. Errors go to stderr and the exit
// status is non-zero. Torch-free header.
//
// Fault injection for tests (the environment seam): MAPD_FAULT=crash:RANK:STEP makes that rank
// abort at that step; hang:RANK:STEP makes it stop responding.
#ifndef MAPD_WORKER_DIST_RANK_MAIN_H_
#define MAPD_WORKER_DIST_RANK_MAIN_H_

#include <string>

#include "absl/status/status.h"
#include "worker/launch/checkpoint_commit.h"  // CheckpointStepDir
#include "worker/local/local_training.h"

namespace mapd {

struct RankJobOptions {
  std::string run_dir;             // graph.pb and rank_<r>.pb
  int rank = -1;
  std::string host = "127.0.0.1";  // the launcher's (or coordinator's) TCPStore
  int port = 0;
  // With training.device "cuda": the GPU this rank uses (NCCL); -1: GPU `rank` (one machine).
  int cuda_device = -1;
  int timeout_seconds = 60;        // rendezvous and every collective
  LocalTrainingOptions training;   // steps, optimizer, lr, seed, data (as single-device `mapctl run`)
  // Checkpoints: every `checkpoint_every` steps (and after the last) each rank writes
  // checkpoint_dir/step-NNNNNNNN.tmp/rank_<r>.pb and prints {"rank": r, "checkpoint": step}; the
  // launcher commits the directory when every rank has. 0 = none.
  std::string checkpoint_dir;
  int64_t checkpoint_every = 0;
  // Continue from checkpoint_dir/step-NNNNNNNN (committed): its blocks and optimizer state, the
  // data source advanced past its steps; training goes on to `training.steps` in all.
  int64_t resume_step = 0;
  // After the last step, write the rank's blocks to run_dir/final_rank_<r>.pb (a
  // RankCheckpoint), for the launcher to compare with one device (--check-reference).
  bool write_final_parameters = false;
  // > 0: the rank's memory cap in bytes (--memory-per-device), enforced by the counting
  // allocator from start-up on: an allocation past it fails the step with RESOURCE_EXHAUSTED
  // naming the rank, the node and the bytes.
  int64_t memory_cap = 0;
};

// Where a rank writes its final blocks under `run_dir`.
std::string FinalParametersPath(const std::string& run_dir, int rank);


absl::Status RunRankJob(const RankJobOptions& options);

}  // namespace mapd

#endif  // MAPD_WORKER_DIST_RANK_MAIN_H_

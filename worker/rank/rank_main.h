// One rank of `mapctl run --ranks N` or of a job on mapd-workers (the `mapd-rank` binary,
// proto/mapd/v1/rank_job.proto): reads what to run from the run directory its launcher wrote
// (worker/launch/rank_command.h), joins the mesh's process groups on the job's rendezvous store —
// rank 0 hosts it and reports its port first — and trains, reporting RankEvents on its stdout
// (worker/launch/rank_events.h): StepBegun as each step begins, StepDone after it (loss, time,
// memory, collectives), CheckpointWritten for each shard, and RankDone at the end. Whatever else
// the process prints goes to stderr. Errors go to stderr and the exit status is non-zero.
// Torch-free header.
//
// Fault injection for tests (the environment seam): MAPD_FAULT=crash:RANK:STEP makes that rank
// abort at that step; hang:RANK:STEP makes it stop responding.
#ifndef MAPD_WORKER_RANK_RANK_MAIN_H_
#define MAPD_WORKER_RANK_RANK_MAIN_H_

#include <string>

#include "absl/status/status.h"

namespace mapd {

// A rank's command line (worker/launch/rank_command.h builds it).
struct RankProcessOptions {
  std::string run_dir;   // job.pb, graph.pb and rank_<r>.pb
  int rank = -1;
  int cuda_device = -1;  // with the job's device "cuda": this GPU (NCCL); -1: GPU `rank`
  std::string store;     // host:port of the rendezvous store (its gate); empty: this rank (0) hosts it
  // The job's rendezvous secret (common/store_secret.h), from MAPD_STORE_SECRET: rank 0's gate
  // admits only peers that present it, and a peer presents it through its tunnel.
  std::string store_secret;
};

absl::Status RunRankJob(const RankProcessOptions& options);

}  // namespace mapd

#endif  // MAPD_WORKER_RANK_RANK_MAIN_H_

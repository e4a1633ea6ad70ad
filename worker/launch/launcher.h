// Starts N local rank processes (like torchrun) and watches them: each rank's events
// (rank_events.h, on its stdout) are handed to a callback as they come; a rank that exits
// non-zero, dies of a signal, or sends nothing for `silence_timeout` ends the run — the others are
// terminated — with an error naming the rank and its last words on stderr, so a multi-rank run
// never hangs silently. The rank that hosts the rendezvous store starts first; the others start
// once it reports the store's port. No LibTorch.
#ifndef MAPD_WORKER_LAUNCH_LAUNCHER_H_
#define MAPD_WORKER_LAUNCH_LAUNCHER_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "proto/mapd/v1/rank_job.pb.h"

namespace mapd {

struct LaunchOptions {
  int ranks = 0;  // processes to start
  // The program and its arguments for process i (argv[0] is the executable path), given the
  // rendezvous store's host:port — empty for the process that hosts the store.
  std::function<std::vector<std::string>(int index, const std::string& store)> argv_for;
  // >= 0: this process hosts the store (rank 0 of the job); the others start once it reports
  // StoreReady, with store_host:PORT. -1: every process starts at once, with `store`.
  int store_host_index = -1;
  std::string store_host = "127.0.0.1";
  std::string store;
  // A rank silent this long (no event) is reported as hung.
  std::chrono::milliseconds silence_timeout{60000};
  // Extra environment for every rank ("NAME=value").
  std::vector<std::string> env;
  // The job's rendezvous secret (common/store_secret.h), given to every rank as MAPD_STORE_SECRET.
  // Empty: drawn here when this launch hosts the store (store_host_index >= 0: the whole job's
  // ranks, as `mapctl run`'s); a launch that joins another's store must be given that secret.
  std::string store_secret;
  // The rank each process is called in errors (the job's global rank); empty: its index.
  std::vector<int> rank_names;
  // When set and it becomes true, the ranks are stopped and the launch ends CANCELLED.
  const std::atomic<bool>* cancel = nullptr;
  // Called with what process `index` writes on stderr (and stdout that is not events: the rank
  // points fd 1 at stderr), as it comes, on the launching thread.
  std::function<void(int index, std::string_view text)> on_output;
};

// The OMP_NUM_THREADS each of `ranks` ranks on this machine gets unless the launcher's
// environment (or LaunchOptions::env) sets it: the cores shared out, at least 1 — as torchrun
// does. More would oversubscribe the cores, and oneDNN's per-thread convolution workspace would
// grow with threads the profiler does not count.
int DefaultRankThreads(int ranks);

// Runs the ranks to completion. `on_event(index, event)` is called for every event of process
// `index`, in arrival order (StoreReady included). OK when every rank exits 0; otherwise ABORTED
// (a rank failed or was killed; its own status code when its last words end with one), DATA_LOSS
// (its output was not events) or DEADLINE_EXCEEDED (a rank hung), naming the rank — within about
// a second of the failure, or `silence_timeout` for a hang; CANCELLED when `cancel` was set.
absl::Status LaunchRanks(const LaunchOptions& options, const std::function<void(int index, const v1::RankEvent& event)>& on_event);

}  // namespace mapd

#endif  // MAPD_WORKER_LAUNCH_LAUNCHER_H_

// Starts N local rank processes (like torchrun) and watches them: their stdout lines are handed
// to a callback as they come; a rank that exits non-zero, dies of a signal, or sends nothing for
// `silence_timeout` ends the run — the others are terminated — with an error naming the rank and
// its last words on stderr, so a multi-rank run never hangs silently. No LibTorch.
#ifndef MAPD_WORKER_LAUNCH_LAUNCHER_H_
#define MAPD_WORKER_LAUNCH_LAUNCHER_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace mapd {

struct LaunchOptions {
  // The program and its arguments for rank r: argv_for(r) (argv[0] is the executable path).
  std::function<std::vector<std::string>(int rank)> argv_for;
  int ranks = 0;
  // A rank silent this long (no line on stdout) is reported as hung.
  std::chrono::milliseconds silence_timeout{60000};
  // Extra environment for every rank ("NAME=value").
  std::vector<std::string> env;
  // The rank each process is called in errors (the job's global rank); empty: its index.
  std::vector<int> rank_names;
  // When set and it becomes true, the ranks are stopped and the launch ends CANCELLED.
  const std::atomic<bool>* cancel = nullptr;
};

// The OMP_NUM_THREADS each of `ranks` ranks on this machine gets unless the launcher's
// environment (or LaunchOptions::env) sets it: the cores shared out, at least 1 — as torchrun
// does. More would oversubscribe the cores, and oneDNN's per-thread convolution workspace would
// grow with threads the profiler does not count.
int DefaultRankThreads(int ranks);

// Runs the ranks to completion. `on_line(rank, line)` is called for every stdout line, in
// arrival order. OK when every rank exits 0; otherwise ABORTED (a rank failed or was killed)
// or DEADLINE_EXCEEDED (a rank hung), naming the rank — within about a second of the failure,
// or `silence_timeout` for a hang; CANCELLED when `cancel` was set. `on_line`'s rank is the
// process's index.
absl::Status LaunchRanks(const LaunchOptions& options, const std::function<void(int rank, const std::string& line)>& on_line);

}  // namespace mapd

#endif  // MAPD_WORKER_LAUNCH_LAUNCHER_H_

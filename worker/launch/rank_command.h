// A launch's run directory and the `mapd-rank` command line (proto/mapd/v1/rank_job.proto): what
// `mapctl run --ranks N` and a mapd-worker write before they start ranks, where they find the
// rank binary, and the one place its command line is built (mapd-rank parses it). No LibTorch.
//
//   RUN_DIR/job.pb          the RankJob every rank of the launch runs
//   RUN_DIR/graph.pb        the training graph
//   RUN_DIR/rank_<r>.pb     rank r's program
//   RUN_DIR/final_rank_<r>.pb  rank r's blocks after the last step (with write_final_parameters)
#ifndef MAPD_WORKER_LAUNCH_RANK_COMMAND_H_
#define MAPD_WORKER_LAUNCH_RANK_COMMAND_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/mapd/v1/graph.pb.h"
#include "proto/mapd/v1/rank_job.pb.h"
#include "proto/mapd/v1/rank_program.pb.h"

namespace mapd {

// One rank's process.
struct RankCommand {
  std::string program;         // the mapd-rank binary (FindRankBinary)
  std::string run_dir;
  int rank = 0;
  int cuda_device = -1;        // a job on device "cuda": the GPU of this machine the rank uses
  // host:port of the job's rendezvous store; empty: this rank (rank 0) hosts it and reports its
  // port (StoreReady).
  std::string store;
};

// argv of `mapd-rank` for `command` (argv[0] is the program).
std::vector<std::string> RankCommandLine(const RankCommand& command);

// The mapd-rank binary a launcher starts: beside the running executable (an install), where the
// build tree puts it (worker/rank/mapd-rank, seen from worker/daemon/ or client/mapctl/), or on
// PATH. NOT_FOUND saying where it looked.
absl::StatusOr<std::string> FindRankBinary();

// Writes job.pb, graph.pb and the programs of `ranks` (programs[i] is rank ranks[i]'s) under
// `dir`, which is made if missing.
absl::Status WriteRunDirectory(const std::string& dir, const v1::Graph& graph, const v1::RankJob& job, const std::vector<int>& ranks,
                               const std::vector<const v1::RankProgram*>& programs);

// What a rank reads back; DATA_LOSS when a file does not parse, naming it.
absl::StatusOr<v1::RankJob> ReadRankJob(const std::string& dir);
absl::StatusOr<v1::RankProgram> ReadRankProgram(const std::string& dir, int rank);
std::string GraphPath(const std::string& dir);
std::string FinalParametersPath(const std::string& dir, int rank);

}  // namespace mapd

#endif  // MAPD_WORKER_LAUNCH_RANK_COMMAND_H_

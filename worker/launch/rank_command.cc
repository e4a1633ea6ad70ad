#include "worker/launch/rank_command.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/file_io.h"
#include "model/ir/serialize.h"

namespace mapd {

namespace {

std::string RankJobPath(const std::string& dir) { return dir + "/job.pb"; }
std::string RankProgramPath(const std::string& dir, int rank) { return absl::StrCat(dir, "/rank_", rank, ".pb"); }

}  // namespace

std::string GraphPath(const std::string& dir) { return dir + "/graph.pb"; }
std::string FinalParametersPath(const std::string& dir, int rank) { return absl::StrCat(dir, "/final_rank_", rank, ".pb"); }

std::vector<std::string> RankCommandLine(const RankCommand& c) {
  std::vector<std::string> argv{c.program, "--run-dir", c.run_dir, "--rank", std::to_string(c.rank)};
  if (c.cuda_device >= 0) argv.insert(argv.end(), {"--cuda-device", std::to_string(c.cuda_device)});
  if (!c.store.empty()) argv.insert(argv.end(), {"--store", c.store});
  return argv;
}

absl::StatusOr<std::string> FindRankBinary() {
  return FindExecutable("mapd-rank", {".", "../rank", "../../worker/rank"},
                        "mapd-rank runs the ranks; install it beside this program or put it on PATH");
}

absl::Status WriteRunDirectory(const std::string& dir, const v1::Graph& graph, const v1::RankJob& job, const std::vector<int>& ranks,
                               const std::vector<const v1::RankProgram*>& programs) {
  if (ranks.size() != programs.size()) {
    return absl::InvalidArgumentError(absl::StrCat(ranks.size(), " ranks but ", programs.size(), " programs"));
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot make ", dir, ": ", ec.message()));
  if (auto st = WriteGraphFile(graph, GraphPath(dir)); !st.ok()) return st;
  if (auto st = WriteStringToFileAtomic(RankJobPath(dir), job.SerializeAsString()); !st.ok()) return st;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (auto st = WriteStringToFileAtomic(RankProgramPath(dir, ranks[i]), programs[i]->SerializeAsString()); !st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::RankJob> ReadRankJob(const std::string& dir) {
  auto bytes = ReadFileToString(RankJobPath(dir));
  if (!bytes.ok()) return bytes.status();
  v1::RankJob job;
  if (!job.ParseFromString(*bytes)) return absl::DataLossError(absl::StrCat(RankJobPath(dir), " is not a RankJob"));
  return job;
}

absl::StatusOr<v1::RankProgram> ReadRankProgram(const std::string& dir, int rank) {
  auto bytes = ReadFileToString(RankProgramPath(dir, rank));
  if (!bytes.ok()) return bytes.status();
  v1::RankProgram program;
  if (!program.ParseFromString(*bytes)) return absl::DataLossError(absl::StrCat(RankProgramPath(dir, rank), " is not a rank program"));
  return program;
}

}  // namespace mapd

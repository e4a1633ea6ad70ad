#include "common/checkpoint/checkpoint_commit.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_io.h"

namespace mapd {

std::string CheckpointStepDir(const std::string& dir, int64_t step) {
  char name[32];
  std::snprintf(name, sizeof(name), "step-%08lld", static_cast<long long>(step));
  return absl::StrCat(dir, "/", name);
}

std::string CheckpointStagingDir(const std::string& dir, int64_t step, int attempt) {
  return attempt == 0 ? CheckpointStepDir(dir, step) + ".tmp" : absl::StrCat(CheckpointStepDir(dir, step), ".a", attempt, ".tmp");
}

absl::Status CommitCheckpointStep(const std::string& dir, const v1::CheckpointMeta& meta, int keep_steps, int attempt) {
  const std::string final_dir = CheckpointStepDir(dir, meta.step());
  const std::string staging = CheckpointStagingDir(dir, meta.step(), attempt);
  std::error_code ec;
  std::filesystem::remove_all(final_dir, ec);
  std::filesystem::create_directories(staging, ec);
  if (auto st = WriteStringToFileAtomic(staging + "/meta.pb", meta.SerializeAsString()); !st.ok()) return st;
  std::filesystem::rename(staging, final_dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot commit ", final_dir, ": ", ec.message()));
  // The step directory's entry on the device before LATEST names it (its files were synced as
  // they were written).
  if (auto st = SyncDirectory(dir); !st.ok()) return st;
  if (auto st = WriteStringToFileAtomic(dir + "/LATEST", std::to_string(meta.step())); !st.ok()) return st;
  if (keep_steps > 0) {
    // The commit stands whatever happens here: a step that could not be deleted costs space, not
    // correctness, and the next commit tries again.
    if (auto st = PruneCheckpointSteps(dir, meta.step(), keep_steps); !st.ok()) {
      std::fprintf(stderr, "checkpoint %s: %s\n", dir.c_str(), std::string(st.message()).c_str());
    }
  }
  return absl::OkStatus();
}

absl::Status PruneCheckpointSteps(const std::string& dir, int64_t latest, int keep_steps) {
  std::vector<int64_t> committed;
  std::vector<std::string> abandoned;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    long long step = 0;
    int used = 0;
    if (std::sscanf(name.c_str(), "step-%lld%n", &step, &used) != 1 || name.rfind("step-", 0) != 0) continue;
    const std::string rest = name.substr(static_cast<size_t>(used));
    if (rest.empty() && step <= latest) committed.push_back(step);
    // Any attempt's staging directory (.tmp, .aK.tmp) of a step before the latest: abandoned.
    if (absl::EndsWith(rest, ".tmp") && step < latest) abandoned.push_back(entry.path().string());
  }
  if (ec) return absl::InternalError(absl::StrCat("cannot list ", dir, ": ", ec.message()));
  std::sort(committed.begin(), committed.end());  // latest last: kept, as at least one step is
  std::vector<std::string> doomed = std::move(abandoned);
  for (size_t i = 0; i + static_cast<size_t>(std::max(keep_steps, 1)) < committed.size(); ++i) {
    doomed.push_back(CheckpointStepDir(dir, committed[i]));
  }
  for (const std::string& path : doomed) {
    std::filesystem::remove_all(path, ec);
    if (ec) return absl::InternalError(absl::StrCat("cannot delete the superseded checkpoint ", path, ": ", ec.message()));
  }
  return absl::OkStatus();
}

v1::CheckpointMeta CheckpointMetaFor(int64_t step, int world, const std::vector<int64_t>& mesh, const std::string& plan) {
  v1::CheckpointMeta meta;
  meta.set_step(step);
  meta.set_ranks(world);
  for (int64_t d : mesh) meta.add_mesh(d);
  meta.set_plan(plan);
  return meta;
}

absl::Status CheckCheckpointMatches(const v1::CheckpointMeta& meta, int world, const std::vector<int64_t>& mesh,
                                    const std::string& plan, const std::string& what) {
  const std::vector<int64_t> written(meta.mesh().begin(), meta.mesh().end());
  if (meta.ranks() == world && written == mesh && meta.plan() == plan) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(what, ": the checkpoint is of ", meta.ranks(), " rank(s), mesh ", absl::StrJoin(written, "x"),
                                                    ", plan '", meta.plan(), "'; this run is ", world, " rank(s), mesh ",
                                                    absl::StrJoin(mesh, "x"), ", plan '", plan,
                                                    "': resume with the model, ranks and plan options it was written with"));
}

absl::StatusOr<v1::CheckpointMeta> ReadLatestCheckpoint(const std::string& dir) {
  auto latest = ReadFileToString(dir + "/LATEST");
  if (!latest.ok()) return absl::NotFoundError(absl::StrCat("no checkpoint committed in ", dir));
  const int64_t step = std::atoll(latest->c_str());
  const std::string meta_file = CheckpointStepDir(dir, step) + "/meta.pb";
  auto bytes = ReadFileToString(meta_file);
  v1::CheckpointMeta meta;
  if (step <= 0 || !bytes.ok() || !meta.ParseFromString(*bytes) || meta.step() != step) {
    return absl::DataLossError(absl::StrCat(dir, "/LATEST names step '", *latest, "' but ", meta_file, " is missing or unreadable"));
  }
  return meta;
}

}  // namespace mapd

#include "worker/launch/checkpoint_commit.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "planner/ir/serialize.h"

namespace mapd {

std::string CheckpointStepDir(const std::string& dir, int64_t step) {
  char name[32];
  std::snprintf(name, sizeof(name), "step-%08lld", static_cast<long long>(step));
  return absl::StrCat(dir, "/", name);
}

absl::Status CommitCheckpointStep(const std::string& dir, const v1::CheckpointMeta& meta) {
  const std::string final_dir = CheckpointStepDir(dir, meta.step());
  std::error_code ec;
  std::filesystem::remove_all(final_dir, ec);
  std::filesystem::create_directories(final_dir + ".tmp", ec);
  if (auto st = WriteStringToFileAtomic(final_dir + ".tmp/meta.pb", meta.SerializeAsString()); !st.ok()) return st;
  std::filesystem::rename(final_dir + ".tmp", final_dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot commit ", final_dir, ": ", ec.message()));
  return WriteStringToFileAtomic(dir + "/LATEST", std::to_string(meta.step()));
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

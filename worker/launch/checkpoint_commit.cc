#include "worker/launch/checkpoint_commit.h"

#include <cstdio>
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

}  // namespace mapd

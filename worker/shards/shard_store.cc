#include "worker/shards/shard_store.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <system_error>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_io.h"
#include "common/store_secret.h"

namespace mapd {

namespace fs = std::filesystem;

namespace {
constexpr int kMaxShardRank = 1 << 20;
}  // namespace

absl::Status CheckShardFileName(const std::string& file) {
  if (file == "meta.pb") return absl::OkStatus();
  // rank_<r>.pb with r written as std::to_string writes it (no sign, no leading zero), in range.
  int rank = -1;
  const bool shaped = file.size() > 8 && file.rfind("rank_", 0) == 0 && file.compare(file.size() - 3, 3, ".pb") == 0;
  const std::string digits = shaped ? file.substr(5, file.size() - 8) : "";
  if (absl::SimpleAtoi(digits, &rank) && rank >= 0 && rank < kMaxShardRank && std::to_string(rank) == digits) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("a checkpoint shard file is meta.pb or rank_<r>.pb, not '", file.substr(0, 64), "'"));
}

std::vector<std::string> ShardFiles(const std::vector<int>& ranks) {
  std::vector<std::string> files = {"meta.pb"};
  for (int r : ranks) files.push_back(absl::StrCat("rank_", r, ".pb"));
  return files;
}

ShardStore::ShardStore(std::string dir, int max_newer_steps) : dir_(std::move(dir)), max_newer_steps_(std::max(1, max_newer_steps)) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
}

void ShardStore::Allow(int64_t job, const std::string& secret) {
  absl::MutexLock lock(&mu_);
  secrets_[job] = secret;
}

void ShardStore::Committed(int64_t job, int64_t step) {
  absl::MutexLock lock(&mu_);
  int64_t& committed = committed_[job];
  if (step <= committed) return;
  committed = step;
  PruneLocked(job);
}

void ShardStore::Retain(const std::set<int64_t>& jobs) {
  absl::MutexLock lock(&mu_);
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    const std::string name = entry.path().filename().string();
    int64_t job = 0;
    if (name.rfind("job-", 0) != 0 || !absl::SimpleAtoi(name.substr(4), &job) || jobs.count(job)) continue;
    std::error_code removed;
    fs::remove_all(entry.path(), removed);
  }
  for (auto it = secrets_.begin(); it != secrets_.end();) it = jobs.count(it->first) ? std::next(it) : secrets_.erase(it);
  for (auto it = committed_.begin(); it != committed_.end();) it = jobs.count(it->first) ? std::next(it) : committed_.erase(it);
}

absl::Status ShardStore::CheckAccess(int64_t job, const std::string& secret) const {
  absl::MutexLock lock(&mu_);
  auto it = secrets_.find(job);
  if (it == secrets_.end() || !SameSecret(secret, it->second)) {
    return absl::PermissionDeniedError(absl::StrCat("job ", job, ": not a job of this worker, or not its shard secret"));
  }
  return absl::OkStatus();
}

std::string ShardStore::StepDir(int64_t job, int64_t step) const {
  return absl::StrFormat("%s/job-%d/step-%08d", dir_, job, step);
}

absl::StatusOr<std::string> ShardStore::NewStaging(int64_t job, int64_t step) {
  int64_t n = 0;
  {
    absl::MutexLock lock(&mu_);
    n = next_staging_++;
  }
  const std::string staging = absl::StrFormat("%s/job-%d/incoming-%08d-%d-%d", dir_, job, step, static_cast<int>(getpid()), n);
  std::error_code ec;
  fs::remove_all(staging, ec);
  if (!fs::create_directories(staging, ec) || ec) {
    return absl::InternalError(absl::StrCat("cannot make ", staging, ": ", ec.message()));
  }
  return staging;
}

absl::Status ShardStore::Keep(int64_t job, int64_t step, const std::string& from, const std::vector<std::string>& files, bool link) {
  const std::string to = StepDir(job, step);
  absl::MutexLock lock(&mu_);
  std::error_code ec;
  fs::create_directories(to, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot make ", to, ": ", ec.message()));
  for (const std::string& file : files) {
    if (auto st = CheckShardFileName(file); !st.ok()) return st;
    const fs::path src = fs::path(from) / file, dst = fs::path(to) / file;
    fs::remove(dst, ec);
    if (link) {
      fs::create_hard_link(src, dst, ec);
      if (ec) fs::copy_file(src, dst, ec);  // another filesystem
    } else {
      fs::rename(src, dst, ec);
    }
    if (ec) return absl::InternalError(absl::StrCat("cannot keep ", src.string(), " as ", dst.string(), ": ", ec.message()));
  }
  if (!link) fs::remove_all(from, ec);
  if (auto st = SyncDirectory(to); !st.ok()) return st;
  PruneLocked(job);
  return absl::OkStatus();
}

void ShardStore::PruneLocked(int64_t job) {
  const fs::path job_dir = absl::StrFormat("%s/job-%d", dir_, job);
  std::vector<int64_t> steps;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(job_dir, ec)) {
    const std::string name = entry.path().filename().string();
    int64_t step = 0;
    if (name.rfind("step-", 0) == 0 && absl::SimpleAtoi(name.substr(5), &step)) steps.push_back(step);
  }
  // Kept: the committed step (the one a restart resumes from) and the newest few after it.
  const int64_t committed = committed_[job];
  std::sort(steps.begin(), steps.end(), std::greater<>());
  int newer = 0;
  for (int64_t step : steps) {
    const bool keep = step == committed || (step > committed && newer++ < max_newer_steps_);
    if (!keep) fs::remove_all(StepDir(job, step), ec);
  }
}

absl::StatusOr<std::string> ShardStore::PathOf(int64_t job, int64_t step, const std::string& file) const {
  if (auto st = CheckShardFileName(file); !st.ok()) return st;
  const std::string path = absl::StrCat(StepDir(job, step), "/", file);
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return absl::NotFoundError(absl::StrCat("job ", job, ": ", file, " of step ", step, " is not kept here"));
  return path;
}

}  // namespace mapd

#include "worker/shards/shard_resume.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint_commit.h"
#include "common/file_io.h"
#include "worker/shards/shard_client.h"

namespace mapd {

std::vector<int> RanksToFetch(const v1::RankAssignment& a) {
  std::vector<int> ranks;
  if (a.resume_resharded()) {
    for (const v1::ShardSource& s : a.resume_shards()) ranks.push_back(s.rank());
  } else {
    ranks.assign(a.ranks().begin(), a.ranks().end());
  }
  return ranks;
}

namespace {

// A fetch that failed: UNAVAILABLE (its holders may answer on a later try: the job restarts, not
// fails, on it), or RESOURCE_EXHAUSTED where this worker's disk had no room for it.
absl::Status NotFetched(const absl::Status& why, const std::string& what) {
  const absl::StatusCode code = why.code() == absl::StatusCode::kResourceExhausted ? why.code() : absl::StatusCode::kUnavailable;
  return absl::Status(code, absl::StrCat(what, ": ", why.message()));
}

}  // namespace

absl::Status FetchResumeShards(const v1::RankAssignment& a, const std::string& checkpoint_dir, double timeout_seconds) {
  std::map<int, std::vector<std::string>> holders;
  std::vector<std::string> any;  // every holder, for meta.pb (the same on each)
  for (const v1::ShardSource& s : a.resume_shards()) {
    holders[s.rank()].assign(s.addresses().begin(), s.addresses().end());
    for (const std::string& address : s.addresses()) {
      if (std::find(any.begin(), any.end(), address) == any.end()) any.push_back(address);
    }
  }
  const std::string staging = CheckpointStagingDir(checkpoint_dir, a.resume_step(), a.attempt());
  std::error_code ec;
  std::filesystem::create_directories(staging, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot make ", staging, ": ", ec.message()));
  ShardKey key{a.job_id(), a.resume_step(), a.shard_secret()};
  if (auto st = FetchShards(any, key, {"meta.pb"}, staging, timeout_seconds); !st.ok()) {
    return NotFetched(st, absl::StrCat("the metadata of checkpoint step ", a.resume_step(), " is on no worker that answers"));
  }
  for (int rank : RanksToFetch(a)) {
    auto it = holders.find(rank);
    const std::vector<std::string> addresses = it == holders.end() ? std::vector<std::string>{} : it->second;
    if (auto st = FetchShards(addresses, key, {absl::StrCat("rank_", rank, ".pb")}, staging, timeout_seconds); !st.ok()) {
      return NotFetched(st, absl::StrCat("rank ", rank, "'s shard of checkpoint step ", a.resume_step(), " is on no worker that answers (",
                                         addresses.size(), " kept it)"));
    }
  }
  auto bytes = ReadFileToString(staging + "/meta.pb");
  v1::CheckpointMeta meta;
  if (!bytes.ok() || !meta.ParseFromString(*bytes) || meta.step() != a.resume_step()) {
    return absl::DataLossError(absl::StrCat("the fetched metadata of checkpoint step ", a.resume_step(), " does not parse as that step's"));
  }
  return CommitCheckpointStep(checkpoint_dir, meta, 0, a.attempt());
}

}  // namespace mapd

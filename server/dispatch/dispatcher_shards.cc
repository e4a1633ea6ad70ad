// The dispatcher's checkpoints without shared storage (docs/coordinator.md "Checkpoints without
// shared storage"): each worker commits its ranks' shards on its own disk and pushes a copy to a
// peer — the next part's worker, in a ring (a job on one worker: another worker) — which keeps it on its shard service; a worker
// reports a step once the peer has it, so a step committed on every worker is on two workers. A
// job whose worker is lost then resumes on the workers left (re-planned as elastic jobs are),
// each fetching the shards its ranks read from whichever live worker keeps them.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/store_secret.h"
#include "server/dispatch/dispatcher.h"

namespace mapd {

namespace {

// What the shard bookkeeping needs of a registered worker: its shard service, and whether its
// lease is current.
struct ShardWorker {
  std::string address;  // empty: it keeps no shards
  bool alive = false;
};
std::map<std::string, ShardWorker> ShardWorkers(const std::vector<v1::Worker>& workers) {
  std::map<std::string, ShardWorker> out;  // by worker id
  for (const v1::Worker& w : workers) out[w.id()] = {w.shard_address(), w.state() == v1::ALIVE};
  return out;
}

}  // namespace

absl::Status Dispatcher::AssignShardPeersLocked(ActiveJob& job, int64_t resume_step) {
  if (job.parts.empty()) return absl::OkStatus();
  if (job.shard_secret.empty()) {
    auto secret = NewStoreSecret();
    if (!secret.ok()) return secret.status();
    job.shard_secret = *secret;
  }
  std::map<std::string, ShardWorker> workers = ShardWorkers(workers_->List());
  const size_t n = job.parts.size();
  // A job on one worker: its peer is another live worker with a shard service (told the job's
  // secret in its heartbeats), the first by id.
  std::string outsider;
  for (const auto& [id, w] : workers) {
    if (outsider.empty() && w.alive && !w.address.empty() && id != job.parts[0].worker_id) outsider = id;
  }
  for (size_t i = 0; i < n; ++i) {
    Part& part = job.parts[i];
    v1::RankAssignment& a = part.assignment;
    a.set_shard_secret(job.shard_secret);
    const std::string& peer = n > 1 ? job.parts[(i + 1) % n].worker_id : outsider;
    part.shard_peer_id.clear();
    if (!peer.empty() && !workers[peer].address.empty() && !workers[part.worker_id].address.empty()) {
      part.shard_peer_id = peer;
      a.set_shard_peer(workers[peer].address);
    }
    if (resume_step <= 0) continue;
    for (const auto& [rank, holders] : job.shard_holders) {
      v1::ShardSource* source = a.add_resume_shards();
      source->set_rank(rank);
      for (bool live : {true, false}) {  // live workers first; one lost may still answer
        for (const ShardHolder& h : holders) {
          if (workers[h.worker_id].alive == live) source->add_addresses(h.address);
        }
      }
    }
  }
  return absl::OkStatus();
}

void Dispatcher::NoteShardHoldersLocked(ActiveJob& job) {
  std::map<std::string, ShardWorker> workers = ShardWorkers(workers_->List());
  job.shard_holders.clear();
  for (const Part& part : job.parts) {
    for (int32_t rank : part.assignment.ranks()) {
      std::vector<ShardHolder>& holders = job.shard_holders[rank];
      if (!workers[part.worker_id].address.empty()) holders.push_back({part.worker_id, workers[part.worker_id].address});
      if (!part.shard_peer_id.empty()) holders.push_back({part.shard_peer_id, workers[part.shard_peer_id].address});
    }
  }
}

std::vector<int32_t> Dispatcher::UnkeptRanksLocked(const ActiveJob& job) const {
  std::map<std::string, ShardWorker> workers = ShardWorkers(workers_->List());
  std::vector<int32_t> unkept;
  for (int32_t rank = 0; rank < job.committed_under.ranks(); ++rank) {
    auto it = job.shard_holders.find(rank);
    const bool kept = it != job.shard_holders.end() &&
                      std::any_of(it->second.begin(), it->second.end(), [&](const ShardHolder& h) { return workers[h.worker_id].alive; });
    if (!kept) unkept.push_back(rank);
  }
  return unkept;
}

bool Dispatcher::KeepsShards(const ActiveJob& job, const std::string& worker_id) {
  for (const Part& p : job.parts) {
    if (p.worker_id == worker_id || p.shard_peer_id == worker_id) return true;
  }
  for (const auto& [rank, holders] : job.shard_holders) {
    for (const ShardHolder& h : holders) {
      if (h.worker_id == worker_id) return true;
    }
  }
  return false;
}

std::string Dispatcher::PeersOf(const ActiveJob& job) {
  std::vector<std::string> pairs;
  for (const Part& p : job.parts) {
    pairs.push_back(p.shard_peer_id.empty() ? absl::StrCat(p.worker_id, "'s on it alone") : absl::StrCat(p.worker_id, "'s on ", p.shard_peer_id));
  }
  return absl::StrJoin(pairs, ", ");
}

}  // namespace mapd

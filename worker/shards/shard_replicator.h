// Keeping a copy of a worker's committed checkpoint shards on a peer worker, in the background
// (docs/coordinator.md "Checkpoints without shared storage"): each step this worker commits is
// pushed from its ShardStore to the peer's shard service on a thread of its own, so training goes
// on meanwhile; when a newer step commits before an older one was sent, only the newer is sent.
// The step the peer last kept is what the worker reports as committed, so the coordinator counts
// a step for a restart only once every worker's shards of it are on two workers.
#ifndef MAPD_WORKER_SHARDS_SHARD_REPLICATOR_H_
#define MAPD_WORKER_SHARDS_SHARD_REPLICATOR_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "worker/shards/shard_client.h"
#include "worker/shards/shard_store.h"

namespace mapd {

class ShardReplicator {
 public:
  // Pushes `files` of the job's steps kept in `store` to the shard service at `peer`. `key`'s step
  // is ignored. `log` names the job in what goes to stderr.
  ShardReplicator(ShardStore* store, std::string peer, ShardKey key, std::vector<std::string> files);
  ~ShardReplicator();  // cancels the push under way and stops

  // Step `step` is committed in the store: push it (after the one under way).
  void Committed(int64_t step);
  // The last step the peer has kept (0: none yet).
  int64_t replicated() const { return replicated_.load(); }
  // Waits, at most `timeout_seconds`, until every committed step has been pushed or has failed.
  void Drain(double timeout_seconds);

 private:
  void Loop();
  double PushTimeoutSeconds(int64_t step) const;  // a minute, and a second per 16 MiB to send

  ShardStore* store_;
  const std::string peer_;
  const ShardKey key_;
  const std::vector<std::string> files_;
  std::atomic<int64_t> replicated_{0};
  PushCancel cancel_;  // the push under way, cancelled by the destructor
  absl::Mutex mu_;
  int64_t wanted_ ABSL_GUARDED_BY(mu_) = 0;  // the newest step committed, not yet pushed (0: none)
  bool busy_ ABSL_GUARDED_BY(mu_) = false;   // a push is under way
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace mapd

#endif  // MAPD_WORKER_SHARDS_SHARD_REPLICATOR_H_

// Calls to peers' shard services (shard_service.h): a committed step's shards pushed to the
// peer that keeps a copy, and a resuming job's shards fetched from whichever holder answers.
#ifndef MAPD_WORKER_SHARDS_SHARD_CLIENT_H_
#define MAPD_WORKER_SHARDS_SHARD_CLIENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace grpc {
class ClientContext;
}

namespace mapd {

// Which step of which job, and the secret its shard services admit.
struct ShardKey {
  int64_t job_id = 0;
  int64_t step = 0;
  std::string secret;
};

// Cancels a push under way from another thread (a runner that ends must not wait for a peer
// that does not answer).
class PushCancel {
 public:
  void Cancel();
  // For PushShards: the call's context while it runs (null after); false when already cancelled.
  bool Track(grpc::ClientContext* context);

 private:
  absl::Mutex mu_;
  grpc::ClientContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

// Sends `files` of directory `dir` to the shard service at `address`; OK once it has kept them
// all. `timeout_seconds` bounds the call; `cancel` (may be null) ends it early, CANCELLED.
absl::Status PushShards(const std::string& address, const ShardKey& key, const std::string& dir,
                        const std::vector<std::string>& files, double timeout_seconds, PushCancel* cancel = nullptr);

// Writes `files` of the step into directory `into`, asking the shard services at `addresses` in
// order until one has them all; the last one's error (naming it) when none does.
absl::Status FetchShards(const std::vector<std::string>& addresses, const ShardKey& key, const std::vector<std::string>& files,
                         const std::string& into, double timeout_seconds);

}  // namespace mapd

#endif  // MAPD_WORKER_SHARDS_SHARD_CLIENT_H_

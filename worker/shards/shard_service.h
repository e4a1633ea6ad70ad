// The gRPC face of a worker's ShardStore (proto/mapd/v1/shard_service.proto): peers push the
// shards of their committed steps here and fetch what a resuming job's ranks read. Plaintext, as
// the ranks' own traffic between workers is; each call is admitted by the job's shard secret.
#ifndef MAPD_WORKER_SHARDS_SHARD_SERVICE_H_
#define MAPD_WORKER_SHARDS_SHARD_SERVICE_H_

#include <functional>
#include <memory>
#include <string>

#include <grpcpp/server.h>

#include "absl/status/statusor.h"
#include "proto/mapd/v1/shard_service.grpc.pb.h"
#include "worker/shards/shard_store.h"

namespace mapd {

// At most this many bytes in one ShardChunk's data.
inline constexpr int64_t kMaxShardChunkBytes = int64_t{1} << 20;
// At most this many files in one PutShards call (a worker's ranks' shards and the step's meta).
inline constexpr int kMaxShardFilesPerPut = 4097;
// At most this many threads serve a worker's shard calls (gRPC's quota: a call that finds none
// free is answered RESOURCE_EXHAUSTED).
inline constexpr int kMaxShardServerThreads = 16;

// Sends the file at `path` as chunks of at most kMaxShardChunkBytes, each `header` (job, step,
// secret, file) with its offset, bytes and whether it is the file's last, through `write`.
// NOT_FOUND naming the file when it cannot be read; CANCELLED when `write` returns false.
absl::Status WriteFileChunks(const std::string& path, v1::ShardChunk header, const std::function<bool(const v1::ShardChunk&)>& write);

class ShardServiceImpl final : public v1::ShardService::Service {
 public:
  explicit ShardServiceImpl(ShardStore* store) : store_(store) {}
  grpc::Status PutShards(grpc::ServerContext* context, grpc::ServerReader<v1::ShardChunk>* reader, v1::PutShardsResponse* out) override;
  grpc::Status GetShards(grpc::ServerContext* context, const v1::GetShardsRequest* request, grpc::ServerWriter<v1::ShardChunk>* writer) override;

 private:
  ShardStore* store_;
};

// A running shard server on `listen` ("host:port", port 0: any); the port is its alone
// (no SO_REUSEPORT). ALREADY_EXISTS naming the port when it is taken.
struct ShardServer {
  std::unique_ptr<ShardServiceImpl> service;
  std::unique_ptr<grpc::Server> server;
  std::string address;  // host:port as bound
};
absl::StatusOr<std::unique_ptr<ShardServer>> StartShardServer(const std::string& listen, ShardStore* store);

}  // namespace mapd

#endif  // MAPD_WORKER_SHARDS_SHARD_SERVICE_H_

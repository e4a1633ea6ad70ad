// absl::Status ⇄ grpc::Status with the same code and message (the codes are the same numbers),
// shared by the coordinator's handlers and the clients (mapctl, mapd-worker).
#ifndef MAPD_COMMON_RPC_GRPC_STATUS_H_
#define MAPD_COMMON_RPC_GRPC_STATUS_H_

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"

namespace mapd {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

// A failure worth retrying: the other side is not up (yet), did not answer in time, shut down
// with the call in flight (CANCELLED: a coordinator restarting), is busy (RESOURCE_EXHAUSTED:
// its threads or streams all taken) or gave up on a conflict (ABORTED). A worker never ends on
// one of these.
bool IsTransient(const grpc::Status& status);

// A handler's answer: the value into `out`, or the error.
template <typename T>
grpc::Status Reply(const absl::StatusOr<T>& result, T* out) {
  if (!result.ok()) return ToGrpcStatus(result.status());
  *out = *result;
  return grpc::Status::OK;
}

}  // namespace mapd

#endif  // MAPD_COMMON_RPC_GRPC_STATUS_H_

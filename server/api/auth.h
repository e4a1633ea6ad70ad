// Bearer-token auth for the coordinator's RPCs: each call carries `authorization: Bearer
// <token>` metadata; grpc.health.v1 is served by gRPC itself and needs none.
#ifndef MAPD_SERVER_API_AUTH_H_
#define MAPD_SERVER_API_AUTH_H_

#include <grpcpp/grpcpp.h>

#include <string>

#include "absl/status/statusor.h"

namespace mapd {

class TokenAuth {
 public:
  explicit TokenAuth(std::string token) : token_(std::move(token)) {}
  // OK, or UNAUTHENTICATED saying what is missing (never echoing what was sent).
  grpc::Status Check(const grpc::ServerContext& context) const;

 private:
  std::string token_;
};

// The token: the first line of `file` when given, else $MAPD_TOKEN. FAILED_PRECONDITION when
// neither gives one (the coordinator does not run open); NOT_FOUND for a missing file.
absl::StatusOr<std::string> LoadToken(const std::string& file);

}  // namespace mapd

#endif  // MAPD_SERVER_API_AUTH_H_

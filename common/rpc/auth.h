// Bearer-token auth for the coordinator's RPCs: each call carries `authorization: Bearer
// <token>` metadata; grpc.health.v1 is served by gRPC itself and needs none. Both sides: the
// server's check, and what a client (mapctl, mapd-worker) puts on its calls and channel.
#ifndef MAPD_COMMON_RPC_AUTH_H_
#define MAPD_COMMON_RPC_AUTH_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace mapd {

class TokenAuth {
 public:
  // `how_to_send`: what the caller's program takes the token from (for the error without one);
  // `when_unset`: the answer to every call when `token` is empty (nothing is let in then).
  explicit TokenAuth(std::string token, std::string how_to_send = "mapctl: --token or MAPD_TOKEN",
                     std::string when_unset = "this coordinator has no token for these calls")
      : token_(std::move(token)), how_to_send_(std::move(how_to_send)), when_unset_(std::move(when_unset)) {}
  // OK, or UNAUTHENTICATED saying what is missing (never echoing what was sent).
  grpc::Status Check(const grpc::ServerContextBase& context) const;  // sync and callback calls alike

 private:
  std::string token_, how_to_send_, when_unset_;
};

// The token: the first line of `file` when given, else the environment variable `env`.
// FAILED_PRECONDITION when neither gives one (the coordinator does not run open), naming `flag`
// and `env`; NOT_FOUND for a missing file.
absl::StatusOr<std::string> LoadToken(const std::string& file, const char* env = "MAPD_TOKEN",
                                      const char* flag = "--token-file");

// A client's call: the bearer token, and a deadline `timeout_seconds` from now (none if <= 0).
void AuthorizeCall(grpc::ClientContext& context, const std::string& token, double timeout_seconds);

// A client's channel credentials: plaintext, or TLS checked against the PEM roots in
// `tls_ca_file` (NOT_FOUND naming --tls-ca when it cannot be read).
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ClientCredentials(const std::string& tls_ca_file);

}  // namespace mapd

#endif  // MAPD_COMMON_RPC_AUTH_H_

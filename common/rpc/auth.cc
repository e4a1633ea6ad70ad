#include "common/rpc/auth.h"

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/store_secret.h"

namespace mapd {

grpc::Status TokenAuth::Check(const grpc::ServerContextBase& context) const {
  if (token_.empty()) return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, when_unset_);
  const auto& md = context.client_metadata();
  auto it = md.find("authorization");
  if (it == md.end()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        absl::StrCat("no authorization metadata: send 'authorization: Bearer <token>' (", how_to_send_, ")"));
  }
  const std::string value(it->second.data(), it->second.size());
  const std::string prefix = "Bearer ";
  if (value.rfind(prefix, 0) != 0 || !SameSecret(value.substr(prefix.size()), token_)) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "the bearer token is not this coordinator's");
  }
  return grpc::Status::OK;
}

absl::StatusOr<std::string> LoadToken(const std::string& file, const char* env, const char* flag) {
  std::string token;
  if (!file.empty()) {
    std::ifstream in(file);
    if (!in) return absl::NotFoundError(absl::StrCat("cannot read the token file ", file));
    std::getline(in, token);
  } else if (const char* value = std::getenv(env)) {
    token = value;
  }
  token = std::string(absl::StripAsciiWhitespace(token));
  if (token.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no token: give ", flag, " FILE or set ", env, " (every RPC but health needs one)"));
  }
  return token;
}

void AuthorizeCall(grpc::ClientContext& context, const std::string& token, double timeout_seconds) {
  context.AddMetadata("authorization", "Bearer " + token);
  if (timeout_seconds > 0) {
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000)));
  }
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ClientCredentials(const std::string& tls_ca_file) {
  if (tls_ca_file.empty()) return grpc::InsecureChannelCredentials();
  std::ifstream in(tls_ca_file);
  if (!in) return absl::NotFoundError(absl::StrCat("--tls-ca ", tls_ca_file, ": cannot read it"));
  std::stringstream pem;
  pem << in.rdbuf();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = pem.str();
  return grpc::SslCredentials(ssl);
}

}  // namespace mapd

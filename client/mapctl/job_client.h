// mapctl's connection to the coordinator: where it is and which token to send, from flags, the
// environment or a context of the config file (docs/cli.md "Connecting"), and unary calls that
// retry while the coordinator says it is busy.
#ifndef MAPD_CLIENT_MAPCTL_JOB_CLIENT_H_
#define MAPD_CLIENT_MAPCTL_JOB_CLIENT_H_

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "CLI/CLI.hpp"
#include "client/mapctl/commands.h"
#include "proto/mapd/v1/job_service.grpc.pb.h"
#include "proto/mapd/v1/workers.grpc.pb.h"

namespace mapd::cli {

// Where to connect, resolved: each setting from its flag, else its environment variable
// (MAPD_ADDRESS, MAPD_TOKEN, MAPD_TOKEN_FILE, MAPD_TLS_CA), else the context (--context, else
// $MAPD_CONTEXT, else the file's current-context) of the config file ($MAPD_CONFIG, else
// $XDG_CONFIG_HOME/mapd/config.yaml, else ~/.config/mapd/config.yaml), else the default.
struct Connection {
  std::string address;
  std::string token;
  std::string tls_ca;
};
absl::StatusOr<Connection> ResolveConnection(const JobArgs& args);

// --address, --token, --token-file, --tls-ca, --context and -o of a job command, into `*args`.
void AddConnectionFlags(CLI::App* cmd, JobArgs* args);

// A job command that names one job (`get ID`, `watch ID`, ...): its ID into `*id`, its
// connection's flags into `*args`.
CLI::App* AddJobIdCommand(CLI::App& app, const char* name, const char* help, int64_t* id, JobArgs* args);

// The call's status, named by what was asked; an unreachable coordinator says what to check.
absl::Status FromGrpc(const grpc::Status& status, const std::string& what);

struct Client {
  std::unique_ptr<v1::JobService::Stub> stub;
  std::unique_ptr<v1::WorkerService::Stub> workers;
  std::string token;
  // One unary call with the token and a deadline, its status named by `what`.
  absl::Status Call(const std::string& what, const std::function<grpc::Status(grpc::ClientContext*)>& rpc) const;
  void Prepare(grpc::ClientContext& ctx, double timeout_seconds = 30) const;
};

absl::StatusOr<Client> Connect(const JobArgs& args);
absl::StatusOr<v1::Job> GetJob(const Client& client, int64_t id, const std::string& what);

}  // namespace mapd::cli

#endif  // MAPD_CLIENT_MAPCTL_JOB_CLIENT_H_

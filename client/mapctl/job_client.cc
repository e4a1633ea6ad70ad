#include "client/mapctl/job_client.h"

#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/rpc/auth.h"
#include "common/rpc/grpc_status.h"

namespace mapd::cli {

namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

std::string ConfigPath() {
  if (std::string p = Env("MAPD_CONFIG"); !p.empty()) return p;
  if (std::string xdg = Env("XDG_CONFIG_HOME"); !xdg.empty()) return xdg + "/mapd/config.yaml";
  if (std::string home = Env("HOME"); !home.empty()) return home + "/.config/mapd/config.yaml";
  return "";
}

// "~/x" under $HOME; a relative path under the config file's directory.
std::string ConfigRelative(const std::string& path, const std::string& config) {
  if (path.rfind("~/", 0) == 0) return Env("HOME") + path.substr(1);
  if (path.empty() || path[0] == '/') return path;
  return (std::filesystem::path(config).parent_path() / path).string();
}

// The context's settings (address, token_file, tls_ca), or none without a config file.
absl::StatusOr<Connection> FromContext(const std::string& wanted, std::string* token_file) {
  const std::string file = ConfigPath();
  Connection c;
  if (file.empty() || !std::filesystem::exists(file)) {
    if (!wanted.empty()) return absl::NotFoundError(absl::StrCat("context '", wanted, "': no config file ", file));
    return c;
  }
  const std::string where = absl::StrCat("config ", file);
  try {
    YAML::Node y = YAML::LoadFile(file);
    if (!y.IsMap()) return absl::InvalidArgumentError(absl::StrCat(where, ": give current-context and contexts"));
    for (const auto& kv : y) {
      const std::string key = kv.first.as<std::string>();
      if (key != "current-context" && key != "contexts") {
        return absl::InvalidArgumentError(absl::StrCat(where, ": unknown key '", key, "' (current-context, contexts)"));
      }
    }
    const std::string name = !wanted.empty() ? wanted : y["current-context"] ? y["current-context"].as<std::string>() : "";
    if (name.empty()) return c;
    const YAML::Node contexts = y["contexts"];
    if (!contexts || !contexts.IsMap() || !contexts[name]) {
      std::vector<std::string> names;
      if (contexts && contexts.IsMap()) {
        for (const auto& kv : contexts) names.push_back(kv.first.as<std::string>());
      }
      return absl::NotFoundError(absl::StrCat(where, ": no context '", name, "' (contexts: ", names.empty() ? "none" : absl::StrJoin(names, ", "), ")"));
    }
    const YAML::Node ctx = contexts[name];
    for (const auto& kv : ctx) {
      const std::string key = kv.first.as<std::string>();
      if (key != "address" && key != "token_file" && key != "tls_ca") {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": context '", name, "': unknown key '", key, "' (address, token_file, tls_ca)"));
      }
    }
    if (ctx["address"]) c.address = ctx["address"].as<std::string>();
    if (ctx["token_file"]) *token_file = ConfigRelative(ctx["token_file"].as<std::string>(), file);
    if (ctx["tls_ca"]) c.tls_ca = ConfigRelative(ctx["tls_ca"].as<std::string>(), file);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", e.what()));
  }
  return c;
}

}  // namespace

absl::StatusOr<Connection> ResolveConnection(const JobArgs& a) {
  std::string context_token_file;
  auto context = FromContext(!a.context.empty() ? a.context : Env("MAPD_CONTEXT"), &context_token_file);
  if (!context.ok()) return context.status();
  Connection c;
  c.address = !a.address.empty() ? a.address : !Env("MAPD_ADDRESS").empty() ? Env("MAPD_ADDRESS")
              : !context->address.empty() ? context->address : "127.0.0.1:7070";
  c.tls_ca = !a.tls_ca.empty() ? a.tls_ca : !Env("MAPD_TLS_CA").empty() ? Env("MAPD_TLS_CA") : context->tls_ca;
  // The token: --token, --token-file, $MAPD_TOKEN, $MAPD_TOKEN_FILE, the context's token_file.
  if (!a.token.empty()) {
    c.token = a.token;
  } else {
    const std::string file = !a.token_file.empty() ? a.token_file : !Env("MAPD_TOKEN").empty() ? "" : !Env("MAPD_TOKEN_FILE").empty() ? Env("MAPD_TOKEN_FILE") : context_token_file;
    auto token = LoadToken(file, "MAPD_TOKEN", "--token-file");
    if (!token.ok()) {
      if (token.status().code() == absl::StatusCode::kFailedPrecondition) {
        return absl::FailedPreconditionError(
            "no token: give --token-file FILE (or --token), set MAPD_TOKEN, or a context's token_file in the config file (docs/cli.md)");
      }
      return token.status();
    }
    c.token = *token;
  }
  return c;
}

absl::Status FromGrpc(const grpc::Status& st, const std::string& what) {
  const absl::Status status = FromGrpcStatus(st);
  if (status.ok()) return status;
  std::string message(status.message());
  if (status.code() == absl::StatusCode::kUnavailable) {
    message = absl::StrCat("cannot reach the coordinator (", message, "); is mapd running there? (--address, MAPD_ADDRESS or --context)");
  }
  return absl::Status(status.code(), absl::StrCat(what, ": ", message));
}

void Client::Prepare(grpc::ClientContext& ctx, double timeout_seconds) const { AuthorizeCall(ctx, token, timeout_seconds); }

absl::StatusOr<Client> Connect(const JobArgs& a) {
  auto conn = ResolveConnection(a);
  if (!conn.ok()) return conn.status();
  auto creds = ClientCredentials(conn->tls_ca);
  if (!creds.ok()) return creds.status();
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);  // Get answers a submitted graph whole, weights included
  auto channel = grpc::CreateCustomChannel(conn->address, *creds, args);
  Client c;
  c.token = conn->token;
  c.stub = v1::JobService::NewStub(channel);
  c.workers = v1::WorkerService::NewStub(channel);
  return c;
}

// RESOURCE_EXHAUSTED is the coordinator refusing a call before doing anything (its threads or
// plan searches all busy), so any call — a Submit too — is tried again: after 0.2 s, doubling
// to 5 s, for about a minute in all.
absl::Status Client::Call(const std::string& what, const std::function<grpc::Status(grpc::ClientContext*)>& rpc) const {
  double wait = 0.2, waited = 0;
  for (;;) {
    grpc::ClientContext ctx;
    Prepare(ctx);
    const grpc::Status st = rpc(&ctx);
    if (st.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED || waited >= 60) return FromGrpc(st, what);
    std::cerr << "mapctl " << what << ": the coordinator is busy (" << st.error_message() << "); trying again in "
              << wait << " s\n";
    std::this_thread::sleep_for(std::chrono::duration<double>(wait));
    waited += wait;
    wait = std::min(wait * 2, 5.0);
  }
}

absl::StatusOr<v1::Job> GetJob(const Client& client, int64_t id, const std::string& what) {
  v1::GetJobRequest req;
  req.set_id(id);
  v1::Job job;
  if (auto st = client.Call(what, [&](grpc::ClientContext* ctx) { return client.stub->Get(ctx, req, &job); }); !st.ok()) return st;
  return job;
}

void AddConnectionFlags(CLI::App* cmd, JobArgs* args) {
  cmd->add_option("--address", args->address, "Coordinator host:port (default $MAPD_ADDRESS, the context's, else 127.0.0.1:7070)");
  cmd->add_option("--token", args->token, "Bearer token (visible to other users in ps: prefer --token-file or $MAPD_TOKEN)");
  cmd->add_option("--token-file", args->token_file, "File whose first line is the bearer token (default $MAPD_TOKEN, $MAPD_TOKEN_FILE, the context's token_file)");
  cmd->add_option("--tls-ca", args->tls_ca, "PEM root certificates: speak TLS to the coordinator (default $MAPD_TLS_CA, the context's)");
  cmd->add_option("--context", args->context, "A context of ~/.config/mapd/config.yaml (default $MAPD_CONTEXT, its current-context)");
  cmd->add_option("-o,--output", args->format, "Output format: table | wide | json | yaml | name")
      ->check(CLI::IsMember({"table", "wide", "json", "yaml", "name"}))
      ->capture_default_str();
}

CLI::App* AddJobIdCommand(CLI::App& app, const char* name, const char* help, int64_t* id, JobArgs* args) {
  CLI::App* cmd = app.add_subcommand(name, help);
  // A job's id (10) or its name as `jobs -o name` prints it (job/10), as kubectl takes both.
  const CLI::Validator job_ref(
      [](std::string& given) {
        const std::string digits = absl::StartsWith(given, "job/") ? given.substr(4) : given;
        int64_t parsed = 0;
        if (!absl::SimpleAtoi(digits, &parsed) || parsed < 1 || digits[0] == '+') {
          return absl::StrCat("'", given.substr(0, 64), "' is not a job: give its id (10) or name (job/10), as mapctl jobs lists them");
        }
        given = digits;
        return std::string();
      },
      "ID|job/ID");
  cmd->add_option("ID", *id, "Job id or name: 10, job/10 (mapctl jobs)")->required()->transform(job_ref);
  AddConnectionFlags(cmd, args);
  return cmd;
}

}  // namespace mapd::cli

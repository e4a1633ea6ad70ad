// mapd: the MAP coordinator (DESIGN §9). Serves the job service over gRPC until SIGINT or
// SIGTERM, then shuts down gracefully (running calls get a few seconds).
//
//   MAPD_TOKEN=secret mapd --listen 127.0.0.1:7070 --store /var/lib/mapd/jobs.db
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <thread>

#include <yaml-cpp/yaml.h>

#include <set>

#include "common/allocator.h"
#include "common/version.h"
#include "common/bytes.h"
#include "CLI/CLI.hpp"
#include "planner/profile/device_profile.h"
#include "server/api/server.h"

namespace {
volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }
}  // namespace

// Settings from a YAML file (keys as the flags, with '_' for '-'), for every flag not given on
// the command line. An unknown key is an error naming it.
bool ApplyConfig(const std::string& file, CLI::App& app) {
  YAML::Node y;
  try {
    y = YAML::LoadFile(file);
  } catch (const std::exception& e) {
    std::cerr << "mapd: --config " << file << ": " << e.what() << " [INVALID_ARGUMENT]\n";
    return false;
  }
  if (!y.IsMap()) {
    std::cerr << "mapd: --config " << file << ": a mapping of settings (listen, store, token_file, ...) [INVALID_ARGUMENT]\n";
    return false;
  }
  for (const auto& kv : y) {
    std::string key = kv.first.as<std::string>();
    std::string flag = "--" + key;
    for (char& c : flag) c = c == '_' ? '-' : c;
    CLI::Option* opt = nullptr;
    try {
      opt = app.get_option(flag);
    } catch (const CLI::OptionNotFound&) {
      std::cerr << "mapd: --config " << file << ": unknown setting '" << key
                << "'; settings are listen, store, token_file, worker_token_file, tls_cert, tls_key, metrics_listen, lease_seconds, heartbeat_seconds, checkpoint_dir, max_restarts, elastic_grace_seconds, max_devices_per_worker, max_device_memory, max_workers, lost_worker_retention_seconds, max_watch_streams, max_watch_streams_per_client, max_threads, max_concurrent_plans, plan_wait_seconds, admitted_plan_bytes, job_retention_seconds, max_finished_jobs, keep_checkpoints, max_ranks, max_steps, max_graph_nodes, max_name_chars, max_model_spec_chars, max_message_bytes, device_profile_dir [INVALID_ARGUMENT]\n";
      return false;
    }
    if (opt->count() > 0 || flag == "--config") continue;  // the command line wins
    try {
      opt->add_result(kv.second.as<std::string>());
      opt->run_callback();
    } catch (const std::exception& e) {
      std::cerr << "mapd: --config " << file << ": " << key << ": " << e.what() << " [INVALID_ARGUMENT]\n";
      return false;
    }
  }
  return true;
}

int main(int argc, char** argv) {
  mapd::RetainFreedMemory();  // planning frees and reuses cost graphs by the hundred
  CLI::App app{"mapd: the MAP coordinator — takes training jobs over gRPC, plans them and runs them on mapd-workers"};
  app.set_version_flag("--version", mapd::VersionLine("mapd"));
  mapd::ServerOptions o;
  std::string token_file, config;
  app.add_option("--config", config, "YAML file of these settings (listen, store, token_file, ...); flags given here win");
  app.add_option("--listen", o.listen, "host:port to serve on (port 0: any free port, printed)")->capture_default_str();
  app.add_option("--store", o.store_path, "SQLite database of jobs and events (WAL); empty: in memory");
  app.add_option("--token-file", token_file, "File whose first line is the clients' bearer token (else $MAPD_TOKEN)");
  std::string worker_token_file;
  app.add_option("--worker-token-file", worker_token_file,
                 "File whose first line is the workers' bearer token, not the clients' (else $MAPD_WORKER_TOKEN; neither: no "
                 "worker is taken)");
  app.add_option("--tls-cert", o.tls_cert_file, "PEM certificate (with --tls-key) for TLS");
  app.add_option("--tls-key", o.tls_key_file, "PEM private key (with --tls-cert)");
  o.metrics_listen = "127.0.0.1:9464";
  app.add_option("--metrics-listen", o.metrics_listen, "host:port of the Prometheus /metrics endpoint (port 0: any; empty: none)")
      ->capture_default_str();
  app.add_option("--lease-seconds", o.lease.lease_seconds, "A worker without a heartbeat this long is lost")->capture_default_str();
  app.add_option("--heartbeat-seconds", o.lease.heartbeat_seconds, "How often workers are told to heartbeat")->capture_default_str();
  // Rank 0 of each job hosts its rendezvous store now (mapd-worker --advertise-host says where it
  // is reached); the coordinator's old setting is accepted and ignored, with a warning.
  std::string advertise;
  app.add_option("--advertise-host", advertise, "No longer used (rank 0 hosts the rendezvous store; see mapd-worker --advertise-host)")
      ->group("");
  app.add_option("--checkpoint-dir", o.dispatch_options.checkpoint_dir,
                 "Storage this coordinator and every worker reach at this path (shared FS; any dir on one machine): jobs' "
                 "checkpoints go there and a job whose worker is lost resumes from its last one (default: none — workers keep "
                 "their own and such a job fails)");
  app.add_option("--max-restarts", o.dispatch_options.max_restarts, "Times a job may resume after lost workers or rank failures (0: never)")->capture_default_str();
  app.add_option("--elastic-grace-seconds", o.dispatch_options.elastic_grace_seconds,
                 "How long an elastic job whose worker was lost waits for as many devices before it goes on with fewer")
      ->capture_default_str();
  app.add_option("--keep-checkpoints", o.dispatch_options.keep_checkpoints,
                 "Committed checkpoint steps kept per job under --checkpoint-dir (older ones are deleted at each commit)")
      ->capture_default_str();
  app.add_option("--max-devices-per-worker", o.registrations.max_devices_per_worker,
                 "Devices one worker may register (more is refused)")->capture_default_str();
  std::string max_device_memory = "4TiB";
  app.add_option("--max-device-memory", max_device_memory, "Memory one registered device may state (more is refused)")
      ->capture_default_str();
  app.add_option("--max-watch-streams", o.max_watch_streams, "Watch streams (mapctl watch) open at once; more are refused")
      ->capture_default_str();
  app.add_option("--max-watch-streams-per-client", o.max_watch_streams_per_client,
                 "Watch streams one client host (address without port) may hold open; more are refused")
      ->capture_default_str();
  app.add_option("--max-threads", o.max_threads, "Threads the gRPC server runs its other calls on (a call finding none is RESOURCE_EXHAUSTED)")
      ->capture_default_str();
  app.add_option("--max-concurrent-plans", o.max_concurrent_plans,
                 "Plan searches (submit, plan, profile) run at once; more calls wait for a place")
      ->capture_default_str();
  app.add_option("--plan-wait-seconds", o.plan_wait_seconds,
                 "How long a call waits for a place among the plan searches before RESOURCE_EXHAUSTED")
      ->capture_default_str();
  app.add_option("--admitted-plan-bytes", o.admitted_plan_bytes,
                 "Memory the plans made at admission may take while their jobs wait (a job whose plan is dropped past it is "
                 "planned again as it starts; 0: keep none)")
      ->capture_default_str();
  app.add_option("--job-retention-seconds", o.retention.finished_job_seconds,
                 "A finished job and its events are deleted this long after its last change (default 30 days)")
      ->capture_default_str();
  app.add_option("--max-finished-jobs", o.retention.max_finished_jobs,
                 "Finished jobs kept; past it the longest-finished are deleted")
      ->capture_default_str();
  app.add_option("--max-workers", o.registrations.max_workers, "Worker registrations kept, alive and lost")->capture_default_str();
  app.add_option("--lost-worker-retention-seconds", o.registrations.lost_retention_seconds,
                 "A lost worker's registration is dropped this long after its lease ran out")
      ->capture_default_str();
  app.add_option("--max-ranks", o.spec_limits.max_ranks, "Ranks (devices) one job may ask for")->capture_default_str();
  app.add_option("--max-steps", o.spec_limits.max_steps, "Steps one job may ask for")->capture_default_str();
  app.add_option("--max-graph-nodes", o.spec_limits.max_graph_nodes,
                 "Nodes (and parameters, and inputs) a submitted graph may have")
      ->capture_default_str();
  app.add_option("--max-name-chars", o.spec_limits.max_name_chars, "Characters of a job's name")->capture_default_str();
  app.add_option("--max-model-spec-chars", o.spec_limits.max_model_spec_chars, "Characters of a zoo model spec")
      ->capture_default_str();
  std::string device_profile_dir;
  app.add_option("--device-profile-dir", device_profile_dir,
                 "Device profiles (mapctl calibrate's JSON files) jobs may name as device_type, beside the catalogue's");
  std::string max_message = "256MiB";
  app.add_option("--max-message-bytes", max_message, "The largest request read (a submitted graph with its weights inline)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  // The store (jobs' specs and events) and committed checkpoints are this user's alone.
  umask(077);
  if (!config.empty() && !ApplyConfig(config, app)) return 1;
  if (auto bytes = mapd::ParseBytes(max_device_memory); !bytes.ok() || *bytes <= 0) {
    std::cerr << "mapd: --max-device-memory " << max_device_memory << ": give a size such as 80GiB or 4TiB [INVALID_ARGUMENT]\n";
    return 1;
  } else {
    o.registrations.max_device_memory_bytes = *bytes;
  }
  if (!device_profile_dir.empty()) {
    if (auto st = mapd::AddOperatorProfiles(device_profile_dir); !st.ok()) {
      std::cerr << "mapd: " << st << "\n";
      return 1;
    }
  }
  if (auto bytes = mapd::ParseBytes(max_message); !bytes.ok() || *bytes <= 0) {
    std::cerr << "mapd: --max-message-bytes " << max_message << ": give a size such as 256MiB [INVALID_ARGUMENT]\n";
    return 1;
  } else {
    o.max_message_bytes = *bytes;
  }
  if (!o.dispatch_options.checkpoint_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.dispatch_options.checkpoint_dir, ec);
    o.dispatch_options.checkpoint_dir = std::filesystem::absolute(o.dispatch_options.checkpoint_dir, ec).string();
  }
  if (!advertise.empty()) {
    std::cerr << "mapd: warning: --advertise-host is no longer used: each job's rank 0 hosts its rendezvous store, reached at its "
                 "worker's --advertise-host\n";
  }
  auto token = mapd::LoadToken(token_file);
  if (!token.ok()) {
    std::cerr << "mapd: " << token.status().message() << " [" << absl::StatusCodeToString(token.status().code()) << "]\n";
    return 1;
  }
  o.token = *token;
  if (!worker_token_file.empty() || std::getenv("MAPD_WORKER_TOKEN") != nullptr) {
    auto worker_token = mapd::LoadToken(worker_token_file, "MAPD_WORKER_TOKEN", "--worker-token-file");
    if (!worker_token.ok()) {
      std::cerr << "mapd: " << worker_token.status().message() << " [" << absl::StatusCodeToString(worker_token.status().code()) << "]\n";
      return 1;
    }
    o.worker_token = *worker_token;
  } else {
    std::cerr << "mapd: warning: no workers' token (--worker-token-file or MAPD_WORKER_TOKEN): no worker can register, so jobs "
                 "stay queued\n";
  }
  auto server = mapd::MapdServer::Start(o);
  if (!server.ok()) {
    std::cerr << "mapd: " << server.status().message() << " [" << absl::StatusCodeToString(server.status().code()) << "]\n";
    return 1;
  }
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  std::cout << "mapd: serving on port " << (*server)->port() << (o.store_path.empty() ? " (jobs in memory)" : " (jobs in " + o.store_path + ")")
            << std::endl;
  if ((*server)->metrics_port() > 0) {
    std::cout << "mapd: metrics on http://" << o.metrics_listen.substr(0, o.metrics_listen.rfind(':')) << ":" << (*server)->metrics_port()
              << "/metrics" << std::endl;
  }
  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::cout << "mapd: shutting down" << std::endl;
  (*server)->Shutdown(5);
  (*server)->Wait();
  return 0;
}

// mapd-worker: a MAP worker daemon (DESIGN §9). Dials the coordinator, registers this machine's
// devices, keeps its lease with heartbeats, runs the ranks the coordinator assigns (as `mapctl
// _rank` processes), reports their progress, commits their checkpoints, and serves /metrics
// (docs/coordinator.md).
//
//   MAPD_WORKER_TOKEN=secret mapd-worker --coordinator 127.0.0.1:7070 --cpu-devices 2
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "CLI/CLI.hpp"
#include "common/bytes.h"
#include "common/metrics/build_info.h"
#include "common/metrics/http_exporter.h"
#include "common/version.h"
#include "common/rpc/auth.h"
#include "planner/profile/device_profile_proto.h"
#include "worker/daemon/agent.h"
#include "worker/daemon/host_profile.h"
#include "worker/daemon/local_devices.h"
#include "worker/daemon/rank_ports.h"
#include "worker/launch/rank_command.h"
#include "worker/shards/shard_service.h"
#include "worker/shards/shard_store.h"

namespace {
mapd::WorkerAgent* g_agent = nullptr;
void OnSignal(int) {
  if (g_agent != nullptr) g_agent->Stop();
}
// Where peers reach this worker's ranks unless --advertise-host says: on loopback when the
// coordinator is (one machine), else by this machine's name.
std::string DefaultAdvertiseHost(const std::string& coordinator, const std::string& hostname) {
  const std::string host = coordinator.substr(0, coordinator.rfind(':'));
  if (host == "127.0.0.1" || host == "localhost" || host == "[::1]" || host.rfind("127.", 0) == 0) return "127.0.0.1";
  return hostname;
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"mapd-worker: a MAP worker — registers its devices with the coordinator (mapd), keeps its lease, and runs the ranks "
               "of jobs the coordinator assigns"};
  app.set_version_flag("--version", mapd::VersionLine("mapd-worker"));
  mapd::AgentOptions o;
  std::string token_file, metrics_listen = "127.0.0.1:9465";
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  o.hostname = host;
  if (const char* a = std::getenv("MAPD_ADDRESS")) o.coordinator = a;
  app.add_option("--coordinator", o.coordinator, "mapd's host:port (default $MAPD_ADDRESS)");
  app.add_option("--token-file", token_file,
                 "File whose first line is the coordinator's workers' token — not the clients' (else $MAPD_WORKER_TOKEN)");
  mapd::DeviceOptions devices;
  app.add_option("--cpu-devices", devices.cpu_devices, "CPU ranks this worker offers (Gloo)")->capture_default_str();
  std::string cpu_memory;
  app.add_option("--memory-per-device", cpu_memory,
                 "Per CPU rank, e.g. 8GiB, 8GB or bytes (default: this machine's memory / CPU ranks)");
  app.add_option("--cuda-devices", devices.cuda_devices, "GPUs this worker offers (NCCL; each with its own memory)")->capture_default_str();
  app.add_option("--hostname", o.hostname, "Name shown by `mapctl workers`")->capture_default_str();
  std::string advertise_host;
  app.add_option("--advertise-host", advertise_host,
                 "Address other workers' ranks reach this one's at: the rendezvous store its rank 0 hosts, Gloo's transport "
                 "(default: 127.0.0.1 when the coordinator is on loopback, else --hostname)");
  app.add_option("--metrics-listen", metrics_listen, "host:port of this worker's /metrics (port 0: any; empty: none)")->capture_default_str();
  app.add_option("--tls-ca", o.tls_ca_file, "PEM roots to check a TLS coordinator with (default: plaintext)");
  app.add_option("--work-dir", o.runner.work_dir,
                 "Where ranks' files and checkpoints go (job-<id>/ per job; default: a fresh private directory under the "
                 "system's temporary one, mkdtemp)");
  app.add_option("--data-root", o.runner.data_root,
                 "Directory jobs' data files (text:FILE, tokens:FILE, npy:INPUTS[,TARGETS]) are read from, and nothing outside it (default: none — "
                 "jobs here train on synthetic data only)");
  if (auto found = mapd::FindRankBinary(); found.ok()) o.runner.rank_program = *found;
  app.add_option("--rank-program", o.runner.rank_program,
                 "The mapd-rank binary that runs one rank (default: beside mapd-worker, in the build tree, or on PATH)")
      ->capture_default_str();
  app.add_option("--rank-timeout", o.runner.rank_timeout_seconds,
                 "Seconds a rank may stay silent or wait in a collective before its job fails")
      ->capture_default_str();
  mapd::HostProfileOptions calibration;
  app.add_option("--calibration", calibration.calibration,
                 "The profile jobs here are costed on: auto (this host measured at start — about 12 s on 2 cores — and kept per "
                 "host and build in --calibration-cache; later starts read it), off (none: the catalogue's), or a JSON file "
                 "from `mapctl calibrate -o FILE` (default: $MAPD_CALIBRATION, else auto)")
      ->capture_default_str();
  app.add_option("--calibration-cache", calibration.cache_dir,
                 "Where this host's calibration is kept (default: $MAPD_CACHE_DIR, else $XDG_CACHE_HOME/mapd, else ~/.cache/mapd)");
  app.add_option("--metrics-retention", o.metrics_retention_seconds,
                 "Seconds a finished job's series (job_id=...) stay on /metrics before they are dropped")
      ->capture_default_str();
  std::string rank_ports;
  std::string shard_listen = "auto";
  app.add_option("--shard-listen", shard_listen,
                 "host:port where peer workers keep and fetch jobs' checkpoint shards when the coordinator has no shared storage "
                 "(auto: the advertised host, a port from the rank ports; empty: none — a lost worker's job then cannot resume)")
      ->capture_default_str();
  app.add_option("--rank-ports", rank_ports,
                 "LO-HI: the ports this worker's ranks listen on (rank 0's store gate, Gloo, NCCL) must lie here, for a network "
                 "policy that opens only these; they come from the kernel's net.ipv4.ip_local_port_range, so mapd-worker refuses "
                 "to start unless that lies inside LO-HI (default: not checked)");
  CLI11_PARSE(app, argc, argv);
  if (!rank_ports.empty()) {
    auto wanted = mapd::ParsePortRange(rank_ports);
    auto ephemeral = wanted.ok() ? mapd::ReadEphemeralPorts() : wanted.status();
    const absl::Status st = ephemeral.ok() ? mapd::CheckRankPorts(*wanted, *ephemeral) : ephemeral.status();
    if (!st.ok()) {
      std::cerr << "mapd-worker: " << st.message() << " [" << absl::StatusCodeToString(st.code()) << "]\n";
      return 1;
    }
  }
  // What this worker writes (run directories, checkpoint shards) is its user's alone.
  umask(077);
  if (o.runner.work_dir.empty()) {
    // Not a predictable path: a directory made fresh, 0700, that no one else can have prepared.
    std::string pattern = (std::filesystem::temp_directory_path() / "mapd-worker-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      std::cerr << "mapd-worker: cannot make a work directory under " << std::filesystem::temp_directory_path()
                << "; give --work-dir [FAILED_PRECONDITION]\n";
      return 1;
    }
    o.runner.work_dir = pattern;
  }
  auto token = mapd::LoadToken(token_file, "MAPD_WORKER_TOKEN");
  if (!token.ok()) {
    std::cerr << "mapd-worker: " << token.status().message() << " [" << absl::StatusCodeToString(token.status().code()) << "]\n";
    return 1;
  }
  o.token = *token;
  o.runner.advertise_host = !advertise_host.empty() ? advertise_host : DefaultAdvertiseHost(o.coordinator, o.hostname);
  if (!cpu_memory.empty()) {
    auto bytes = mapd::ParseBytes(cpu_memory);
    if (!bytes.ok()) {
      std::cerr << "mapd-worker: --memory-per-device: " << bytes.status().message() << " [INVALID_ARGUMENT]\n";
      return 1;
    }
    devices.cpu_memory = *bytes;
  }
  auto offered = mapd::LocalDevices(devices);
  if (!offered.ok()) {
    std::cerr << "mapd-worker: " << offered.status().message() << " [" << absl::StatusCodeToString(offered.status().code()) << "]\n";
    return 1;
  }
  o.devices = *std::move(offered);
  calibration.rank_program = o.runner.rank_program;
  auto host_profile = mapd::HostProfileAtStart(calibration);
  if (!host_profile.ok()) {
    std::cerr << "mapd-worker: calibration: " << host_profile.status().message() << " ["
              << absl::StatusCodeToString(host_profile.status().code()) << "]\n";
    return 1;
  }
  std::cerr << "mapd-worker: " << host_profile->note << std::endl;
  if (host_profile->profile) o.profile = mapd::DeviceProfileToProto(*host_profile->profile);
  mapd::MetricsRegistry metrics;
  (void)metrics.Gauge("mapd_worker_up", "1 while the worker runs.");
  metrics.Set("mapd_worker_up", {}, 1);
  mapd::ExportBuildInfo(&metrics, "worker");
  std::unique_ptr<mapd::MetricsExporter> exporter;
  if (!metrics_listen.empty()) {
    auto e = mapd::MetricsExporter::Start(metrics_listen, &metrics, nullptr);
    if (!e.ok()) {
      std::cerr << "mapd-worker: " << e.status().message() << " [" << absl::StatusCodeToString(e.status().code()) << "]\n";
      return 1;
    }
    exporter = *std::move(e);
    o.metrics_address = metrics_listen.substr(0, metrics_listen.rfind(':')) + ":" + std::to_string(exporter->port());
  }
  // Checkpoint shards kept for peers (and this worker's own, for them), under the work dir.
  mapd::ShardStore shards(o.runner.work_dir + "/shards");
  std::unique_ptr<mapd::ShardServer> shard_server;
  if (!shard_listen.empty()) {
    auto started = mapd::StartShardServer(shard_listen == "auto" ? o.runner.advertise_host + ":0" : shard_listen, &shards);
    if (!started.ok() && shard_listen != "auto") {
      std::cerr << "mapd-worker: " << started.status().message() << " [" << absl::StatusCodeToString(started.status().code()) << "]\n";
      return 1;
    }
    if (started.ok()) {
      shard_server = *std::move(started);
      o.shard_address = shard_server->address;
      o.runner.shards = &shards;
      std::cerr << "mapd-worker: checkpoint shards for peers on " << o.shard_address << std::endl;
    } else {
      std::cerr << "mapd-worker: keeping no checkpoint shards for peers (" << started.status().message()
                << "): give --shard-listen HOST:PORT, or a job of a lost worker cannot resume without shared storage\n";
    }
  }
  mapd::WorkerAgent agent(o, &metrics);  // declares the job metric families
  // Announced once every family is declared: a scrape right after the line sees them all.
  if (exporter != nullptr) std::cout << "mapd-worker: metrics on http://" << o.metrics_address << "/metrics" << std::endl;
  g_agent = &agent;
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  const absl::Status st = agent.Run();
  if (shard_server != nullptr) shard_server->server->Shutdown();
  if (!st.ok()) {
    std::cerr << "mapd-worker: " << st.message() << " [" << absl::StatusCodeToString(st.code()) << "]\n";
    return 1;
  }
  std::cout << "mapd-worker: " << (agent.worker_id().empty() ? "stopped" : agent.worker_id() + " stopped") << std::endl;
  return 0;
}

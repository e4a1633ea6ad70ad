// The worker daemon's link to the coordinator (DESIGN §9): register this machine's devices, keep
// the lease alive with heartbeats, and register again when the coordinator has forgotten or
// declared it lost. Retries only transient failures (UNAVAILABLE: the coordinator is not up yet
// or restarting); anything else ends the agent with the coordinator's status.
#ifndef MAPD_WORKER_DAEMON_AGENT_H_
#define MAPD_WORKER_DAEMON_AGENT_H_

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "proto/mapd/v1/workers.grpc.pb.h"
#include "server/metrics/metrics.h"

namespace mapd {

struct AgentOptions {
  std::string coordinator;      // host:port of mapd
  std::string token;            // its bearer token
  std::string hostname;         // shown by `mapctl workers`
  int cpu_devices = 2;          // CPU ranks this worker can run at once ("cpu:0" … )
  int64_t memory_per_device = 0;  // bytes per device; 0: this machine's memory / cpu_devices
  std::string metrics_address;  // host:port of this worker's /metrics, told to the coordinator
  absl::Status Validate() const;
};

class WorkerAgent {
 public:
  // `metrics` must outlive the agent (it counts registrations and heartbeats).
  WorkerAgent(AgentOptions options, MetricsRegistry* metrics);
  // Registers, then heartbeats until Stop(); returns OK when stopped, or the error that ended it.
  absl::Status Run();
  void Stop() { stop_ = true; }
  std::string worker_id() const;

 private:
  absl::Status Register();
  AgentOptions options_;
  MetricsRegistry* metrics_;
  std::unique_ptr<v1::WorkerService::Stub> stub_;
  std::atomic<bool> stop_{false};
  std::string worker_id_;
  double heartbeat_seconds_ = 1;
};

}  // namespace mapd

#endif  // MAPD_WORKER_DAEMON_AGENT_H_

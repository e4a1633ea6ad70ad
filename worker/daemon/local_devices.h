// The devices a worker offers the coordinator: CPU ranks ("cpu:0" …) with a share of this
// machine's memory, and GPUs ("cuda:0" …) with their own memory, from the CUDA inventory
// (worker/device; a build without CUDA or a machine without GPUs says so).
#ifndef MAPD_WORKER_DAEMON_LOCAL_DEVICES_H_
#define MAPD_WORKER_DAEMON_LOCAL_DEVICES_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/mapd/v1/workers.pb.h"

namespace mapd {

struct DeviceOptions {
  int cpu_devices = 2;            // CPU ranks offered
  int64_t cpu_memory = 0;         // bytes per CPU rank; 0: this machine's memory / cpu_devices
  int cuda_devices = 0;           // GPUs offered: the first N visible ones
};

// INVALID_ARGUMENT for no devices or negative counts; FAILED_PRECONDITION when GPUs are asked
// for and this build or machine has fewer (naming what it has and what to do).
absl::StatusOr<std::vector<v1::Device>> LocalDevices(const DeviceOptions& options);

}  // namespace mapd

#endif  // MAPD_WORKER_DAEMON_LOCAL_DEVICES_H_

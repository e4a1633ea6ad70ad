#include "worker/daemon/local_devices.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "worker/device/device_info.h"

namespace mapd {

absl::StatusOr<std::vector<v1::Device>> LocalDevices(const DeviceOptions& o) {
  if (o.cpu_devices < 0 || o.cuda_devices < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--cpu-devices ", o.cpu_devices, " --cuda-devices ", o.cuda_devices, ": counts are >= 0"));
  }
  if (o.cpu_devices + o.cuda_devices == 0) return absl::InvalidArgumentError("no devices to offer: give --cpu-devices or --cuda-devices");
  if (o.cpu_memory < 0) return absl::InvalidArgumentError("--memory-per-device must be positive");
  std::vector<v1::Device> out;
  if (o.cpu_devices > 0) {
    int64_t memory = o.cpu_memory;
    if (memory == 0) memory = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE) / o.cpu_devices;
    for (int i = 0; i < o.cpu_devices; ++i) {
      v1::Device d;
      d.set_name(absl::StrCat("cpu:", i));
      d.set_memory_bytes(memory);
      out.push_back(d);
    }
  }
  if (o.cuda_devices > 0) {
    auto inventory = QueryCuda();
    if (!inventory.ok()) {
      return absl::FailedPreconditionError(absl::StrCat("--cuda-devices ", o.cuda_devices, ": ", inventory.status().message()));
    }
    if (static_cast<int>(inventory->devices.size()) < o.cuda_devices) {
      return absl::FailedPreconditionError(absl::StrCat("--cuda-devices ", o.cuda_devices, ": ", inventory->devices.size(),
                                                        " GPU(s) visible", inventory->note.empty() ? "" : absl::StrCat(" (", inventory->note, ")"),
                                                        "; offer fewer, or CPU devices with --cpu-devices"));
    }
    for (int i = 0; i < o.cuda_devices; ++i) {
      v1::Device d;
      d.set_name(absl::StrCat("cuda:", inventory->devices[i].index));
      d.set_memory_bytes(inventory->devices[i].total_memory_bytes);
      out.push_back(d);
    }
  }
  return out;
}

}  // namespace mapd

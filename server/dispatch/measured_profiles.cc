#include "server/dispatch/measured_profiles.h"

#include <algorithm>
#include <limits>

#include "planner/profile/device_profile.h"
#include "planner/profile/device_profile_proto.h"

namespace mapd {

v1::JobSpec CostedSpec(const v1::JobSpec& spec, const std::vector<v1::Worker>& workers) {
  if (!spec.device_type().empty()) return spec;
  v1::JobSpec out = spec;
  out.set_device_type("cpu");
  const std::string kind = spec.device().empty() ? "cpu" : spec.device();
  if (kind != "cpu") return out;
  const v1::Worker* slowest = nullptr;
  int64_t memory = std::numeric_limits<int64_t>::max();
  for (const v1::Worker& w : workers) {
    if (w.state() != v1::ALIVE) continue;
    bool offers = false;
    for (const v1::Device& d : w.devices()) {
      if (d.name().substr(0, d.name().find(':')) != kind) continue;
      offers = true;
      memory = std::min(memory, d.memory_bytes());
    }
    if (!offers) continue;
    if (!w.has_profile()) return out;  // one of them unmeasured: the catalogue's for all
    if (slowest == nullptr || w.profile().fp32_flops() < slowest->profile().fp32_flops()) slowest = &w;
  }
  if (slowest == nullptr) return out;
  auto profile = DeviceProfileFromProto(slowest->profile());  // (checked at registration)
  if (!profile.ok()) return out;
  profile->name = slowest->hostname();
  profile->memory_bytes = memory;
  auto name = RegisterMeasuredProfile(*profile);
  if (name.ok()) out.set_device_type(*name);
  return out;
}

}  // namespace mapd

#include "planner/profile/device_profile_proto.h"

#include "absl/strings/str_cat.h"

namespace mapd {

v1::DeviceProfile DeviceProfileToProto(const DeviceProfile& p) {
  v1::DeviceProfile out;
  out.set_name(p.name);
  out.set_description(p.description);
  out.set_fp32_flops(p.fp32_flops);
  out.set_bf16_flops(p.bf16_flops);
  out.set_memory_bandwidth(p.memory_bandwidth);
  out.set_kernel_overhead_seconds(p.kernel_overhead_seconds);
  out.set_memory_bytes(p.memory_bytes);
  out.set_source(p.source);
  out.set_accelerator(p.accelerator);
  out.set_host_threads(p.host_threads);
  out.set_threads(p.threads);
  for (const HostCollectives& c : p.host_collectives) {
    v1::HostCollectivesProfile* h = out.add_host_collectives();
    h->set_ranks(c.ranks);
    h->set_alpha(c.alpha);
    h->set_beta(c.beta);
    h->set_compute_speed(c.compute_speed);
    h->set_busy_alpha(c.busy_alpha);
  }
  for (const MatmulRate& m : p.matmul_rates) {
    v1::MatmulRateProfile* r = out.add_matmul_rates();
    r->set_flops(m.flops);
    r->set_rate(m.rate);
  }
  out.set_vector_flops(p.vector_flops);
  for (const auto& [op, rate] : p.op_rates) (*out.mutable_op_rates())[op] = rate;
  out.set_measured_unix_seconds(p.measured_unix_seconds);
  out.set_key(p.calibration_key);
  return out;
}

namespace {
absl::Status TooMany(const char* field, int64_t n, int64_t most) {
  return absl::InvalidArgumentError(absl::StrCat("profile.", field, ": ", n, " entries, at most ", most));
}
absl::Status TooLong(const char* field, size_t n) {
  return absl::InvalidArgumentError(absl::StrCat("profile.", field, ": ", n, " bytes, at most ", kMaxProfileStringBytes));
}
}  // namespace

absl::StatusOr<DeviceProfile> DeviceProfileFromProto(const v1::DeviceProfile& in) {
  if (in.matmul_rates_size() > kMaxProfileMatmulRates) return TooMany("matmul_rates", in.matmul_rates_size(), kMaxProfileMatmulRates);
  if (in.op_rates_size() > kMaxProfileOpRates) return TooMany("op_rates", in.op_rates_size(), kMaxProfileOpRates);
  if (in.host_collectives_size() > kMaxProfileHostCollectives) {
    return TooMany("host_collectives", in.host_collectives_size(), kMaxProfileHostCollectives);
  }
  for (const auto& [field, value] : {std::pair<const char*, const std::string*>{"name", &in.name()},
                                     {"description", &in.description()}, {"source", &in.source()}, {"key", &in.key()}}) {
    if (value->size() > kMaxProfileStringBytes) return TooLong(field, value->size());
  }
  for (const auto& [op, rate] : in.op_rates()) {
    if (op.size() > kMaxProfileStringBytes) return TooLong("op_rates (a key)", op.size());
  }
  DeviceProfile p;
  p.name = in.name();
  p.description = in.description();
  p.fp32_flops = in.fp32_flops();
  p.bf16_flops = in.bf16_flops();
  p.memory_bandwidth = in.memory_bandwidth();
  p.kernel_overhead_seconds = in.kernel_overhead_seconds();
  p.memory_bytes = in.memory_bytes();
  p.source = in.source().empty() ? "measured" : in.source();
  p.accelerator = in.accelerator();
  p.host_threads = in.host_threads();
  p.threads = in.threads();
  for (const v1::HostCollectivesProfile& h : in.host_collectives()) {
    if (h.ranks() > 1 << 20) return absl::InvalidArgumentError(absl::StrCat("profile.host_collectives.ranks: ", h.ranks(), " is too many"));
    p.host_collectives.push_back({h.ranks(), h.alpha(), h.beta(), h.compute_speed(), h.busy_alpha()});
  }
  for (const v1::MatmulRateProfile& m : in.matmul_rates()) p.matmul_rates.push_back({m.flops(), m.rate()});
  p.vector_flops = in.vector_flops();
  for (const auto& [op, rate] : in.op_rates()) p.op_rates[op] = rate;
  p.measured_unix_seconds = in.measured_unix_seconds();
  p.calibration_key = in.key();
  if (auto st = p.Validate(); !st.ok()) return absl::InvalidArgumentError(absl::StrCat("profile: ", st.message()));
  return p;
}

}  // namespace mapd

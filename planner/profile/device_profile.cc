#include "planner/profile/device_profile.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/strings/str_join.h"
#include "common/file_io.h"
#include "common/fnv1a.h"

namespace mapd {

namespace {
constexpr double kTera = 1e12;
constexpr double kGiga = 1e9;
constexpr int64_t kGiB = 1LL << 30;
}  // namespace

const std::vector<DeviceProfile>& DeviceCatalogue() {
  // Vendor peak figures (dense, no sparsity); SXM parts for A100/H100/H200. The cpu entry is a
  // nominal 2-core machine; `mapctl calibrate` measures the real one.
  static const std::vector<DeviceProfile> catalogue = [] {
    std::vector<DeviceProfile> c = {
      {"cpu", "nominal 2-core x86 CPU (calibrate for real figures)", 60 * kGiga, 60 * kGiga, 15 * kGiga, 5e-6,
       24 * kGiB},
      {"a100-40g", "NVIDIA A100 SXM 40 GB", 19.5 * kTera, 312 * kTera, 1555 * kGiga, 5e-6, 40 * kGiB},
      {"a100-80g", "NVIDIA A100 SXM 80 GB", 19.5 * kTera, 312 * kTera, 2039 * kGiga, 5e-6, 80 * kGiB},
      {"h100-80g", "NVIDIA H100 SXM 80 GB", 67 * kTera, 989 * kTera, 3350 * kGiga, 4e-6, 80 * kGiB},
      {"h200-141g", "NVIDIA H200 SXM 141 GB", 67 * kTera, 989 * kTera, 4800 * kGiga, 4e-6, 141 * kGiB},
    };
    for (DeviceProfile& d : c) d.accelerator = d.name != "cpu";
    return c;
  }();
  return catalogue;
}

absl::Status DeviceProfile::Validate() const {
  if (name.empty()) return absl::InvalidArgumentError("device profile: name is empty");
  // Every figure finite: a rate of +inf passes "positive" and makes every time 0.
  bool finite = std::isfinite(fp32_flops) && std::isfinite(bf16_flops) && std::isfinite(memory_bandwidth) &&
                std::isfinite(kernel_overhead_seconds) && std::isfinite(vector_flops) && std::isfinite(measured_unix_seconds);
  for (const auto& [op, rate] : op_rates) finite &= std::isfinite(rate);
  for (const MatmulRate& m : matmul_rates) finite &= std::isfinite(m.flops) && std::isfinite(m.rate);
  for (const HostCollectives& c : host_collectives) {
    finite &= std::isfinite(c.alpha) && std::isfinite(c.beta) && std::isfinite(c.busy_alpha) && std::isfinite(c.compute_speed);
  }
  if (!finite) return absl::InvalidArgumentError(absl::StrCat("device profile '", name, "': a figure is not a finite number"));
  if (!(fp32_flops > 0) || !(bf16_flops > 0) || !(memory_bandwidth > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("device profile '", name,
                                                   "': fp32_flops, bf16_flops and memory_bandwidth must be positive"));
  }
  if (!(vector_flops >= 0)) return absl::InvalidArgumentError(absl::StrCat("device profile '", name, "': vector_flops is negative"));
  for (const auto& [op, rate] : op_rates) {
    if (op.empty() || !(rate > 0)) {
      return absl::InvalidArgumentError(absl::StrCat("device profile '", name, "': op_rates needs an op name and a positive rate (op '",
                                                     op, "': ", rate, ")"));
    }
  }
  if (kernel_overhead_seconds < 0) {
    return absl::InvalidArgumentError(absl::StrCat("device profile '", name, "': kernel_overhead_seconds is negative"));
  }
  if (memory_bytes <= 0) return absl::InvalidArgumentError(absl::StrCat("device profile '", name, "': memory_bytes must be positive"));
  if (host_threads < 0 || threads < 0) return absl::InvalidArgumentError(absl::StrCat("device profile '", name, "': host_threads and threads must not be negative"));
  for (size_t i = 0; i < matmul_rates.size(); ++i) {
    if (!(matmul_rates[i].flops > 0) || !(matmul_rates[i].rate > 0) || (i > 0 && !(matmul_rates[i].flops > matmul_rates[i - 1].flops))) {
      return absl::InvalidArgumentError(absl::StrCat("device profile '", name,
                                                     "': matmul_rates need positive flops and rates, by increasing flops"));
    }
  }
  for (const HostCollectives& c : host_collectives) {
    if (c.ranks < 2 || !(c.alpha >= 0) || !(c.beta >= 0) || !(c.busy_alpha >= 0) || !(c.compute_speed >= 0 && c.compute_speed <= 2)) {
      return absl::InvalidArgumentError(absl::StrCat("device profile '", name, "': host_collectives entry for ", c.ranks,
                                                     " ranks needs ranks >= 2, alpha, beta, busy_alpha >= 0 and compute_speed in [0, 2] (got ",
                                                     c.alpha, ", ", c.beta, ", ", c.busy_alpha, ", ", c.compute_speed, ")"));
    }
  }
  return absl::OkStatus();
}

std::string DeviceProfile::ToJson() const {
  nlohmann::json j = {{"name", name},
                      {"description", description},
                      {"fp32_flops", fp32_flops},
                      {"bf16_flops", bf16_flops},
                      {"memory_bandwidth", memory_bandwidth},
                      {"kernel_overhead_seconds", kernel_overhead_seconds},
                      {"memory_bytes", memory_bytes},
                      {"source", source},
                      {"accelerator", accelerator}};
  if (host_threads > 0) j["host_threads"] = host_threads;
  if (vector_flops > 0) j["vector_flops"] = vector_flops;
  for (const auto& [op, rate] : op_rates) j["op_rates"][op] = rate;
  if (threads > 0) j["threads"] = threads;
  if (measured_unix_seconds > 0) j["measured_unix_seconds"] = measured_unix_seconds;
  if (!calibration_key.empty()) j["calibration_key"] = calibration_key;
  if (measured_busy) j["measured_busy"] = true;
  for (const MatmulRate& m : matmul_rates) j["matmul_rates"].push_back({{"flops", m.flops}, {"rate", m.rate}});
  for (const HostCollectives& c : host_collectives) {
    nlohmann::json e = {{"ranks", c.ranks}, {"alpha", c.alpha}, {"beta", c.beta}};
    if (c.compute_speed > 0) e["compute_speed"] = c.compute_speed;
    if (c.busy_alpha > 0) e["busy_alpha"] = c.busy_alpha;
    j["host_collectives"].push_back(e);
  }
  return j.dump(2);
}

double KernelSeconds(const DeviceProfile& d, bool bf16, double flops, double bytes, int64_t kernels, double flops_per_product,
                     bool vector, const std::string& op) {
  const double peak = bf16 ? d.bf16_flops : d.fp32_flops;
  const double launches = static_cast<double>(kernels) * d.kernel_overhead_seconds;
  double rate = peak;
  auto it = op.empty() ? d.op_rates.end() : d.op_rates.find(op);
  if (const size_t colon = op.find(':'); it == d.op_rates.end() && colon != std::string::npos) it = d.op_rates.find(op.substr(0, colon));
  if (it != d.op_rates.end()) {
    rate = it->second;
  } else if (flops_per_product > 0 && !d.matmul_rates.empty()) {
    rate = d.Fp32Rate(flops_per_product) * (peak / d.fp32_flops);
    return flops / rate + bytes / d.memory_bandwidth + launches;
  } else if (vector && d.vector_flops > 0) {
    rate = d.vector_flops;
  }
  return std::max(flops / rate, bytes / d.memory_bandwidth) + launches;
}

double DeviceProfile::Fp32Rate(double flops_per_product) const {
  if (!(flops_per_product > 0) || matmul_rates.empty()) return fp32_flops;
  if (flops_per_product <= matmul_rates.front().flops) return matmul_rates.front().rate;
  if (flops_per_product >= matmul_rates.back().flops) return matmul_rates.back().rate;
  size_t i = 1;
  while (matmul_rates[i].flops < flops_per_product) ++i;
  const MatmulRate &lo = matmul_rates[i - 1], &hi = matmul_rates[i];
  const double t = std::log(flops_per_product / lo.flops) / std::log(hi.flops / lo.flops);
  return lo.rate + t * (hi.rate - lo.rate);
}

absl::StatusOr<DeviceProfile> DeviceProfile::FromJson(const std::string& json) {
  auto j = nlohmann::json::parse(json, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return absl::InvalidArgumentError("device profile: not a JSON object");
  DeviceProfile p;
  try {
    p.name = j.at("name").get<std::string>();
    p.description = j.value("description", "");
    p.fp32_flops = j.at("fp32_flops").get<double>();
    p.bf16_flops = j.value("bf16_flops", p.fp32_flops);
    p.memory_bandwidth = j.at("memory_bandwidth").get<double>();
    p.kernel_overhead_seconds = j.value("kernel_overhead_seconds", 0.0);
    p.memory_bytes = j.at("memory_bytes").get<int64_t>();
    p.source = j.value("source", "measured");
    p.accelerator = j.value("accelerator", false);
    p.host_threads = j.value("host_threads", int64_t{0});
    p.vector_flops = j.value("vector_flops", 0.0);
    if (j.contains("op_rates")) {
      for (const auto& [op, rate] : j.at("op_rates").items()) p.op_rates[op] = rate.get<double>();
    }
    p.threads = j.value("threads", int64_t{0});
    p.measured_unix_seconds = j.value("measured_unix_seconds", 0.0);
    p.calibration_key = j.value("calibration_key", "");
    p.measured_busy = j.value("measured_busy", false);
    if (j.contains("matmul_rates")) {
      for (const auto& m : j.at("matmul_rates")) p.matmul_rates.push_back({m.at("flops").get<double>(), m.at("rate").get<double>()});
    }
    if (j.contains("host_collectives")) {
      for (const auto& c : j.at("host_collectives")) {
        p.host_collectives.push_back({c.at("ranks").get<int64_t>(), c.at("alpha").get<double>(), c.at("beta").get<double>(),
                                      c.value("compute_speed", 0.0), c.value("busy_alpha", 0.0)});
      }
    }
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("device profile: ", e.what()));
  }
  if (auto st = p.Validate(); !st.ok()) return st;
  return p;
}

namespace {
// The operator's profiles: written by AddOperatorProfiles at startup, read after; a deque so that
// pointers handed out stay valid.
std::deque<DeviceProfile>& OperatorProfiles() {
  static auto* profiles = new std::deque<DeviceProfile>();
  return *profiles;
}
}  // namespace

absl::Status AddOperatorProfiles(const std::string& dir) {
  std::error_code ec;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".json" && entry.is_regular_file()) files.push_back(entry.path());
  }
  if (ec) return absl::NotFoundError(absl::StrCat("--device-profile-dir ", dir, ": ", ec.message()));
  std::sort(files.begin(), files.end());
  for (const auto& file : files) {
    auto text = ReadFileToString(file.string());
    if (!text.ok()) return text.status();
    auto profile = DeviceProfile::FromJson(*text);
    if (!profile.ok()) return absl::InvalidArgumentError(absl::StrCat(file.string(), ": ", profile.status().message()));
    if (FindDeviceProfile(profile->name) != nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(file.string(), ": a device profile named '", profile->name,
                                                     "' is already known; give it a name of its own"));
    }
    OperatorProfiles().push_back(*std::move(profile));
  }
  return absl::OkStatus();
}

namespace {
// Registered measured profiles by name (RegisterMeasuredProfile); never dropped, so pointers into
// them stay valid.
struct MeasuredProfiles {
  absl::Mutex mu;
  std::map<std::string, std::unique_ptr<const DeviceProfile>> by_name ABSL_GUARDED_BY(mu);
};
MeasuredProfiles& Measured() {
  static auto* measured = new MeasuredProfiles();
  return *measured;
}

// FNV-1a of the profile's figures (its JSON without its name), as 8 hex digits.
std::string FiguresHash(DeviceProfile p) {
  p.name.clear();
  return absl::StrCat(absl::Hex(Fnv1a(p.ToJson()) & 0xFFFFFFFFull, absl::kZeroPad8));
}
}  // namespace

absl::StatusOr<std::string> RegisterMeasuredProfile(const DeviceProfile& profile) {
  if (auto st = profile.Validate(); !st.ok()) return st;
  std::string base;  // the profile's name, as letters, digits, '.', '_' and '-' only, at most 48
  for (char c : profile.name.substr(0, 48)) base += absl::ascii_isalnum(c) || c == '.' || c == '_' || c == '-' ? c : '_';
  const std::string name = absl::StrCat("measured-", base, "-", FiguresHash(profile));
  MeasuredProfiles& m = Measured();
  absl::MutexLock lock(&m.mu);
  if (m.by_name.count(name)) return name;
  if (m.by_name.size() >= static_cast<size_t>(kMaxMeasuredProfiles)) {
    return absl::ResourceExhaustedError(absl::StrCat("the coordinator keeps at most ", kMaxMeasuredProfiles,
                                                     " measured device profiles; restart it to forget those of workers gone"));
  }
  auto stored = std::make_unique<DeviceProfile>(profile);
  stored->name = name;
  m.by_name.emplace(name, std::move(stored));
  return name;
}

std::vector<DeviceProfile> KnownDeviceProfiles() {
  std::vector<DeviceProfile> all = DeviceCatalogue();
  all.insert(all.end(), OperatorProfiles().begin(), OperatorProfiles().end());
  return all;
}

const DeviceProfile* FindDeviceProfile(const std::string& name) {
  for (const auto& p : DeviceCatalogue()) {
    if (p.name == name) return &p;
  }
  for (const auto& p : OperatorProfiles()) {
    if (p.name == name) return &p;
  }
  MeasuredProfiles& m = Measured();
  absl::MutexLock lock(&m.mu);
  auto it = m.by_name.find(name);
  return it == m.by_name.end() ? nullptr : it->second.get();
}

absl::StatusOr<DeviceProfile> LoadDeviceProfile(const std::string& name_or_path) {
  if (const DeviceProfile* known = FindDeviceProfile(name_or_path)) return *known;
  if (name_or_path.find('/') != std::string::npos || name_or_path.find(".json") != std::string::npos) {
    auto text = ReadFileToString(name_or_path);
    if (!text.ok()) return text.status();
    auto p = DeviceProfile::FromJson(*text);
    if (!p.ok()) return absl::InvalidArgumentError(absl::StrCat("'", name_or_path, "': ", p.status().message()));
    return p;
  }
  std::vector<std::string> names;
  for (const auto& p : KnownDeviceProfiles()) names.push_back(p.name);
  return absl::InvalidArgumentError(absl::StrCat("unknown device type '", name_or_path, "': use one of ",
                                                 absl::StrJoin(names, ", "),
                                                 " or a JSON profile written by `mapctl calibrate`"));
}

std::string OpRateKey(const std::string& op, const google::protobuf::Map<std::string, v1::AttrValue>& attrs) {
  if (op == "gelu") {
    auto it = attrs.find("approximate");
    if (it != attrs.end() && it->second.s() == "tanh") return "gelu:tanh";
  }
  return op;
}

}  // namespace mapd

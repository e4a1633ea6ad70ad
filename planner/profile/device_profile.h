// Device profiles: how fast a device computes and moves memory, for the profiler's roofline
// time model (time of a kernel = max(FLOPs / peak rate, bytes / bandwidth) + launch overhead).
// A catalogue of common accelerators, plus profiles measured on the local machine by
// `mapctl calibrate` and saved as JSON.
#ifndef MAPD_PLANNER_PROFILE_DEVICE_PROFILE_H_
#define MAPD_PLANNER_PROFILE_DEVICE_PROFILE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "google/protobuf/map.h"
#include "proto/mapd/v1/graph.pb.h"

namespace mapd {

// A collective's cost among `ranks` processes of one host, measured (mapctl calibrate
// --collectives): an all-reduce of b bytes takes alpha + 2 (ranks − 1) / ranks · b · beta seconds
// (all-gather and reduce-scatter half the bytes' term), as the cluster's links model it.
// Beside them, how fast each of `ranks` processes computes while all of them do, relative to one
// process alone (measured with a small training step in each; 0: not measured — the cluster
// then assumes the share of the hardware threads a rank gets).
struct HostCollectives {
  int64_t ranks = 0;
  double alpha = 0;  // seconds an exchange, whatever its size (collectives.h: an all-reduce is two)
  double beta = 0;   // seconds a byte moved per rank
  double compute_speed = 0;  // a rank's compute rate with `ranks` computing at once / alone
  // Seconds an exchange costs among `ranks` that compute between collectives, as a training
  // step's ranks do: beside the latency `alpha` (measured back to back), the wait for a peer the
  // scheduler set aside or whose compute ran slower. 0: not measured (alpha is used).
  double busy_alpha = 0;
};

// The fp32 rate of square matrix products of one size (mapctl calibrate): small ones are
// dispatch- and cache-bound, far below the peak.
struct MatmulRate {
  double flops = 0;  // of one product, 2·n³
  double rate = 0;   // FLOP/s
};

struct DeviceProfile {
  std::string name;            // "h100-80g", or the name given at calibration
  std::string description;
  double fp32_flops = 0;       // dense FP32 matmul rate, FLOP/s (no TF32)
  double bf16_flops = 0;       // dense BF16 matmul rate, FLOP/s
  double memory_bandwidth = 0;  // bytes/s
  double kernel_overhead_seconds = 0;  // fixed cost per kernel launch / dispatch
  int64_t memory_bytes = 0;    // device memory capacity
  std::string source = "catalogue";  // "catalogue" or "measured"
  // A GPU-class accelerator (the catalogue's A100/H100/H200): its default precision is bf16
  // (what people train with there); the CPU's is fp32.
  bool accelerator = false;
  // Measured on this host (mapctl calibrate): its hardware threads, which ranks of one host share
  // (0: unknown), the threads the rates were measured with, and the collectives among its
  // processes by group size (empty: the cluster's catalogue links; cluster.h).
  int64_t host_threads = 0;
  int64_t threads = 0;  // LibTorch threads the rates were measured with (0: unknown)
  std::vector<HostCollectives> host_collectives;
  // Measured rates of square fp32 products by size, smallest first (empty: fp32_flops for all);
  // the profiler interpolates a product's rate by its FLOPs (log scale) and scales it by
  // bf16_flops / fp32_flops under bf16.
  std::vector<MatmulRate> matmul_rates;
  // Elementwise arithmetic's FLOP/s (OpCost::vector_arithmetic: activations, norms, softmax),
  // measured (mapctl calibrate); 0: the matmul peak, as catalogue profiles assume.
  double vector_flops = 0;
  // Ops whose kernels run far from their class's rate, by registry op name: their FLOP/s,
  // forward and backward together, measured (mapctl calibrate) on a [512, 512] fp32 input —
  // the loss's log_softmax backward takes ~10 ns an element here, 30x what the vector rate
  // would charge its FLOPs. The profiler charges such an op's FLOPs at its own rate; others at
  // their class's (products, vector, peak).
  // Keyed by OpRateKey: the op's name, with its variant where an attribute picks another kernel.
  std::map<std::string, double> op_rates;
  // When it was measured (seconds since the epoch; 0: not measured or not recorded) and under
  // which calibration key (the host and software it was measured on, calibration_cache.h; empty:
  // none): a worker measures again when its key changes.
  double measured_unix_seconds = 0;
  std::string calibration_key;
  // Measured while the host was busy (more other processes runnable than half its hardware
  // threads): its rates are low, and a quiet host measures again (calibration_cache.h).
  bool measured_busy = false;
  // The rate of a product of `flops_per_product` FLOPs (0: not a product: the peak), fp32.
  double Fp32Rate(double flops_per_product) const;

  absl::Status Validate() const;
  std::string ToJson() const;
  static absl::StatusOr<DeviceProfile> FromJson(const std::string& json);
};

// Seconds a kernel (or an op's kernels) takes on `device`: `flops` of arithmetic and `bytes` of
// memory traffic in `kernels` launches, at fp32 or bf16 (`bf16`). The rate: the op's own where the
// profile measured one (`op`, an OpRateKey, in op_rates; a variant's key falls back to its op's);
// else for a matrix product (`flops_per_product` > 0) the measured rate of products that size
// (matmul_rates, scaled by bf16_flops / fp32_flops under bf16), whose bytes are paid on top of
// its arithmetic — calibrate repeats one product on operands in cache, while a step's come from
// memory after other ops took the cache (1.14-1.28x the repeated time here); else for elementwise
// arithmetic (`vector`) the vector rate; else the peak, the bytes at the bandwidth when longer;
// and each launch's overhead. One model for the profiler and the planner's search: a plan is
// searched on the times its rank programs are then predicted with.
double KernelSeconds(const DeviceProfile& device, bool bf16, double flops, double bytes, int64_t kernels, double flops_per_product,
                     bool vector, const std::string& op);

// The op_rates key of an op with these attributes: its name, and "gelu:tanh" for GELU's tanh
// approximation — another kernel (tanh through Sleef: 4.4x erf GELU's time, forward and
// backward, on this project's CPU) under the same registry FLOPs.
std::string OpRateKey(const std::string& op, const google::protobuf::Map<std::string, v1::AttrValue>& attrs);

// The built-in catalogue: cpu, a100-40g, a100-80g, h100-80g, h200-141g.
const std::vector<DeviceProfile>& DeviceCatalogue();

// Profiles an operator adds to the catalogue (mapd --device-profile-dir): every *.json file in
// `dir` (as `mapctl calibrate` writes them), known by its `name`. Called once at startup, before
// any lookup; INVALID_ARGUMENT naming the file for one that does not parse or reuses a name.
absl::Status AddOperatorProfiles(const std::string& dir);
// Every profile a name may select: the catalogue's, then the operator's.
std::vector<DeviceProfile> KnownDeviceProfiles();
// The catalogue's, the operator's or a registered measured profile of that name — a name only, never a path (what a
// coordinator's client may select); nullptr for none.
const DeviceProfile* FindDeviceProfile(const std::string& name);

// Measured profiles the coordinator's workers sent (the most kept: kMaxMeasuredProfiles), known
// from then on by the name returned: "measured-<name>-<8 hex digits of its figures>" — the same
// profile registered twice gets the same name. Thread-safe; a profile is never dropped, so a
// pointer FindDeviceProfile returns stays valid. RESOURCE_EXHAUSTED past the cap, INVALID_ARGUMENT
// for a profile that does not validate.
inline constexpr int kMaxMeasuredProfiles = 1024;
absl::StatusOr<std::string> RegisterMeasuredProfile(const DeviceProfile& profile);

// A known profile's name, or a path to a JSON profile written by `mapctl calibrate`.
absl::StatusOr<DeviceProfile> LoadDeviceProfile(const std::string& name_or_path);

}  // namespace mapd

#endif  // MAPD_PLANNER_PROFILE_DEVICE_PROFILE_H_

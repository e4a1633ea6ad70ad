// Parameter, buffer and constant tensors of a graph.
//
// A zoo parameter has an InitRule: its tensor is drawn from a generator seeded with
// DeriveSeed(seed, parameter name), so it depends only on the run's seed and the name — the
// same global weights for every run and every plan, whatever order parameters are made in.
// An imported parameter has a DataRef: its bytes come from LoadParameterData (the TorchScript
// archive, or inline trace constants). Tied weights are one tensor reachable by every alias.
// Trainable parameters require grad.
#ifndef MAPD_WORKER_RUNTIME_PARAMETERS_H_
#define MAPD_WORKER_RUNTIME_PARAMETERS_H_

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "model/import/torchscript_importer.h"
#include "proto/mapd/v1/checkpoint.pb.h"
#include "proto/mapd/v1/graph.pb.h"

namespace mapd {

class ParameterStore {
 public:
  // Makes every parameter, buffer and constant of `graph` on `device`. INVALID_ARGUMENT for a
  // parameter with neither init rule nor data, or a bad rule; errors of LoadParameterData pass
  // through (NOT_FOUND for a missing archive, ...).
  static absl::StatusOr<ParameterStore> Create(const v1::Graph& graph, uint64_t seed, c10::Device device);

  // By name or alias; nullptr when unknown.
  const at::Tensor* Find(const std::string& name) const;
  at::Tensor* FindMutable(const std::string& name);
  // Canonical names (as in the graph, aliases excluded), in graph order.
  const std::vector<std::string>& names() const { return names_; }
  // Trainable parameters (canonical name, tensor), in graph order.
  std::vector<std::pair<std::string, at::Tensor>> Trainable() const;
  // Bytes of all tensors (tied ones once).
  int64_t NumBytes() const;

 private:
  std::vector<std::string> names_;
  std::vector<bool> trainable_;
  std::unordered_map<std::string, at::Tensor> tensors_;
  std::unordered_map<std::string, std::string> canonical_;  // alias -> name
};

// The tensor an init rule gives for `type`, on the CPU, from a generator seeded with
// `seed` (already derived for the parameter). Rules: ZEROS, ONES, NORMAL(mean, std),
// UNIFORM(low, high), KAIMING_UNIFORM(fan_in) = U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (PyTorch's
// nn.Linear/Conv default, a = sqrt(5)), ROPE_COS/ROPE_SIN([seq, head_dim], theta) as LLaMA's
// real-valued RoPE tables (cat(freqs, freqs)), CAUSAL_MASK (ones on and below the diagonal of
// the last two dims). Random draws are made in f32 and converted to the type's dtype.
absl::StatusOr<at::Tensor> InitTensor(const v1::InitRule& rule, const TensorType& type, uint64_t seed);

// One parameter's global tensor on the CPU, from its init rule (seeded with
// DeriveSeed(seed, name)) or its data; INVALID_ARGUMENT when it has neither.
absl::StatusOr<at::Tensor> MakeParameterTensor(const v1::Parameter& p, uint64_t seed);

// A tensor as proto bytes (row-major, little-endian: checkpoints, final parameters) and back
// (DATA_LOSS when the bytes do not fill the type).
v1::TensorData TensorToProto(const std::string& name, const at::Tensor& t);
absl::StatusOr<at::Tensor> TensorFromProto(const v1::TensorData& d);

// A CPU tensor holding `data` (row-major, little-endian).
absl::StatusOr<at::Tensor> TensorFromData(const TensorData& data);

}  // namespace mapd

#endif  // MAPD_WORKER_RUNTIME_PARAMETERS_H_

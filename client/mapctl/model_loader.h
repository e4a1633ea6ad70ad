// Resolves a MODEL argument to a verified graph: a zoo spec ("gpt2:layers=2"), a TorchScript
// archive (.pt, with input specs), or an IR file (.pb / .json).
#ifndef MAPD_CLIENT_MAPCTL_MODEL_LOADER_H_
#define MAPD_CLIENT_MAPCTL_MODEL_LOADER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/mapd/v1/graph.pb.h"

namespace mapd::cli {

absl::StatusOr<v1::Graph> LoadModel(const std::string& model, const std::vector<std::string>& input_specs);

// A training graph for `profile`, `plan` and `run`: `loss` (auto | output | cross_entropy | mse)
// is parsed, `batch_size`/`seq_len` (0 = the model's) are applied as zoo overrides — other
// models take their shapes from input specs — the model is loaded, and its loss appended, so
// output 0 is the scalar loss.
absl::StatusOr<v1::Graph> LoadTrainingGraph(const std::string& model, const std::vector<std::string>& input_specs,
                                            int64_t batch_size, int64_t seq_len, const std::string& loss);

// --init-from and the archives' parameter data: torch_commands.h.

}  // namespace mapd::cli

#endif  // MAPD_CLIENT_MAPCTL_MODEL_LOADER_H_

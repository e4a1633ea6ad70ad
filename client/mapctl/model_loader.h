// Resolves a MODEL argument to a verified graph: a zoo spec ("gpt2:layers=2"), a TorchScript
// archive (.pt, with input specs), or an IR file (.pb / .json).
#ifndef MAPD_CLIENT_MAPCTL_MODEL_LOADER_H_
#define MAPD_CLIENT_MAPCTL_MODEL_LOADER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/mapd/v1/graph.pb.h"

namespace mapd::cli {

absl::StatusOr<v1::Graph> LoadModel(const std::string& model, const std::vector<std::string>& input_specs);

}  // namespace mapd::cli

#endif  // MAPD_CLIENT_MAPCTL_MODEL_LOADER_H_

// TorchScript importer: a .pt archive (torch.jit.trace or torch.jit.script, train or eval
// mode) → MAP Graph IR.
//
// The forward method is inlined and interpreted abstractly: tensors become IR values with
// static types from the input specs, and every non-tensor computation (sizes, lists, integer
// arithmetic, branches and loops on known values) is evaluated at import time and folded into
// node attributes. aten ops map to registry ops; in-place updates of buffers (BatchNorm
// running statistics) become BufferUpdates. Parameters keep their module paths, tied weights
// become one parameter with aliases, and each parameter refers to its data in the archive.
//
// Unsupported ops are all reported at once, with counts, as INVALID_ARGUMENT; a corrupt
// archive or a bad input spec is INVALID_ARGUMENT too. LibTorch exceptions never escape.
#ifndef MAPD_PLANNER_IMPORT_TORCHSCRIPT_IMPORTER_H_
#define MAPD_PLANNER_IMPORT_TORCHSCRIPT_IMPORTER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "planner/import/input_spec.h"
#include "planner/ir/tensor_type.h"
#include "proto/mapd/v1/graph.pb.h"

namespace mapd {

struct ImportOptions {
  // Specs for the forward arguments, by name. When empty, the archive's mapd_inputs.json
  // is used; when both exist, these win.
  std::vector<InputSpec> inputs;
  // Graph name; defaults to the file name without extension.
  std::string name;
};

absl::StatusOr<v1::Graph> ImportTorchScript(const std::string& path, const ImportOptions& options);

// The data of an imported parameter, buffer or constant (row-major, little-endian).
struct TensorData {
  TensorType type;
  std::vector<uint8_t> bytes;
};

// Reads the data a parameter's DataRef points at (from the archive, or inline constants).
absl::StatusOr<TensorData> LoadParameterData(const v1::Parameter& param);

// The aten ops the importer maps to registry ops (sorted), e.g. "aten::linear". Non-tensor
// computation (integer arithmetic, list ops, ...) is folded and not listed.
std::vector<std::string> SupportedAtenOps();

// True when the path looks like a TorchScript archive (a .pt/.pth/.ts name or a zip file).
bool LooksLikeTorchScript(const std::string& path);

}  // namespace mapd

#endif  // MAPD_PLANNER_IMPORT_TORCHSCRIPT_IMPORTER_H_

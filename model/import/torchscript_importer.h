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
#ifndef MAPD_MODEL_IMPORT_TORCHSCRIPT_IMPORTER_H_
#define MAPD_MODEL_IMPORT_TORCHSCRIPT_IMPORTER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/import/input_spec.h"
#include "model/ir/tensor_type.h"
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

// Reads the data a parameter's DataRef points at (from the archive, or inline constants), in the
// dtype it is stored in (DataRef.stored_dtype when set). Without an ArchiveScope each call loads
// the archive afresh.
absl::StatusOr<TensorData> LoadParameterData(const v1::Parameter& param);

// While one lives (on this thread), LoadParameterData loads each TorchScript archive once and
// reads every parameter from that load; the archives are released with the scope. Loading an
// archive compiles the module's code: torchvision's ShuffleNetV2 took about a second a load, so a
// rank that loaded it once per parameter (170 of them) spent minutes before its first step and
// was stopped as hung. Whoever makes a model's parameters holds one (ParameterStore::Create,
// RankTrainer::Create). Scopes nest: an inner one shares the outer one's archives.
class ArchiveScope {
 public:
  ArchiveScope();
  ~ArchiveScope();
  ArchiveScope(const ArchiveScope&) = delete;
  ArchiveScope& operator=(const ArchiveScope&) = delete;

  struct Archives;  // the loaded modules, by path (torchscript_importer.cc)

 private:
  Archives* archives_;   // this scope's, or the outer scope's when nested
  bool owner_ = false;
};

// TorchScript archives loaded so far by this process (tests: ArchiveScope's reuse).
int64_t ArchiveLoads();

// The aten ops the importer maps to registry ops (sorted), e.g. "aten::linear". Non-tensor
// computation (integer arithmetic, list ops, ...) is folded and not listed.
std::vector<std::string> SupportedAtenOps();

// How the importer takes each ATen operator LibTorch has: by a hand-written handler (`entry`),
// or by the generic path, measured on meta tensors where the operator has a meta kernel and on
// small real CPU tensors where it has only a CPU one; `refused` says why the generic path cannot
// take it (no CPU kernel; writes into its arguments with no functional form). One row per
// operator name (its overloads together), sorted.
struct AtenOpPath {
  std::string op;        // "aten::cdist"
  bool entry = false;    // a hand-written handler maps it to a registry op
  bool meta = false;     // the generic path: meta kernels (else real CPU tensors)
  std::string refused;   // the generic path refuses it, and why ("" when it takes it)
};
std::vector<AtenOpPath> AtenOpPaths();

// True when the path looks like a TorchScript archive (a .pt/.pth/.ts name or a zip file).
bool LooksLikeTorchScript(const std::string& path);

}  // namespace mapd

#endif  // MAPD_MODEL_IMPORT_TORCHSCRIPT_IMPORTER_H_

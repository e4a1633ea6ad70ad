#include "client/mapctl/model_loader.h"

#include <sys/stat.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/graph/loss.h"
#include "model/graph/verifier.h"
#include "model/ir/serialize.h"
#include "model/zoo/zoo.h"
#include "client/mapctl/torch_commands.h"

namespace mapd::cli {

namespace {
bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}
bool IsIrPath(const std::string& path) {
  return absl::EndsWith(path, ".pb") || absl::EndsWith(path, ".binpb") || absl::EndsWith(path, ".json");
}
}  // namespace

absl::StatusOr<v1::Graph> LoadModel(const std::string& model, const std::vector<std::string>& input_specs) {
  if (model.empty()) return absl::InvalidArgumentError("no MODEL given");
  const bool exists = FileExists(model);
  if (!exists && IsZooModelSpec(model)) {
    if (!input_specs.empty()) {
      return absl::InvalidArgumentError(
          "--input applies to TorchScript models; set zoo model shapes with overrides, e.g. gpt2:batch=8,seq=512");
    }
    return BuildZooModel(model);
  }
  if (!exists) {
    return absl::NotFoundError(absl::StrCat("MODEL '", model,
                                            "' is neither a zoo model (see `mapctl models`) nor an existing file "
                                            "(.pt TorchScript archive, .pb or .json MAP graph)"));
  }
  if (IsIrPath(model)) {
    if (!input_specs.empty()) return absl::InvalidArgumentError("--input does not apply to an IR file, whose shapes are fixed");
    MAPD_ASSIGN_OR_RETURN(v1::Graph graph, ReadGraphFile(model));
    auto st = VerifyGraph(graph);
    if (!st.ok()) return absl::InvalidArgumentError(absl::StrCat("graph file '", model, "' is invalid: ", st.message()));
    return graph;
  }
  // Any other file: a TorchScript archive, imported with LibTorch (torch_commands.h).
  return ImportTorchScriptModel(model, input_specs);
}

absl::StatusOr<v1::Graph> LoadTrainingGraph(const std::string& model, const std::vector<std::string>& input_specs,
                                            int64_t batch_size, int64_t seq_len, const std::string& loss) {
  MAPD_ASSIGN_OR_RETURN(LossKind kind, ParseLossKind(loss));
  std::string spec = model;
  if (batch_size > 0 || seq_len > 0) {
    if (!IsZooModelSpec(model)) {
      return absl::InvalidArgumentError(
          "--batch-size and --seq-len apply to zoo models; give an imported model's shapes with --input");
    }
    std::string sep = spec.find(':') == std::string::npos ? ":" : ",";
    if (batch_size > 0) {
      absl::StrAppend(&spec, sep, "batch=", batch_size);
      sep = ",";
    }
    if (seq_len > 0) absl::StrAppend(&spec, sep, "seq=", seq_len);
  }
  MAPD_ASSIGN_OR_RETURN(v1::Graph graph, LoadModel(spec, input_specs));
  return WithTrainingLoss(std::move(graph), kind);
}

}  // namespace mapd::cli

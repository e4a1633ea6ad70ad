// mapctl export: a checkpoint's whole tensors as a PyTorch state dict (docs/runtime.md "Export").
#include <filesystem>
#include <iostream>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/mapctl/commands.h"
#include "client/mapctl/job_output.h"
#include "common/bytes.h"
#include "common/checkpoint/gather.h"
#include "model/ir/tensor_type.h"
#include "worker/runtime/state_dict_file.h"

namespace mapd::cli {

namespace {

bool IsJobId(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)); }) &&
         !std::filesystem::exists(s);
}

}  // namespace

int RunExport(const ExportArgs& args) {
  if (args.sources.empty()) return ReportError(absl::InvalidArgumentError("give the checkpoint directory (or one per worker)"));
  if (args.output.empty()) return ReportError(absl::InvalidArgumentError("give the file to write: -o weights.pt"));
  for (const std::string& s : args.sources) {
    if (IsJobId(s)) {
      return ReportError(absl::UnimplementedError(absl::StrCat(
          "exporting job ", s, " by its id through the coordinator is not built yet: give the checkpoint directory of each "
          "worker it ran on (WORK_DIR/job-", s, "/checkpoints, the worker's --work-dir)")));
    }
  }
  auto gathered = GatherCheckpoint(args.sources, args.step);
  if (!gathered.ok()) return ReportError(gathered.status());
  if (auto st = WriteStateDict(args.output, gathered->whole, args.optimizer_state); !st.ok()) return ReportError(st);
  int64_t tensors = 0, elements = 0, bytes = 0, aliases = 0;
  for (const v1::TensorData& d : gathered->whole.parameters()) {
    if (d.place().kind() == v1::Parameter::CONSTANT) continue;  // not written (WriteStateDict)
    ++tensors;
    elements += TensorType::FromProto(d.type()).NumElements();
    bytes += static_cast<int64_t>(d.data().size());
    aliases += d.place().aliases_size();
  }
  const v1::CheckpointMeta& meta = gathered->meta;
  if (IsDocumentFormat(args.format)) {
    nlohmann::json j = {{"output", args.output}, {"step", meta.step()}, {"ranks", meta.ranks()}, {"plan", meta.plan()},
                        {"tensors", tensors}, {"aliases", aliases}, {"elements", elements},
                        {"bytes", bytes}, {"optimizer_state", args.optimizer_state}};
    PrintDocument(args.format, j);
  } else {
    std::cout << absl::StrFormat("wrote %s: step %d of %d rank(s) (%s): %d tensors%s, %d elements, %s%s\n", args.output, meta.step(),
                                 meta.ranks(), meta.plan(), tensors,
                                 aliases > 0 ? absl::StrCat(" (and ", aliases, " tied name(s))") : "", elements, FormatBytes(bytes),
                                 args.optimizer_state ? ", with the optimizer's state" : "");
  }
  return kExitOk;
}

}  // namespace mapd::cli

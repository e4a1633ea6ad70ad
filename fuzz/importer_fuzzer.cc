// libFuzzer harness: the TorchScript importer under hostile input specs. An input picks one of
// the archives tests/import/models/make_models.py traces (its first byte; scripts/fuzz.sh points
// MAPD_FUZZ_ARCHIVES at them) and gives the forward's inputs, one "name:dtype[dims]" per line —
// what `mapctl import --input` and an archive's mapd_inputs.json say. The importer interprets
// the model's code over those shapes (every aten handler, constant folding, control flow on
// sizes); it must answer with a Status whatever they are: no crash, no sanitizer report.
//
// The archive's own bytes are not mutated: they are LibTorch's to parse, and mutating them finds
// LibTorch's bugs, not MAP's — a segfault inside LibTorch 1.13's TorchScript type parser
// (torch::jit::load) within a minute, which no in-process caller can catch. MAP's daemons never
// load a client's archive: graphs cross the wire, and a graph parameter naming a file is refused.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "fuzz/fuzz_seeds.h"
#include "model/import/input_spec.h"
#include "model/import/torchscript_importer.h"

namespace {

std::vector<std::string>& Archives() {
  static auto* archives = new std::vector<std::string>();
  return *archives;
}

// One seed per archive: its index, then the inputs it was traced with.
std::vector<std::string> ArchiveSeeds() {
  std::vector<std::string> seeds;
  for (size_t i = 0; i < Archives().size(); ++i) {
    std::vector<std::string> lines;
    auto graph = mapd::ImportTorchScript(Archives()[i], {});
    if (graph.ok()) {
      for (const auto& input : graph->inputs()) {
        auto spec = mapd::ParseInputSpec(input.name() + ":f32[1]");  // the name; the type below
        if (!spec.ok()) continue;
        spec->type = mapd::TensorType::FromProto(input.type());
        lines.push_back(spec->ToString());
      }
    }
    if (lines.empty()) lines.push_back("x:f32[2,4]");
    seeds.push_back(std::string(1, static_cast<char>(i)) + absl::StrJoin(lines, "\n"));
  }
  return seeds;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* dir = std::getenv("MAPD_FUZZ_ARCHIVES");
  std::error_code ec;
  if (dir != nullptr) {
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
      if (e.path().extension() == ".pt") Archives().push_back(e.path().string());
    }
  }
  std::sort(Archives().begin(), Archives().end());
  if (Archives().empty() || Archives().size() > 256) {
    std::fprintf(stderr, "importer_fuzzer: set MAPD_FUZZ_ARCHIVES to a directory of 1 to 256 TorchScript archives "
                         "(tests/import/models/make_models.py DIR makes them)\n");
    std::exit(2);
  }
  mapd::fuzz::WriteSeedsIfAsked(ArchiveSeeds);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string& archive = Archives()[data[0] % Archives().size()];
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  (void)mapd::ParseInputSpecsJson(text);  // the archive's mapd_inputs.json form, on the same bytes
  mapd::ImportOptions options;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    auto spec = mapd::ParseInputSpec(std::string(line));
    if (!spec.ok()) return 0;
    options.inputs.push_back(*std::move(spec));
  }
  (void)mapd::ImportTorchScript(archive, options);
  return 0;
}

// The zoo table and spec dispatch. Families own their entries (gpt.cc, llama.cc, ...); this
// file only gathers them and turns a spec into a build call.
#include "model/zoo/zoo.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "model/graph/builder.h"
#include "model/zoo/family.h"
#include "model/zoo/model_spec.h"

namespace mapd {
namespace {

const std::vector<ZooEntry>& Table() {
  static const std::vector<ZooEntry>* table = [] {
    auto* t = new std::vector<ZooEntry>();
    for (auto family : {GptModels, LlamaModels, BertModels, VitModels, ResnetModels, MlpModels}) {
      for (auto& e : family()) t->push_back(std::move(e));
    }
    return t;
  }();
  return *table;
}

const ZooEntry* FindEntry(absl::string_view name) {
  for (const auto& e : Table()) {
    if (e.info.name == name) return &e;
  }
  return nullptr;
}

std::vector<std::string> ModelNames() {
  std::vector<std::string> names;
  for (const auto& e : Table()) names.push_back(e.info.name);
  return names;
}

// Every error names the spec so that a CLI or job log needs no extra context.
absl::Status InSpec(const std::string& spec, const absl::Status& st) {
  return absl::Status(st.code(), absl::StrCat("zoo spec '", spec, "': ", st.message()));
}

}  // namespace

std::vector<ZooModelInfo> ListZooModels() {
  std::vector<ZooModelInfo> out;
  for (const auto& e : Table()) out.push_back(e.info);
  return out;
}

bool IsZooModelSpec(const std::string& spec) {
  return FindEntry(absl::StripAsciiWhitespace(absl::string_view(spec).substr(0, spec.find(':')))) != nullptr;
}

absl::StatusOr<v1::Graph> BuildZooModel(const std::string& spec) {
  auto parsed = ParseModelSpec(spec);
  if (!parsed.ok()) return parsed.status();
  const ZooEntry* entry = FindEntry(parsed->name);
  if (entry == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("unknown zoo model '", parsed->name,
                                                   "'; known models: ", absl::StrJoin(ModelNames(), ", ")));
  }
  auto options = ModelOptions::Make(entry->info.options, parsed->overrides);
  if (!options.ok()) return InSpec(spec, options.status());

  GraphBuilder b(spec);
  b.SetMetadata("source", "zoo");
  b.SetMetadata("zoo_spec", spec);
  b.SetMetadata("family", entry->info.family);
  b.SetMetadata("mode", "train");
  if (absl::Status st = entry->build(*options, b); !st.ok()) return InSpec(spec, st);
  auto graph = b.Build();
  if (!graph.ok()) return InSpec(spec, graph.status());
  return graph;
}

}  // namespace mapd

// `mapctl models` and `mapctl ops`: what MAP knows about.
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/mapctl/command_table.h"
#include "client/mapctl/job_output.h"
#include "client/mapctl/commands.h"
#include "client/mapctl/table.h"
#include "common/bytes.h"
#include "client/mapctl/torch_commands.h"
#include "model/ops/registry.h"
#include "model/zoo/zoo.h"
#include "worker/device/device_info.h"

namespace mapd::cli {

int RunModels(const std::string& format) {
  const auto models = ListZooModels();
  if (IsDocumentFormat(format)) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& m : models) {
      nlohmann::json opts = nlohmann::json::object();
      for (const auto& o : m.options) opts[o.key] = {{"default", o.default_value}, {"doc", o.doc}};
      out.push_back({{"name", m.name}, {"family", m.family}, {"description", m.description},
                     {"published_params", m.published_params}, {"options", opts}});
    }
    PrintDocument(format, out);
    return kExitOk;
  }
  Table t({"NAME", "FAMILY", "PARAMS", "OPTIONS", "DESCRIPTION"});
  for (const auto& m : models) {
    std::vector<std::string> keys;
    for (const auto& o : m.options) keys.push_back(o.key + "=" + o.default_value);
    t.Row({m.name, m.family, m.published_params > 0 ? HumanCount(m.published_params) : "-",
           absl::StrJoin(keys, ","), m.description});
  }
  t.Print(std::cout);
  std::cout << "\nOverride options as NAME:key=value,...  e.g. gpt2:layers=2,hidden=128,heads=4,vocab=512,seq=64\n";
  return kExitOk;
}

int RunOps(const std::string& format, bool aten) {
  if (aten) {
    auto rows = AtenOpPathList();
    if (!rows.ok()) return ReportError(rows.status());
    auto path = [](const AtenOpPath& r) -> std::string {
      if (r.entry) return "entry";
      return r.refused.empty() ? "generic" : "refused";
    };
    if (IsDocumentFormat(format)) {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& r : *rows) {
        nlohmann::json j = {{"op", r.op}, {"path", path(r)}};
        if (!r.entry && r.refused.empty()) j["measured_on"] = r.meta ? "meta" : "cpu";
        if (!r.refused.empty() && !r.entry) j["why"] = r.refused;
        out.push_back(std::move(j));
      }
      PrintDocument(format, out);
      return kExitOk;
    }
    Table t({"OP", "PATH", "DETAIL"});
    int entries = 0, generic = 0, refused = 0;
    for (const auto& r : *rows) {
      const std::string p = path(r);
      entries += p == "entry";
      generic += p == "generic";
      refused += p == "refused";
      t.Row({r.op, p, p == "entry"     ? "a hand-written registry entry (exact)"
                      : p == "generic" ? (r.meta ? "measured on meta tensors" : "measured on small CPU tensors (no meta kernel)")
                                       : r.refused});
    }
    t.Print(std::cout);
    std::cout << "\n" << entries << " by hand-written entries, " << generic << " by the generic ATen path, " << refused
              << " refused (docs/importer.md, \"The generic ATen path\")\n";
    return kExitOk;
  }
  const OpRegistry& reg = OpRegistry::Global();
  auto describe_inputs = [](const OpDef& d) {
    std::vector<std::string> names;
    for (const auto& in : d.inputs) names.push_back(in.optional ? in.name + "?" : in.name);
    if (d.variadic && !names.empty()) names.back() += "...";
    return names;
  };
  if (IsDocumentFormat(format)) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& name : reg.Names()) {
      const OpDef* d = reg.Find(name);
      std::vector<std::string> attrs;
      for (const auto& a : d->attrs) attrs.push_back(a.required ? a.name : a.name + "?");
      out.push_back({{"name", name}, {"summary", d->summary}, {"inputs", describe_inputs(*d)}, {"attrs", attrs}});
    }
    PrintDocument(format, out);
    return kExitOk;
  }
  Table t({"OP", "INPUTS", "ATTRIBUTES", "SUMMARY"});
  for (const auto& name : reg.Names()) {
    const OpDef* d = reg.Find(name);
    std::vector<std::string> attrs;
    for (const auto& a : d->attrs) attrs.push_back(a.required ? a.name : a.name + "?");
    t.Row({name, absl::StrJoin(describe_inputs(*d), ","), absl::StrJoin(attrs, ","), d->summary});
  }
  t.Print(std::cout);
  return kExitOk;
}

int RunDevices(const std::string& format) {
  auto inv = QueryCuda();
  if (IsDocumentFormat(format)) {
    nlohmann::json out;
    out["built_with_cuda"] = BuiltWithCuda();
    if (!inv.ok()) {
      out["error"] = std::string(inv.status().message());
    } else {
      out["cuda_runtime_version"] = inv->runtime_version;
      out["nccl_version"] = inv->nccl_version;
      out["note"] = inv->note;
      out["devices"] = nlohmann::json::array();
      for (const auto& d : inv->devices) {
        out["devices"].push_back({{"index", d.index}, {"name", d.name}, {"total_memory_bytes", d.total_memory_bytes},
                                  {"compute_capability", absl::StrCat(d.compute_major, ".", d.compute_minor)}});
      }
    }
    PrintDocument(format, out);
    return kExitOk;
  }
  std::cout << "CUDA/NCCL support: " << (BuiltWithCuda() ? "built" : "not built") << "\n";
  if (!inv.ok()) {
    std::cout << inv.status().message() << "\n";
    return kExitOk;
  }
  std::cout << "CUDA runtime: " << inv->runtime_version / 1000 << "." << (inv->runtime_version % 1000) / 10
            << ", NCCL: " << inv->nccl_version << "\n";
  if (inv->devices.empty()) {
    std::cout << "GPUs: none (" << inv->note << ")\n";
    return kExitOk;
  }
  Table t({"INDEX", "NAME", "MEMORY", "COMPUTE"});
  for (const auto& d : inv->devices) {
    t.Row({absl::StrCat(d.index), d.name, FormatBytes(d.total_memory_bytes), absl::StrCat(d.compute_major, ".", d.compute_minor)});
  }
  t.Print(std::cout);
  return kExitOk;
}

void AddCatalogCommands(CLI::App& app, Commands& out) {
  auto format = std::make_shared<std::string>("table");
  auto aten = std::make_shared<bool>(false);
  auto add_format = [format](CLI::App* cmd) {
    cmd->add_option("-o,--output", *format, "Output format")->check(CLI::IsMember({"table", "json", "yaml"}))->capture_default_str();
  };
  CLI::App* models = app.add_subcommand("models", "List the model zoo and each model's options");
  add_format(models);

  CLI::App* ops = app.add_subcommand("ops", "List the operators MAP understands (the op registry)");
  add_format(ops);
  ops->add_flag("--aten", *aten, "List the PyTorch aten ops the TorchScript importer maps instead");

  CLI::App* devices = app.add_subcommand("devices", "Show whether CUDA/NCCL support is built and which GPUs are visible");
  add_format(devices);

  out.push_back({models, [format] { return RunModels(*format); }});
  out.push_back({ops, [format, aten] { return RunOps(*format, *aten); }});
  out.push_back({devices, [format] { return RunDevices(*format); }});
}

}  // namespace mapd::cli

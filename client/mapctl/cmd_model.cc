// `mapctl inspect` (what a model is) and `mapctl import` (save a model as a MAP graph file).
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/mapctl/command_table.h"
#include "client/mapctl/job_output.h"
#include "client/mapctl/commands.h"
#include "client/mapctl/model_loader.h"
#include "client/mapctl/table.h"
#include "common/bytes.h"
#include "model/graph/verifier.h"
#include "model/ir/dump.h"
#include "model/ir/graph.h"
#include "model/ir/serialize.h"

namespace mapd::cli {

int ReportError(const absl::Status& status) {
  std::cerr << "error: " << status.message() << " [" << absl::StatusCodeToString(status.code()) << "]\n";
  return kExitFailed;
}

namespace {


nlohmann::json TypeJson(const v1::TensorType& t) {
  return {{"dtype", DTypeShortName(t.dtype())}, {"shape", std::vector<int64_t>(t.shape().begin(), t.shape().end())}};
}

struct Summary {
  int64_t trainable = 0;
  int64_t trainable_bytes = 0;
  int64_t buffer_elems = 0;
  int num_buffers = 0;
  int num_params = 0;
  int num_tied = 0;
};

Summary Summarise(const v1::Graph& g) {
  Summary s;
  for (const auto& p : g.parameters()) {
    const TensorType t = TensorType::FromProto(p.type());
    if (p.trainable()) {
      s.trainable += t.NumElements();
      s.trainable_bytes += t.NumBytes();
    }
    if (p.kind() == v1::Parameter::PARAMETER) ++s.num_params;
    else {
      ++s.num_buffers;
      s.buffer_elems += t.NumElements();
    }
    s.num_tied += p.aliases_size();
  }
  return s;
}

}  // namespace

int RunInspect(const ModelArgs& args, const std::string& format, bool text) {
  auto proto = LoadModel(args.model, args.inputs);
  if (!proto.ok()) return ReportError(proto.status());
  auto graph = Graph::Create(*proto);
  if (!graph.ok()) return ReportError(graph.status());
  const v1::Graph& g = graph->proto();
  if (text) {
    std::cout << DumpGraphText(g);
    return kExitOk;
  }
  const Summary s = Summarise(g);
  const auto ops = graph->OpCounts();

  if (IsDocumentFormat(format)) {
    nlohmann::json out;
    out["name"] = g.name();
    out["metadata"] = nlohmann::json::object();
    for (const auto& kv : g.metadata()) out["metadata"][kv.first] = kv.second;
    out["num_nodes"] = g.nodes_size();
    out["num_parameters"] = s.trainable;
    out["parameter_bytes"] = s.trainable_bytes;
    out["num_parameter_tensors"] = s.num_params;
    out["num_buffers"] = s.num_buffers;
    out["num_tied"] = s.num_tied;
    out["inputs"] = nlohmann::json::array();
    for (const auto& in : g.inputs()) {
      auto j = TypeJson(in.type());
      j["name"] = in.name();
      j["role"] = in.role();
      out["inputs"].push_back(j);
    }
    out["outputs"] = nlohmann::json::array();
    for (const auto& o : g.outputs()) {
      auto j = TypeJson(graph->TypeOf(o).ToProto());
      j["name"] = o;
      out["outputs"].push_back(j);
    }
    out["ops"] = nlohmann::json::object();
    for (const auto& [op, n] : ops) out["ops"][op] = n;
    out["parameters"] = nlohmann::json::array();
    for (const auto& p : g.parameters()) {
      auto j = TypeJson(p.type());
      j["name"] = p.name();
      j["kind"] = ParameterKindName(p.kind());
      j["trainable"] = p.trainable();
      j["aliases"] = std::vector<std::string>(p.aliases().begin(), p.aliases().end());
      out["parameters"].push_back(j);
    }
    out["buffer_updates"] = nlohmann::json::array();
    for (const auto& u : g.buffer_updates()) out["buffer_updates"].push_back({{"buffer", u.buffer()}, {"value", u.value()}});
    PrintDocument(format, out);
    return kExitOk;
  }

  std::cout << "Model:       " << g.name() << "\n";
  auto src = g.metadata().find("source");
  if (src != g.metadata().end()) std::cout << "Source:      " << src->second << "\n";
  auto mode = g.metadata().find("mode");
  if (mode != g.metadata().end()) std::cout << "Mode:        " << mode->second << "\n";
  std::cout << "Parameters:  " << s.trainable << " (" << HumanCount(s.trainable) << ", "
            << FormatBytes(s.trainable_bytes) << ") in " << s.num_params << " tensors";
  if (s.num_tied > 0) std::cout << ", " << s.num_tied << " tied";
  std::cout << "\n";
  std::cout << "Buffers:     " << s.num_buffers << " (" << s.buffer_elems << " elements)\n";
  std::cout << "Nodes:       " << g.nodes_size() << "\n\n";
  Table io({"", "NAME", "TYPE", "ROLE"});
  for (const auto& in : g.inputs()) io.Row({"input", in.name(), TensorType::FromProto(in.type()).ToString(), in.role()});
  for (const auto& o : g.outputs()) io.Row({"output", o, graph->TypeOf(o).ToString(), ""});
  io.Print(std::cout);
  std::cout << "\n";
  Table t({"OP", "COUNT"});
  for (const auto& [op, n] : ops) t.Row({op, absl::StrCat(n)});
  t.Print(std::cout);
  std::cout << "\n";
  Table pt({"PARAMETER", "TYPE", "KIND"});
  const int limit = 12;
  int shown = 0;
  for (const auto& p : g.parameters()) {
    if (shown++ == limit) break;
    std::string kind = ParameterKindName(p.kind());
    if (p.aliases_size() > 0) kind += " (tied: " + absl::StrJoin(p.aliases(), ",") + ")";
    pt.Row({p.name(), TensorType::FromProto(p.type()).ToString(), kind});
  }
  pt.Print(std::cout);
  if (g.parameters_size() > limit) {
    std::cout << "... " << g.parameters_size() - limit << " more (see -o json)\n";
  }
  if (g.buffer_updates_size() > 0) {
    std::cout << "\nBuffer updates per step: " << g.buffer_updates_size() << "\n";
  }
  return kExitOk;
}

int RunImport(const ModelArgs& args, const std::string& output_path) {
  if (output_path.empty()) return ReportError(absl::InvalidArgumentError("give the output file with -o FILE (.pb or .json)"));
  if (auto f = GraphFormatFromPath(output_path); !f.ok()) return ReportError(f.status());
  auto graph = LoadModel(args.model, args.inputs);
  if (!graph.ok()) return ReportError(graph.status());
  if (auto st = WriteGraphFile(*graph, output_path); !st.ok()) return ReportError(st);
  int64_t params = 0;
  for (const auto& p : graph->parameters()) {
    if (p.trainable()) params += TensorType::FromProto(p.type()).NumElements();
  }
  std::cout << "wrote " << output_path << ": " << graph->nodes_size() << " nodes, " << params << " parameters\n";
  return kExitOk;
}

void AddModelCommands(CLI::App& app, Commands& out) {
  auto args = std::make_shared<ModelArgs>();
  auto format = std::make_shared<std::string>("table");
  auto text = std::make_shared<bool>(false);
  auto import_out = std::make_shared<std::string>();
  CLI::App* inspect = app.add_subcommand("inspect", "Describe a model: nodes by op, parameters, inputs and outputs");
  inspect->add_option("MODEL", args->model, "Zoo spec, .pt archive or .pb/.json graph")->required();
  inspect->add_option("--input", args->inputs,
                      "Input spec of a TorchScript model, NAME:DTYPE[D0,D1,...] (repeatable), e.g. idx:i64[8,1024]");
  inspect->add_option("-o,--output", *format, "Output format")->check(CLI::IsMember({"table", "json", "yaml"}))->capture_default_str();
  inspect->add_flag("--text", *text, "Print the whole graph in MAP's text form instead");
  inspect->footer(kModelHelp);

  CLI::App* import = app.add_subcommand("import", "Convert a model (usually a TorchScript .pt) into a MAP graph file");
  import->add_option("MODEL", args->model, "TorchScript archive (or zoo spec / graph file)")->required();
  import->add_option("--input", args->inputs, "Input spec NAME:DTYPE[D0,D1,...] (repeatable)");
  import->add_option("-o,--output", *import_out, "Output file: .pb (binary) or .json")->required();
  import->footer(kModelHelp);

  out.push_back({inspect, [args, format, text] { return RunInspect(*args, *format, *text); }});
  out.push_back({import, [args, import_out] { return RunImport(*args, *import_out); }});
}

}  // namespace mapd::cli

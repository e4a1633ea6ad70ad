// `mapctl plan` (first cut): pick a sharding strategy per node for a device mesh with the
// strategy ILP (repeated layers share decisions), and report predicted step time and memory per
// device. Baselines, mesh search and the HTML report are not built yet (docs/planner.md).
#include <iostream>
#include <map>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/mapctl/commands.h"
#include "client/mapctl/model_loader.h"
#include "client/mapctl/table.h"
#include "planner/ir/graph.h"
#include "planner/ir/serialize.h"
#include "planner/plan/cost_graph.h"
#include "planner/profile/timeline_svg.h"
#include "planner/solver/strategy_solver.h"

namespace mapd::cli {

namespace {

// Words people use for a linear layer's split, from its weight's placement.
std::string DescribeLinear(const Strategy& s) {
  if (s.inputs.size() < 2) return s.ToString();
  std::vector<std::string> parts;
  for (size_t a = 0; a < s.inputs[1].size(); ++a) {
    const AxisPlacement& w = s.inputs[1][a];
    const AxisPlacement& x = s.inputs[0][a];
    if (w.kind == AxisPlacement::Kind::kShard && w.dim == 0) parts.push_back(absl::StrCat("column-parallel over axis ", a));
    else if (w.kind == AxisPlacement::Kind::kShard) parts.push_back(absl::StrCat("row-parallel over axis ", a));
    else if (x.kind == AxisPlacement::Kind::kShard && x.dim == 0) parts.push_back(absl::StrCat("batch split over axis ", a));
    else if (x.kind == AxisPlacement::Kind::kShard) parts.push_back(absl::StrCat("sequence split over axis ", a));
  }
  return parts.empty() ? "replicated" : absl::StrJoin(parts, ", ");
}

}  // namespace

int RunPlan(const PlanArgs& args) {
  ClusterOptions co;
  co.devices = args.devices;
  if (!args.mesh.empty()) {
    auto mesh = ParseMesh(args.mesh);
    if (!mesh.ok()) return ReportError(mesh.status());
    co.mesh = *mesh;
  }
  co.device_type = args.device_type;
  co.gpus_per_node = args.gpus_per_node;
  if (!args.memory_per_device.empty()) {
    auto bytes = ParseBytes(args.memory_per_device);
    if (!bytes.ok()) return ReportError(bytes.status());
    co.memory_per_device = *bytes;
  }
  auto cluster = MakeCluster(co);
  if (!cluster.ok()) return ReportError(cluster.status());
  ProfileOptions po;
  auto opt = ParseOptimizer(args.optimizer);
  if (!opt.ok()) return ReportError(opt.status());
  po.optimizer = *opt;
  po.device = cluster->device;

  auto trainable = LoadTrainingGraph(args.model.model, args.model.inputs, args.batch_size, args.seq_len, args.loss);
  if (!trainable.ok()) return ReportError(trainable.status());
  auto graph = Graph::Create(*std::move(trainable));
  if (!graph.ok()) return ReportError(graph.status());

  auto cg = BuildCostGraph(*graph, *cluster, po);
  if (!cg.ok()) return ReportError(cg.status());
  cg->request.set_time_limit_seconds(args.time_limit);
  FoldedCostGraph folded = FoldRepeatedLayers(*graph, *cg);
  if (!args.dump_request.empty()) {
    if (auto st = WriteStringToFileAtomic(args.dump_request, folded.request.SerializeAsString()); !st.ok()) {
      return ReportError(st);
    }
  }
  auto resp = SolveStrategies(folded.request);
  if (!resp.ok()) return ReportError(resp.status());
  // One choice per graph node, from the folded decisions.
  const std::vector<int> choice = folded.Expand(std::vector<int>(resp->choice().begin(), resp->choice().end()));
  if (resp->status() == v1::SolverResponse::INFEASIBLE) {
    return ReportError(absl::FailedPreconditionError(absl::StrCat(
        "no plan fits ", FormatBytes(cluster->memory_per_device), " per device: ", resp->message(),
        "; the least memory found is ", FormatBytes(static_cast<int64_t>(resp->memory())), " per device")));
  }

  if (args.format == "json") {
    nlohmann::json j;
    j["model"] = graph->name();
    j["mesh"] = cluster->mesh;
    j["device"] = cluster->device.name;
    j["predicted_step_seconds"] = resp->objective();
    j["predicted_peak_bytes"] = static_cast<int64_t>(resp->memory());
    j["memory_per_device"] = cluster->memory_per_device;
    j["solve_seconds"] = resp->solve_seconds();
    j["solver_status"] = v1::SolverResponse::Status_Name(resp->status());
    j["decisions"] = folded.request.nodes_size();
    j["baselines"] = nlohmann::json::array();  // not built yet (docs/planner.md)
    j["nodes"] = nlohmann::json::array();
    for (int n = 0; n < graph->num_nodes(); ++n) {
      const Strategy& s = cg->strategies[n][choice[n]];
      j["nodes"].push_back({{"node", graph->node(n).name()}, {"op", graph->node(n).op()}, {"strategy", s.ToString()},
                            {"placements", s.PlacementsString()}});
    }
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  Table t({"NODE", "OP", "STRATEGY"});
  for (int n = 0; n < graph->num_nodes(); ++n) {
    const auto& node = graph->node(n);
    const std::string& op = node.op();
    if (op != "linear" && op != "matmul" && op != "embedding" && op != "conv2d" && op != "scaled_dot_product_attention") continue;
    const Strategy& s = cg->strategies[n][choice[n]];
    t.Row({node.name(), op, op == "linear" ? DescribeLinear(s) : absl::StrCat(s.ToString(), "  ", s.PlacementsString())});
  }
  t.Print(std::cout);
  std::cout << "\nMesh:         " << cluster->MeshString() << " " << cluster->device.name << " ("
            << FormatBytes(cluster->memory_per_device) << " per device)\n"
            << absl::StrFormat("Step time:    %.3f ms predicted\n", resp->objective() * 1e3)
            << "Memory:       " << FormatBytes(static_cast<int64_t>(resp->memory())) << " per device predicted\n"
            << absl::StrFormat("Solved in:    %.3f s (%s; %d decisions for %d operators, repeated layers shared)\n",
                               resp->solve_seconds(), v1::SolverResponse::Status_Name(resp->status()),
                               folded.request.nodes_size(), graph->num_nodes())
            << "Note:         first cut — no baselines or mesh search yet (docs/planner.md)\n";
  return kExitOk;
}

}  // namespace mapd::cli

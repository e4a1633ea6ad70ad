#include "planner/plan/prepared_graph.h"

#include <map>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "planner/plan/stages.h"
#include "planner/profile/device_profile.h"

namespace mapd {

namespace {

std::string AttrSignature(const AttrMap& attrs) {
  std::map<std::string, std::string> sorted;
  for (const auto& [k, v] : attrs) sorted[k] = v.SerializeAsString();
  std::string s;
  for (const auto& [k, v] : sorted) absl::StrAppend(&s, k, "=", v.size(), ":", v, ";");
  return s;
}

}  // namespace

absl::StatusOr<std::vector<std::unique_ptr<PreparedNode>>> PrepareNodes(const Graph& graph) {
  const OpRegistry& reg = OpRegistry::Global();
  const v1::Graph& p = graph.proto();
  std::unordered_map<std::string, bool> rg;  // value → needs a gradient
  for (const auto& par : p.parameters()) rg[par.name()] = par.trainable();
  // A pipeline stage's input sent by the stage before needs its gradient sent back (stages.h).
  for (const auto& in : p.inputs()) rg[in.name()] = in.role() == kActivationRole;
  std::unordered_set<std::string> params_counted;
  // Storage of every value (a view's is its base's) and the storages already saved: a tensor
  // saved by several nodes, or several views of one storage, is held once (as the profiler's
  // memory ledger counts it).
  std::unordered_map<std::string, std::string> storage_of;
  std::unordered_set<std::string> storage_saved;
  auto storage = [&](const std::string& value) {
    auto it = storage_of.find(value);
    return it == storage_of.end() ? value : it->second;
  };
  auto charge = [&](const std::string& value) {
    const std::string root = storage(value);
    if (!storage_saved.insert(root).second) return 0.0;
    const double own = static_cast<double>(graph.TypeOf(value).NumBytes());
    return own > 0 ? static_cast<double>(graph.TypeOf(root).NumBytes()) / own : 1.0;
  };
  std::vector<std::unique_ptr<PreparedNode>> nodes;
  nodes.reserve(p.nodes_size());
  for (const v1::Node& node : p.nodes()) {
    auto pn = std::make_unique<PreparedNode>();
    pn->def = reg.Find(node.op());
    if (pn->def == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("node '", node.name(), "': unknown op '", node.op(),
                                                     "' (see `mapctl ops`)"));
    }
    pn->signature = absl::StrCat(node.op(), "|", AttrSignature(node.attrs()));
    for (const auto& in : node.inputs()) {
      pn->in.push_back(in.empty() ? TensorType() : graph.TypeOf(in));
      pn->rg.push_back(!in.empty() && rg[in]);
      pn->contig.push_back(true);
      const v1::Parameter* par = in.empty() ? nullptr : graph.FindParameter(in);
      ParamRole role = ParamRole::kNone;
      if (par != nullptr) {
        const bool first = params_counted.insert(par->name()).second;
        if (!par->trainable()) role = first ? ParamRole::kFrozen : ParamRole::kFrozenCountedBefore;
        else role = first ? ParamRole::kTrainable : ParamRole::kCountedBefore;
      }
      pn->role.push_back(role);
      absl::StrAppend(&pn->signature, "|", in.empty() ? "_" : pn->in.back().ToString(), pn->rg.back() ? "g" : "",
                      static_cast<int>(role));
    }
    for (size_t i = 0; i < pn->in.size(); ++i) pn->in_ptrs.push_back(node.inputs(i).empty() ? nullptr : &pn->in[i]);
    for (const auto& o : node.outputs()) pn->out.push_back(graph.TypeOf(o));
    pn->octx = std::make_unique<OpContext>(node.name(), node.op(), pn->in_ptrs, node.attrs());
    pn->rate_key = OpRateKey(node.op(), node.attrs());
    const CostContext ctx = pn->ctx();
    pn->any_rg = ctx.any_requires_grad();
    for (size_t o = 0; o < pn->out.size(); ++o) {
      pn->out_rg.push_back(OutputNeedsGrad(*pn->def, ctx, static_cast<int>(o), pn->any_rg));
      rg[node.outputs(o)] = pn->out_rg.back();
    }
    pn->cost = pn->def->cost ? pn->def->cost(ctx) : OpCost();
    for (double f : pn->cost.grad_flops) pn->grad_flops += f;
    if (pn->any_rg && pn->def->saved) pn->saved = pn->def->saved(ctx);
    pn->saved_input_charge.assign(pn->in.size(), 0.0);
    pn->saved_output_charge.assign(pn->out.size(), 0.0);
    for (int i : pn->saved.inputs) {
      if (pn->role[i] == ParamRole::kNone && !node.inputs(i).empty()) pn->saved_input_charge[i] = charge(node.inputs(i));
    }
    if (IsViewNode(*pn->def, ctx) && node.inputs_size() > 0 && !node.inputs(0).empty()) {
      for (const auto& o : node.outputs()) storage_of[o] = storage(node.inputs(0));
    }
    for (int o : pn->saved.outputs) pn->saved_output_charge[o] = charge(node.outputs(o));
    for (double c : pn->saved_input_charge) absl::StrAppend(&pn->signature, "|si", c);
    for (double c : pn->saved_output_charge) absl::StrAppend(&pn->signature, "|so", c);
    nodes.push_back(std::move(pn));
  }
  return nodes;
}

}  // namespace mapd

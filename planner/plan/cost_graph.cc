#include "planner/plan/cost_graph.h"

#include <algorithm>
#include <map>
#include <regex>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "planner/ops/registry.h"
#include "planner/sharding/collectives.h"

namespace mapd {

namespace {

// Seconds that make a choice impossible without making the ILP numerically awkward.
constexpr double kImpossible = 1e6;

struct NodeInfo {
  std::vector<TensorType> in, out;
  std::vector<const TensorType*> in_ptrs;
  std::vector<bool> rg, contig;
};

int64_t LocalBytes(const TensorType& t, const Placement& p, const Cluster& c) {
  if (p.empty()) return t.NumBytes();
  auto s = LocalShape(t.shape, p, c.mesh);
  return s.ok() ? NumElements(*s) * DTypeSize(t.dtype) : t.NumBytes();
}

double StateBytesPerParamByte(const ProfileOptions& o) {
  // weights + gradients (+ optimizer states in fp32, as much as the weights again per state)
  const double states = o.optimizer == Optimizer::kAdamW ? 2 : (o.optimizer == Optimizer::kSgdMomentum ? 1 : 0);
  return 2 + states;
}

}  // namespace

absl::StatusOr<CostGraph> BuildCostGraph(const Graph& graph, const Cluster& cluster, const ProfileOptions& options) {
  const OpRegistry& reg = OpRegistry::Global();
  const v1::Graph& p = graph.proto();
  CostGraph cg;
  cg.strategies.resize(p.nodes_size());
  std::unordered_map<std::string, bool> rg;  // value → needs a gradient
  for (const auto& par : p.parameters()) rg[par.name()] = par.trainable();
  const double peak = options.precision == Precision::kFp32 ? cluster.device.fp32_flops : cluster.device.bf16_flops;
  std::unordered_set<std::string> params_counted;

  for (int n = 0; n < p.nodes_size(); ++n) {
    const v1::Node& node = p.nodes(n);
    const OpDef* def = reg.Find(node.op());
    if (def == nullptr) return absl::InvalidArgumentError(absl::StrCat("node '", node.name(), "': unknown op"));
    NodeInfo info;
    for (const auto& in : node.inputs()) {
      info.in.push_back(in.empty() ? TensorType() : graph.TypeOf(in));
      info.rg.push_back(!in.empty() && rg[in]);
      info.contig.push_back(true);
    }
    for (size_t i = 0; i < info.in.size(); ++i) info.in_ptrs.push_back(node.inputs(i).empty() ? nullptr : &info.in[i]);
    for (const auto& o : node.outputs()) info.out.push_back(graph.TypeOf(o));
    OpContext octx(node.name(), node.op(), info.in_ptrs, node.attrs());
    CostContext ctx{octx, info.out, info.rg, info.contig};
    const bool any_rg = ctx.any_requires_grad();
    for (size_t o = 0; o < info.out.size(); ++o) rg[node.outputs(o)] = any_rg && IsFloating(info.out[o].dtype);

    auto strategies = GenerateStrategies(*def, ctx, cluster.mesh);
    if (!strategies.ok()) return strategies.status();
    cg.strategies[n] = std::move(*strategies);

    OpCost cost = def->cost ? def->cost(ctx) : OpCost();
    double grad_flops = 0;
    for (double f : cost.grad_flops) grad_flops += f;
    const SavedSpec saved = (any_rg && def->saved) ? def->saved(ctx) : SavedSpec();

    v1::SolverNode* sn = cg.request.add_nodes();
    sn->set_name(node.name());
    sn->set_multiplicity(1);
    for (const Strategy& s : cg.strategies[n]) {
      double split = 1;
      for (int a = 0; a < cluster.num_axes(); ++a) {
        if (s.axis_label[a] != 0) split *= static_cast<double>(cluster.mesh[a]);
      }
      const double flops = (cost.flops + (any_rg ? grad_flops : 0)) / split;
      const double bytes = static_cast<double>(cost.bytes) * (any_rg ? 3 : 1) / split;
      double seconds = std::max(flops / peak, bytes / cluster.device.memory_bandwidth) +
                       cost.kernels * (any_rg ? 3 : 1) * cluster.device.kernel_overhead_seconds;
      double memory = static_cast<double>(saved.extra_bytes) / split;
      for (int i = 0; i < node.inputs_size(); ++i) {
        if (node.inputs(i).empty()) continue;
        const int64_t local = LocalBytes(info.in[i], s.inputs[i], cluster);
        const v1::Parameter* par = graph.FindParameter(node.inputs(i));
        // A replicated input that ranks use differently gets a partial gradient: all-reduce it.
        // Parameter gradients are bucketed into few all-reduces after the backward (DESIGN §7),
        // so their latency is paid once, not per parameter: only their bandwidth is charged.
        if (info.rg[i]) {
          for (int a = 0; a < cluster.num_axes(); ++a) {
            if (s.axis_label[a] != 0 && s.inputs[i][a].kind == AxisPlacement::Kind::kReplicate) {
              double t = CollectiveSeconds(CollectiveKind::kAllReduce, local, cluster.mesh[a], cluster.links[a]);
              if (par != nullptr) t = std::max(0.0, t - cluster.links[a].alpha);
              seconds += t;
            }
          }
        }
        if (par != nullptr && par->trainable() && !params_counted.count(par->name())) {
          memory += StateBytesPerParamByte(options) * static_cast<double>(local);
        } else if (par != nullptr) {
          memory += static_cast<double>(local);
        }
      }
      for (int i : saved.inputs) {
        if (graph.FindParameter(node.inputs(i)) == nullptr) memory += static_cast<double>(LocalBytes(info.in[i], s.inputs[i], cluster));
      }
      for (int o : saved.outputs) memory += static_cast<double>(LocalBytes(info.out[o], s.outputs[o], cluster));
      sn->add_cost(seconds);
      sn->add_memory(memory);
    }
    for (const auto& in : node.inputs()) {
      const v1::Parameter* par = in.empty() ? nullptr : graph.FindParameter(in);
      if (par != nullptr) params_counted.insert(par->name());
    }
  }

  // Edges: producer output → consumer input, forward resharding plus the gradient's way back.
  for (int n = 0; n < p.nodes_size(); ++n) {
    const v1::Node& node = p.nodes(n);
    for (int i = 0; i < node.inputs_size(); ++i) {
      const std::string& in = node.inputs(i);
      const ValueInfo* vi = in.empty() ? nullptr : graph.FindValue(in);
      if (vi == nullptr || vi->def != ValueDef::kNode) continue;
      const int src = vi->index;
      const int out = vi->output_index;
      v1::SolverEdge* e = cg.request.add_edges();
      e->set_src(src);
      e->set_dst(n);
      e->set_multiplicity(1);
      const bool needs_grad = rg[in];
      for (const Strategy& ps : cg.strategies[src]) {
        for (const Strategy& cs : cg.strategies[n]) {
          double seconds = 0;
          auto fwd = ReshardCost(vi->type, ps.outputs[out], cs.inputs[i], cluster);
          if (!fwd.ok()) {
            seconds = kImpossible;
          } else {
            seconds = fwd->seconds;
            if (needs_grad) {
              auto bwd = ReshardCost(vi->type, cs.inputs[i], ps.outputs[out], cluster);
              seconds += bwd.ok() ? bwd->seconds : kImpossible;
            }
          }
          e->add_cost(seconds);
        }
      }
    }
  }
  cg.request.set_memory_budget(static_cast<double>(cluster.memory_per_device));
  cg.request.set_time_limit_seconds(10);
  return cg;
}

namespace {

// "layers.12.attention/linear_2" → "layers.#.attention/linear_2".
std::string LayerFreeName(const std::string& name) {
  static const std::regex kIndex("\\.[0-9]+(?=[./])");
  return std::regex_replace(name, kIndex, ".#");
}

bool SameChoices(const v1::SolverNode& a, const v1::SolverNode& b) {
  if (a.cost_size() != b.cost_size()) return false;
  for (int k = 0; k < a.cost_size(); ++k) {
    if (a.cost(k) != b.cost(k) || a.memory(k) != b.memory(k)) return false;
  }
  return true;
}

}  // namespace

std::vector<int> FoldedCostGraph::Expand(const std::vector<int>& folded_choice) const {
  std::vector<int> out(class_of.size());
  for (size_t n = 0; n < class_of.size(); ++n) out[n] = folded_choice[class_of[n]];
  return out;
}

FoldedCostGraph FoldRepeatedLayers(const Graph& graph, const CostGraph& cg) {
  FoldedCostGraph f;
  const auto& nodes = cg.request.nodes();
  std::map<std::string, std::vector<int>> by_key;  // layer-free name → solver nodes of that name
  f.class_of.assign(nodes.size(), -1);
  for (int n = 0; n < nodes.size(); ++n) {
    const std::string key = LayerFreeName(graph.node(n).name());
    int cls = -1;
    for (int candidate : by_key[key]) {
      if (SameChoices(f.request.nodes(candidate), nodes[n])) cls = candidate;
    }
    if (cls < 0) {
      cls = f.request.nodes_size();
      *f.request.add_nodes() = nodes[n];
      f.request.mutable_nodes(cls)->set_multiplicity(0);
      f.request.mutable_nodes(cls)->set_name(key);
      by_key[key].push_back(cls);
    }
    auto* node = f.request.mutable_nodes(cls);
    node->set_multiplicity(node->multiplicity() + std::max<int64_t>(nodes[n].multiplicity(), 1));
    f.class_of[n] = cls;
  }
  // Edges between the same two classes with the same costs fold into one with a multiplicity.
  std::map<std::pair<int, int>, std::vector<int>> edges;  // (src, dst) class → folded edges
  for (const auto& e : cg.request.edges()) {
    const int src = f.class_of[e.src()], dst = f.class_of[e.dst()];
    if (src == dst) {
      // Both ends share one decision: only the diagonal (same strategy) can occur; fold it
      // into the node's own cost, scaled to the node's multiplicity.
      auto* node = f.request.mutable_nodes(src);
      const int k = node->cost_size();
      const double share = static_cast<double>(std::max<int64_t>(e.multiplicity(), 1)) /
                           static_cast<double>(std::max<int64_t>(node->multiplicity(), 1));
      for (int i = 0; i < k; ++i) node->set_cost(i, node->cost(i) + share * e.cost(i * k + i));
      continue;
    }
    int into = -1;
    for (int candidate : edges[{src, dst}]) {
      const auto& c = f.request.edges(candidate);
      if (std::equal(c.cost().begin(), c.cost().end(), e.cost().begin(), e.cost().end())) into = candidate;
    }
    if (into < 0) {
      into = f.request.edges_size();
      auto* fe = f.request.add_edges();
      *fe = e;
      fe->set_src(src);
      fe->set_dst(dst);
      fe->set_multiplicity(0);
      edges[{src, dst}].push_back(into);
    }
    auto* fe = f.request.mutable_edges(into);
    fe->set_multiplicity(fe->multiplicity() + std::max<int64_t>(e.multiplicity(), 1));
  }
  f.request.set_memory_budget(cg.request.memory_budget());
  f.request.set_memory_fixed(cg.request.memory_fixed());
  f.request.set_time_limit_seconds(cg.request.time_limit_seconds());
  return f;
}

}  // namespace mapd

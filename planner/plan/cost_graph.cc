#include "planner/plan/cost_graph.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "model/graph/mixed_precision.h"
#include "model/ops/registry.h"
#include "planner/plan/describe.h"
#include "planner/plan/prepared_graph.h"

namespace mapd {

int64_t LocalBytes(const TensorType& t, const Placement& p, const Cluster& c) {
  if (p.empty()) return t.NumBytes();
  auto s = LocalShape(t.shape, p, c.mesh);
  return s.ok() ? NumElements(*s) * DTypeSize(t.dtype) : t.NumBytes();
}

namespace {

// Seconds that make a choice impossible without making the ILP numerically awkward.
constexpr double kImpossible = 1e6;

// Optimizer states in bytes per parameter byte (fp32 states, as much as the weights per state).
double OptimizerStatesPerParamByte(const ProfileOptions& o) {
  return o.optimizer == Optimizer::kAdamW ? 2 : (o.optimizer == Optimizer::kSgdMomentum ? 1 : 0);
}

void AddCollective(StrategyCost& c, CollectiveKind kind, double bytes, double seconds) {
  c.comm_bytes[static_cast<int>(kind)] += bytes;
  c.comm_seconds += seconds;
}

StrategyCost CostStrategy(const PreparedNode& pn, const Strategy& s, const Cluster& cluster,
                          const ProfileOptions& options, const CostGraphOptions& co) {
  StrategyCost c;
  double split = 1;
  for (int a = 0; a < cluster.num_axes(); ++a) {
    if (s.axis_label[a] != 0) split *= static_cast<double>(cluster.mesh[a]);
  }
  // The forward and (with gradients) the backward's two passes, each as the profiler times a
  // rank's op (KernelSeconds: the measured rates by op, product size and kind): the search picks
  // among plans on the times their rank programs are then predicted with. A shard's products are
  // at most its FLOPs (a split product is smaller; a batch of them split keeps each one's size).
  const bool bf16 = options.precision != Precision::kFp32;
  const double forward_flops = pn.cost.flops / split, bytes = static_cast<double>(pn.cost.bytes) / split;
  const double per_product = std::min(pn.cost.flops_per_product, forward_flops);
  const double forward = KernelSeconds(cluster.device, bf16, forward_flops, bytes, pn.cost.kernels, per_product,
                                       pn.cost.vector_arithmetic, pn.rate_key);
  const double backward = pn.any_rg ? KernelSeconds(cluster.device, bf16, pn.grad_flops / split, 2 * bytes, 2 * std::max(pn.cost.kernels, 1),
                                                    per_product, pn.cost.vector_arithmetic, pn.rate_key)
                                    : 0;
  const double m = static_cast<double>(co.micro_batches);  // passes per step
  c.compute_seconds = m * (forward + backward);
  c.forward_seconds = m * forward;
  c.activation_bytes = static_cast<double>(pn.saved.extra_bytes) / split;
  const double states = OptimizerStatesPerParamByte(options);
  for (size_t i = 0; i < pn.in.size(); ++i) {
    if (pn.in_ptrs[i] == nullptr) continue;
    const int64_t local = LocalBytes(pn.in[i], s.inputs[i], cluster);
    // fp32 optimizer states (and a 16-bit parameter's fp32 master weights) per element.
    const double fp32 = static_cast<double>(LocalBytes(pn.in[i], s.inputs[i], cluster)) / DTypeSize(pn.in[i].dtype) * 4;
    const bool param = pn.role[i] != ParamRole::kNone;
    // Data-parallel axes of this input: held replicated while the work is split.
    double dp = 1;
    if (pn.rg[i]) {
      for (int a = 0; a < cluster.num_axes(); ++a) {
        if (s.axis_label[a] == 0 || s.inputs[i][a].kind != AxisPlacement::Kind::kReplicate) continue;
        dp *= static_cast<double>(cluster.mesh[a]);
        // Each rank holds a partial gradient: all-reduce it. Parameter gradients are bucketed
        // into few all-reduces after the backward (DESIGN §7), so their latency is paid once,
        // not per parameter: only their bandwidth is charged. ZeRO 1/2 replace the all-reduce
        // by a reduce-scatter and an all-gather (the same traffic); ZeRO 3 gathers the
        // parameter twice (forward, backward) and reduce-scatters its gradient.
        // Under micro-batches an activation's gradient is reduced in every pass, a parameter's
        // once a step — but ZeRO 2/3 reduce-scatter each pass's into the shard and ZeRO 3
        // gathers for each pass (CostGraphOptions::micro_batches).
        const AxisLink& link = cluster.links[a];
        const double ar = CollectiveSeconds(CollectiveKind::kAllReduce, local, cluster.mesh[a], link);
        const double ar_bandwidth = std::max(0.0, ar - CollectiveLatency(CollectiveKind::kAllReduce, local, link));
        if (!param) {
          AddCollective(c, CollectiveKind::kAllReduce, m * local, m * ar);
        } else if (co.zero_stage == 0) {
          AddCollective(c, CollectiveKind::kAllReduce, local, ar_bandwidth);
          c.once_seconds += ar_bandwidth;
        } else {
          const double half = ar_bandwidth / 2;  // one reduce-scatter or all-gather
          const double scatters = co.zero_stage >= 2 ? m : 1, gathers = co.zero_stage == 3 ? 2 * m : 1;
          AddCollective(c, CollectiveKind::kReduceScatter, scatters * local, scatters * half);
          AddCollective(c, CollectiveKind::kAllGather, gathers * local, gathers * half);
          c.once_seconds += (co.zero_stage >= 2 ? 0 : half) + (co.zero_stage == 3 ? 0 : half);
        }
      }
    }
    switch (pn.role[i]) {
      case ParamRole::kTrainable:
        c.parameter_bytes += local / (co.zero_stage >= 3 ? dp : 1);
        c.gradient_bytes += local / (co.zero_stage >= 2 ? dp : 1);
        c.optimizer_bytes += (states + (HasMasterWeights(pn.in[i].dtype) ? 1 : 0)) * fp32 / (co.zero_stage >= 1 ? dp : 1);
        break;
      case ParamRole::kFrozen: c.parameter_bytes += local; break;
      case ParamRole::kCountedBefore:
      case ParamRole::kFrozenCountedBefore:
      case ParamRole::kNone: break;
    }
  }
  for (int i : pn.saved.inputs) {
    c.activation_bytes += pn.saved_input_charge[i] * static_cast<double>(LocalBytes(pn.in[i], s.inputs[i], cluster));
  }
  for (int o : pn.saved.outputs) {
    c.activation_bytes += pn.saved_output_charge[o] * static_cast<double>(LocalBytes(pn.out[o], s.outputs[o], cluster));
  }
  c.activation_bytes *= static_cast<double>(co.activations_in_flight);
  return c;
}

// Forward resharding of a value from producer to consumer placement, plus the gradient's way
// back when the value needs one.
// The seconds of resharding an edge's value forward and, when its gradient flows back, the
// other way (ReshardSeconds); negative where either cannot be.
double EdgeSeconds(const TensorType& type, const Placement& produced, const Placement& consumed, bool needs_grad,
                   const Cluster& cluster) {
  const double fwd = ReshardSeconds(type, produced, consumed, cluster);
  if (fwd < 0 || !needs_grad) return fwd;
  const double bwd = ReshardSeconds(type, consumed, produced, cluster);
  return bwd < 0 ? -1 : fwd + bwd;
}

}  // namespace

absl::Status CostGraphOptions::Validate() const {
  if (zero_stage < 0 || zero_stage > 3) {
    return absl::InvalidArgumentError(absl::StrCat("ZeRO stage ", zero_stage, " does not exist; use 0, 1, 2 or 3"));
  }
  if (micro_batches < 1) {
    return absl::InvalidArgumentError(absl::StrCat("micro_batches is ", micro_batches, "; a step has at least one"));
  }
  if (activations_in_flight < 1 || activations_in_flight > micro_batches) {
    return absl::InvalidArgumentError(absl::StrCat("activations_in_flight is ", activations_in_flight,
                                                   "; it counts micro-batches alive at once, 1 to ", micro_batches));
  }
  return absl::OkStatus();
}

absl::StatusOr<CostGraphMemo::NodeEntry> CostNodeKind(const PreparedNode& pn, const Cluster& cluster, const ProfileOptions& options,
                                                      const CostGraphOptions& cost_options, CostGraphMemo* memo, int only_stage) {
  const std::string memo_key = memo != nullptr ? absl::StrCat(pn.signature, "#", cost_options.activations_in_flight) : "";
  if (memo != nullptr) {
    auto known = memo->nodes.find(memo_key);
    if (known != memo->nodes.end()) return known->second;  // costed in another graph of this mesh
  }
  auto strategies = GenerateStrategies(*pn.def, pn.ctx(), cluster.mesh);
  if (!strategies.ok()) return strategies.status();
  std::array<std::vector<StrategyCost>, 4> costs;
  for (const Strategy& s : *strategies) {
    for (int z = 0; z < 4; ++z) {
      if (only_stage >= 0 && z != only_stage) continue;
      CostGraphOptions at = cost_options;
      at.zero_stage = z;
      costs[z].push_back(CostStrategy(pn, s, cluster, options, at));
    }
  }
  CostGraphMemo::NodeEntry entry;
  entry.strategies = SharedList<Strategy>(*std::move(strategies));
  for (int z = 0; z < 4; ++z) entry.costs[z] = SharedList<StrategyCost>(std::move(costs[z]));
  if (memo != nullptr && only_stage < 0) memo->nodes[memo_key] = entry;  // (an entry of one stage is not kept)
  return entry;
}

SharedList<double> CostEdgeKind(const TensorType& type, const EdgePort& port, const PreparedNode& src,
                                const SharedList<Strategy>& src_strategies, const PreparedNode& dst,
                                const SharedList<Strategy>& dst_strategies, const Cluster& cluster, double passes,
                                CostGraphMemo* memo) {
  std::tuple<std::string, int, std::string, int, bool> memo_key;
  if (memo != nullptr) {
    memo_key = std::make_tuple(src.signature, port.output, dst.signature, port.input, port.needs_grad);
    auto known = memo->edges.find(memo_key);
    if (known != memo->edges.end()) return known->second;
  }
  std::vector<double> costs;
  costs.reserve(src_strategies.size() * dst_strategies.size());
  for (const Strategy& ps : src_strategies) {
    for (const Strategy& cs : dst_strategies) {
      const double seconds = EdgeSeconds(type, ps.outputs[port.output], cs.inputs[port.input], port.needs_grad, cluster);
      costs.push_back(seconds >= 0 ? passes * seconds : kImpossible);
    }
  }
  SharedList<double> shared(std::move(costs));
  if (memo != nullptr) memo->edges.emplace(std::move(memo_key), shared);
  return shared;
}

absl::StatusOr<CostGraph> BuildCostGraph(const Graph& graph, const Cluster& cluster, const ProfileOptions& options,
                                         const CostGraphOptions& cost_options) {
  auto prepared = PrepareNodes(graph);
  if (!prepared.ok()) return prepared.status();
  return BuildCostGraph(graph, *prepared, cluster, options, cost_options);
}

std::vector<NodeEdge> NodeEdges(const Graph& graph, const std::vector<std::unique_ptr<PreparedNode>>& prepared) {
  std::vector<NodeEdge> edges;
  const v1::Graph& p = graph.proto();
  for (int n = 0; n < p.nodes_size(); ++n) {
    const v1::Node& node = p.nodes(n);
    for (int i = 0; i < node.inputs_size(); ++i) {
      const std::string& in = node.inputs(i);
      const ValueInfo* vi = in.empty() ? nullptr : graph.FindValue(in);
      if (vi == nullptr || vi->def != ValueDef::kNode) continue;
      edges.push_back({EdgePort{vi->index, vi->output_index, n, i, prepared[vi->index]->out_rg[vi->output_index]}, &vi->type});
    }
  }
  return edges;
}

std::array<double, 4> FixedBytesAtStage(const std::vector<std::unique_ptr<PreparedNode>>& prepared) {
  double largest = 0;
  for (const auto& pn : prepared) {
    for (size_t i = 0; i < pn->in.size(); ++i) {
      if (pn->role[i] == ParamRole::kTrainable) largest = std::max(largest, static_cast<double>(pn->in[i].NumBytes()));
    }
  }
  return {0, 0, 0, 2 * largest};
}

std::shared_ptr<const std::vector<std::string>> LayerKeys(const Graph& graph) {
  auto keys = std::make_shared<std::vector<std::string>>();
  keys->reserve(graph.num_nodes());
  for (int n = 0; n < graph.num_nodes(); ++n) keys->push_back(LayerFreeName(graph.node(n).name()));
  return keys;
}

namespace {

// What BuildCostGraph and BuildRestrictedCostGraph start from: the options checked, the graph's
// passes, layer keys and fixed bytes set, a strategy list and cost row per node to fill.
absl::StatusOr<CostGraph> EmptyCostGraph(const Graph& graph, const std::vector<std::unique_ptr<PreparedNode>>& prepared,
                                         const CostGraphOptions& cost_options,
                                         std::shared_ptr<const std::vector<std::string>> layer_keys) {
  if (auto st = cost_options.Validate(); !st.ok()) return st;
  const int nodes = graph.num_nodes();
  if (static_cast<int>(prepared.size()) != nodes) {
    return absl::InvalidArgumentError(absl::StrCat(prepared.size(), " prepared nodes for a graph of ", nodes));
  }
  CostGraph cg;
  cg.micro_batches = cost_options.micro_batches;
  cg.activations_in_flight = cost_options.activations_in_flight;
  cg.layer_keys = layer_keys != nullptr ? std::move(layer_keys) : LayerKeys(graph);
  cg.zero_stage = cost_options.zero_stage;
  cg.strategies.resize(nodes);
  cg.costs.resize(nodes);
  cg.fixed_at_stage = FixedBytesAtStage(prepared);
  cg.memory_fixed = cg.fixed_at_stage[cost_options.zero_stage];
  return cg;
}

}  // namespace

absl::StatusOr<CostGraph> BuildCostGraph(const Graph& graph, const std::vector<std::unique_ptr<PreparedNode>>& prepared_nodes,
                                         const Cluster& cluster, const ProfileOptions& options,
                                         const CostGraphOptions& cost_options,
                                         std::shared_ptr<const std::vector<std::string>> layer_keys,
                                         CostGraphMemo* memo) {
  auto made = EmptyCostGraph(graph, prepared_nodes, cost_options, std::move(layer_keys));
  if (!made.ok()) return made.status();
  CostGraph& cg = *made;
  const auto* prepared = &prepared_nodes;
  const int nodes = graph.num_nodes();
  const double passes = static_cast<double>(cost_options.micro_batches);
  cg.costs_at_stage.resize(nodes);
  std::unordered_map<std::string, int> first_with_signature;  // signature → first node
  std::vector<int> sig_of(nodes);

  for (int n = 0; n < nodes; ++n) {
    const PreparedNode& pn = *(*prepared)[n];
    auto [it, fresh] = first_with_signature.emplace(pn.signature, n);
    sig_of[n] = it->second;
    if (!fresh) {  // a node costed before: share its strategies and costs
      cg.strategies[n] = cg.strategies[it->second];
      cg.costs[n] = cg.costs[it->second];
      cg.costs_at_stage[n] = cg.costs_at_stage[it->second];
      continue;
    }
    auto kind = CostNodeKind(pn, cluster, options, cost_options, memo);
    if (!kind.ok()) return kind.status();
    cg.strategies[n] = kind->strategies;
    cg.costs_at_stage[n] = kind->costs;
    cg.costs[n] = cg.costs_at_stage[n][cost_options.zero_stage];
  }

  // Edges: producer output → consumer input. Memoised on (producer, output, consumer, input)
  // signatures: the value's type and both strategy lists are then the same.
  std::map<std::tuple<int, int, int, int, bool>, int> edge_memo;  // → first edge with that key
  for (const NodeEdge& edge : NodeEdges(graph, *prepared)) {
    const EdgePort& e = edge.port;
    cg.edge_ports.push_back(e);
    auto [it, fresh] = edge_memo.emplace(std::make_tuple(sig_of[e.src], e.output, sig_of[e.dst], e.input, e.needs_grad),
                                         static_cast<int>(cg.edge_ports.size()) - 1);
    if (!fresh) {
      cg.edge_costs.push_back(cg.edge_costs[it->second]);
      continue;
    }
    cg.edge_costs.push_back(CostEdgeKind(*edge.type, e, *(*prepared)[e.src], cg.strategies[e.src], *(*prepared)[e.dst],
                                         cg.strategies[e.dst], cluster, passes, memo));
  }
  return made;
}

absl::StatusOr<CostGraph> BuildRestrictedCostGraph(const Graph& graph, const std::vector<std::unique_ptr<PreparedNode>>& prepared,
                                                   const Cluster& cluster, const ProfileOptions& options,
                                                   const CostGraphOptions& cost_options,
                                                   std::shared_ptr<const std::vector<std::string>> layer_keys,
                                                   CostGraphMemo* memo, const StrategyFilter& allow) {
  auto made = EmptyCostGraph(graph, prepared, cost_options, std::move(layer_keys));
  if (!made.ok()) return made.status();
  CostGraph& cg = *made;
  const int nodes = graph.num_nodes();
  std::unordered_map<std::string, CostGraphMemo::NodeEntry> kinds;  // signature → its whole kind
  // (a kind's strategies, mask) → the kept lists, shared by alike nodes with one mask
  std::map<std::pair<const void*, std::vector<bool>>, std::pair<SharedList<Strategy>, SharedList<StrategyCost>>> kept_of;
  for (int n = 0; n < nodes; ++n) {
    const PreparedNode& pn = *prepared[n];
    auto kind = kinds.find(pn.signature);
    if (kind == kinds.end()) {
      auto entry = CostNodeKind(pn, cluster, options, cost_options, memo);
      if (!entry.ok()) return entry.status();
      kind = kinds.emplace(pn.signature, *std::move(entry)).first;
    }
    const CostGraphMemo::NodeEntry& whole = kind->second;
    std::vector<bool> mask = allow(n, whole.strategies);
    auto [it, fresh] = kept_of.try_emplace(std::make_pair(whole.strategies.id(), std::move(mask)));
    if (fresh) {
      std::vector<Strategy> strategies;
      std::vector<StrategyCost> costs;
      const std::vector<bool>& m = it->first.second;
      for (size_t k = 0; k < whole.strategies.size() && k < m.size(); ++k) {
        if (!m[k]) continue;
        strategies.push_back(whole.strategies[k]);
        costs.push_back(whole.costs[cost_options.zero_stage][k]);
      }
      it->second = {SharedList<Strategy>(std::move(strategies)), SharedList<StrategyCost>(std::move(costs))};
    }
    if (it->second.first.empty()) {
      return absl::FailedPreconditionError(absl::StrCat("node '", graph.node(n).name(), "' (", graph.node(n).op(),
                                                        ") has no strategy of this kind on the mesh"));
    }
    cg.strategies[n] = it->second.first;
    cg.costs[n] = it->second.second;
  }
  // Edges over the kept strategies; alike edges between alike kept lists share their matrix.
  const double passes = static_cast<double>(cost_options.micro_batches);
  std::map<std::tuple<const void*, int, const void*, int, bool>, int> first_edge;
  for (const NodeEdge& edge : NodeEdges(graph, prepared)) {
    const EdgePort& e = edge.port;
    cg.edge_ports.push_back(e);
    auto [it, fresh] = first_edge.emplace(std::make_tuple(cg.strategies[e.src].id(), e.output, cg.strategies[e.dst].id(), e.input,
                                                          e.needs_grad),
                                          static_cast<int>(cg.edge_ports.size()) - 1);
    if (!fresh) {
      cg.edge_costs.push_back(cg.edge_costs[it->second]);
      continue;
    }
    cg.edge_costs.push_back(CostEdgeKind(*edge.type, e, *prepared[e.src], cg.strategies[e.src], *prepared[e.dst], cg.strategies[e.dst],
                                         cluster, passes, nullptr));
  }
  return made;
}

absl::StatusOr<CostGraph> RestrictStrategies(const CostGraph& cg, const Graph& graph,
                                             const std::vector<std::vector<bool>>& allowed) {
  const int nodes = static_cast<int>(cg.costs.size());
  if (static_cast<int>(allowed.size()) != nodes) {
    return absl::InvalidArgumentError(absl::StrCat("RestrictStrategies: ", allowed.size(), " masks for ", nodes, " nodes"));
  }
  CostGraph out;
  std::vector<std::vector<int>> kept(nodes);  // per node: the old indices kept
  out.strategies.resize(nodes);
  out.costs.resize(nodes);
  // Alike nodes (one strategy list and cost row) with one mask share the restricted lists too.
  std::map<std::tuple<const void*, const void*, std::vector<bool>>, int> restricted;  // → first node
  for (int n = 0; n < nodes; ++n) {
    auto [seen, fresh] = restricted.emplace(std::make_tuple(cg.strategies[n].id(), cg.costs[n].id(), allowed[n]), n);
    if (!fresh && cg.strategies[n].id() != nullptr) {
      const int first = seen->second;
      kept[n] = kept[first];
      out.strategies[n] = out.strategies[first];
      out.costs[n] = out.costs[first];
      if (kept[n].empty()) {
        return absl::FailedPreconditionError(absl::StrCat("node '", graph.node(n).name(), "' (", graph.node(n).op(),
                                                          ") has no strategy of this kind on the mesh"));
      }
      continue;
    }
    std::vector<Strategy> strategies;
    std::vector<StrategyCost> costs;
    for (int k = 0; k < static_cast<int>(cg.costs[n].size()); ++k) {
      if (k >= static_cast<int>(allowed[n].size()) || !allowed[n][k]) continue;
      kept[n].push_back(k);
      strategies.push_back(cg.strategies[n][k]);
      costs.push_back(cg.costs[n][k]);
    }
    out.strategies[n] = SharedList<Strategy>(std::move(strategies));
    out.costs[n] = SharedList<StrategyCost>(std::move(costs));
    if (kept[n].empty()) {
      return absl::FailedPreconditionError(absl::StrCat("node '", graph.node(n).name(), "' (", graph.node(n).op(),
                                                        ") has no strategy of this kind on the mesh"));
    }
  }
  // Alike edges between alike restricted nodes share their restricted matrix.
  std::map<std::tuple<const void*, const void*, const void*>, int> restricted_edges;  // → first edge
  for (size_t ei = 0; ei < cg.edge_ports.size(); ++ei) {
    const EdgePort& e = cg.edge_ports[ei];
    auto [seen, fresh] = restricted_edges.emplace(
        std::make_tuple(cg.edge_costs[ei].id(), out.strategies[e.src].id(), out.strategies[e.dst].id()), static_cast<int>(ei));
    if (!fresh && cg.edge_costs[ei].id() != nullptr) {
      out.edge_costs.push_back(out.edge_costs[seen->second]);
      continue;
    }
    const int kd = static_cast<int>(cg.strategies[e.dst].size());
    std::vector<double> costs;
    for (int i : kept[e.src]) {
      for (int j : kept[e.dst]) costs.push_back(cg.edge_costs[ei][i * kd + j]);
    }
    out.edge_costs.push_back(SharedList<double>(std::move(costs)));
  }
  out.edge_ports = cg.edge_ports;
  out.micro_batches = cg.micro_batches;
  out.activations_in_flight = cg.activations_in_flight;
  out.layer_keys = cg.layer_keys;
  out.layer_index = cg.layer_index;
  out.fixed_at_stage = cg.fixed_at_stage;
  out.zero_stage = cg.zero_stage;
  out.memory_fixed = cg.memory_fixed;
  return out;
}

absl::StatusOr<CostGraph> AtZeroStage(const CostGraph& cg, int stage) {
  if (stage < 0 || stage > 3) return absl::InvalidArgumentError(absl::StrCat("ZeRO stage ", stage, " does not exist; use 0, 1, 2 or 3"));
  if (cg.costs_at_stage.size() != cg.costs.size()) {
    return absl::FailedPreconditionError("a restricted cost graph cannot be priced at another ZeRO stage");
  }
  CostGraph out = cg;
  out.folded = nullptr;
  out.zero_stage = stage;
  for (size_t n = 0; n < out.costs.size(); ++n) out.costs[n] = cg.costs_at_stage[n][stage];
  out.memory_fixed = cg.fixed_at_stage[stage];
  return out;
}

StagePrice PriceAtStage(const CostGraph& cg, const std::vector<int>& choice, int stage) {
  StagePrice p;
  p.memory = cg.fixed_at_stage[stage];
  const bool staged = cg.costs_at_stage.size() == cg.costs.size();
  for (size_t n = 0; n < choice.size() && n < cg.costs.size(); ++n) {
    const StrategyCost& c = staged ? cg.costs_at_stage[n][stage][choice[n]] : cg.costs[n][choice[n]];
    p.seconds += c.seconds();
    p.memory += c.memory();
  }
  for (size_t e = 0; e < cg.edge_ports.size(); ++e) {
    const EdgePort& port = cg.edge_ports[e];
    const int kd = static_cast<int>(cg.strategies[port.dst].size());
    p.seconds += cg.edge_costs[e][choice[port.src] * kd + choice[port.dst]];
  }
  return p;
}

double LeastStateMemory(const CostGraph& cg, int stage) {
  double least = cg.fixed_at_stage[stage];
  const bool staged = cg.costs_at_stage.size() == cg.costs.size();
  for (size_t n = 0; n < cg.costs.size(); ++n) {
    double m = std::numeric_limits<double>::infinity();
    for (const StrategyCost& c : staged ? cg.costs_at_stage[n][stage] : cg.costs[n]) m = std::min(m, c.memory() - c.activation_bytes);
    if (std::isfinite(m)) least += m;
  }
  return least;
}

absl::StatusOr<ChoiceCost> CostChoice(const Graph& graph, const Cluster& cluster, const CostGraph& cg,
                                      const std::vector<int>& choice) {
  if (choice.size() != cg.strategies.size()) {
    return absl::InvalidArgumentError(absl::StrCat("a choice of ", choice.size(), " strategies for ", cg.strategies.size(), " nodes"));
  }
  ChoiceCost c;
  for (size_t n = 0; n < choice.size(); ++n) {
    const StrategyCost& s = cg.costs[n][choice[n]];
    c.compute_seconds += s.compute_seconds;
    c.comm_seconds += s.comm_seconds;
    c.once_seconds += s.once_seconds;
    for (int k = 0; k < 4; ++k) c.comm_bytes[k] += s.comm_bytes[k];
    c.parameter_bytes += s.parameter_bytes;
    c.gradient_bytes += s.gradient_bytes;
    c.optimizer_bytes += s.optimizer_bytes;
    c.activation_bytes += s.activation_bytes;
  }
  for (size_t e = 0; e < cg.edge_ports.size(); ++e) {
    const EdgePort& port = cg.edge_ports[e];
    const std::string& value = graph.node(port.src).outputs(port.output);
    const Strategy& ps = cg.strategies[port.src][choice[port.src]];
    const Strategy& cs = cg.strategies[port.dst][choice[port.dst]];
    const int kd = static_cast<int>(cg.strategies[port.dst].size());
    const double seconds = cg.edge_costs[e][choice[port.src] * kd + choice[port.dst]];
    c.comm_seconds += seconds;
    // The collectives behind the edge's seconds (with the gradient's way back when it was charged).
    auto fwd = ReshardCost(graph.TypeOf(value), ps.outputs[port.output], cs.inputs[port.input], cluster);
    if (!fwd.ok()) continue;
    std::vector<Collective> all = fwd->collectives;
    if (port.needs_grad) {
      auto bwd = ReshardCost(graph.TypeOf(value), cs.inputs[port.input], ps.outputs[port.output], cluster);
      if (bwd.ok()) all.insert(all.end(), bwd->collectives.begin(), bwd->collectives.end());
    }
    for (const Collective& col : all) {
      c.comm_bytes[static_cast<int>(col.kind)] += static_cast<double>(cg.micro_batches) * static_cast<double>(col.bytes);
    }
  }
  c.fixed_bytes = cg.memory_fixed;
  c.step_seconds = c.compute_seconds + c.comm_seconds;  // recomputation is added by the planner
  return c;
}

namespace {

// Whether two nodes' cost rows price every choice alike (rows shared by alike nodes are).
bool SameChoices(const SharedList<StrategyCost>& a, const SharedList<StrategyCost>& b) {
  if (a.id() == b.id()) return true;
  if (a.size() != b.size()) return false;
  for (size_t k = 0; k < a.size(); ++k) {
    if (a[k].seconds() != b[k].seconds() || a[k].memory() != b[k].memory()) return false;
  }
  return true;
}

}  // namespace

void AddCostRows(const SharedList<StrategyCost>& costs, v1::SolverNode* node) {
  for (const StrategyCost& c : costs) {
    node->add_cost(c.seconds());
    node->add_memory(c.memory());
  }
}

void FoldDiagonalIntoNode(const SharedList<double>& seconds, double share, v1::SolverNode* node) {
  const int k = node->cost_size();
  for (int i = 0; i < k; ++i) node->set_cost(i, node->cost(i) + share * seconds[i * k + i]);
}

std::vector<int> FoldedCostGraph::Expand(const std::vector<int>& folded_choice) const {
  std::vector<int> out(class_of.size());
  for (size_t n = 0; n < class_of.size(); ++n) out[n] = folded_choice[class_of[n]];
  return out;
}

FoldedCostGraph FoldRepeatedLayers(const Graph& graph, const CostGraph& cg) {
  FoldedCostGraph f;
  const int nodes = static_cast<int>(cg.costs.size());
  std::map<std::string, std::vector<int>> by_key;  // layer-free name → solver nodes of that name
  std::vector<int> first_of_class;                  // per solver node: the graph node it was made from
  f.class_of.assign(nodes, -1);
  for (int n = 0; n < nodes; ++n) {
    const std::string& key = cg.layer_keys != nullptr ? (*cg.layer_keys)[n] : LayerFreeName(graph.node(n).name());
    int cls = -1;
    for (int candidate : by_key[key]) {
      if (SameChoices(cg.costs[first_of_class[candidate]], cg.costs[n])) cls = candidate;
    }
    if (cls < 0) {
      cls = f.request.nodes_size();
      v1::SolverNode* made = f.request.add_nodes();
      made->set_name(key);
      AddCostRows(cg.costs[n], made);
      first_of_class.push_back(n);
      by_key[key].push_back(cls);
    }
    auto* node = f.request.mutable_nodes(cls);
    node->set_multiplicity(node->multiplicity() + 1);
    f.class_of[n] = cls;
  }
  // Edges between the same two classes with the same costs fold into one with a multiplicity.
  std::map<std::pair<int, int>, std::vector<int>> edges;  // (src, dst) class → folded edges
  std::vector<const SharedList<double>*> folded_costs;    // per folded edge: the costs it was made from
  f.edge_of.assign(cg.edge_ports.size(), -1);
  for (size_t ei = 0; ei < cg.edge_ports.size(); ++ei) {
    const EdgePort& e = cg.edge_ports[ei];
    const SharedList<double>& costs = cg.edge_costs[ei];
    const int src = f.class_of[e.src], dst = f.class_of[e.dst];
    if (src == dst) {
      auto* node = f.request.mutable_nodes(src);
      FoldDiagonalIntoNode(costs, 1.0 / static_cast<double>(std::max<int64_t>(node->multiplicity(), 1)), node);
      continue;
    }
    int into = -1;
    for (int candidate : edges[{src, dst}]) {
      const SharedList<double>& c = *folded_costs[candidate];
      if (c.id() == costs.id() || std::equal(c.begin(), c.end(), costs.begin(), costs.end())) into = candidate;
    }
    if (into < 0) {
      into = f.request.edges_size();
      auto* fe = f.request.add_edges();
      for (double x : costs) fe->add_cost(x);
      fe->set_src(src);
      fe->set_dst(dst);
      fe->set_multiplicity(0);
      edges[{src, dst}].push_back(into);
      folded_costs.push_back(&costs);
    }
    auto* fe = f.request.mutable_edges(into);
    fe->set_multiplicity(fe->multiplicity() + 1);
    f.edge_of[ei] = into;
  }
  f.request.set_memory_fixed(cg.memory_fixed);
  f.request.set_time_limit_seconds(10);
  return f;
}

v1::SolverRequest CostGraph::SolverRequest() const {
  v1::SolverRequest out;
  for (size_t n = 0; n < costs.size(); ++n) {
    v1::SolverNode* node = out.add_nodes();
    node->set_name(layer_keys != nullptr && n < layer_keys->size() ? (*layer_keys)[n] : absl::StrCat("node ", n));
    node->set_multiplicity(1);
    AddCostRows(costs[n], node);
  }
  for (size_t e = 0; e < edge_ports.size(); ++e) {
    v1::SolverEdge* edge = out.add_edges();
    edge->set_src(edge_ports[e].src);
    edge->set_dst(edge_ports[e].dst);
    edge->set_multiplicity(1);
    for (double x : edge_costs[e]) edge->add_cost(x);
  }
  out.set_memory_fixed(memory_fixed);
  out.set_time_limit_seconds(10);
  return out;
}

const FoldedCostGraph& FoldedOf(const Graph& graph, const CostGraph& cg) {
  if (cg.folded == nullptr) cg.folded = std::make_shared<const FoldedCostGraph>(FoldRepeatedLayers(graph, cg));
  return *cg.folded;
}

}  // namespace mapd

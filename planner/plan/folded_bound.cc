#include "planner/plan/folded_bound.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>
#include <unordered_map>

#include "absl/strings/str_cat.h"

namespace mapd {

FoldSkeleton MakeFoldSkeleton(const Graph& graph, const std::vector<std::unique_ptr<PreparedNode>>& prepared,
                              const std::vector<std::string>& layer_keys) {
  FoldSkeleton sk;
  const v1::Graph& p = graph.proto();
  std::unordered_map<std::string, int> kind_of_signature;
  std::map<std::pair<std::string, int>, int> class_of_key;  // (layer-free name, kind) → class
  std::vector<int> kind(p.nodes_size()), cls(p.nodes_size());
  for (int n = 0; n < p.nodes_size(); ++n) {
    const PreparedNode& pn = *prepared[n];
    kind[n] = kind_of_signature.emplace(pn.signature, static_cast<int>(kind_of_signature.size())).first->second;
    auto [it, fresh] = class_of_key.emplace(std::make_pair(layer_keys[n], kind[n]), static_cast<int>(sk.classes.size()));
    if (fresh) sk.classes.push_back({layer_keys[n], n, 0});
    cls[n] = it->second;
    ++sk.classes[cls[n]].multiplicity;
  }
  // (source class, destination class, edge kind) → group; an edge's kind is its ends' kinds, ports
  // and whether a gradient flows back (BuildCostGraph's edge memo).
  std::map<std::tuple<int, int, int, int, int, int, bool>, int> group_of;
  for (const NodeEdge& edge : NodeEdges(graph, prepared)) {
    const EdgePort& e = edge.port;
    auto [it, fresh] = group_of.emplace(std::make_tuple(cls[e.src], cls[e.dst], kind[e.src], e.output, kind[e.dst], e.input, e.needs_grad),
                                        static_cast<int>(sk.edges.size()));
    if (fresh) sk.edges.push_back({cls[e.src], cls[e.dst], e, *edge.type, 0});
    ++sk.edges[it->second].multiplicity;
  }
  sk.fixed_at_stage = FixedBytesAtStage(prepared);
  return sk;
}

absl::StatusOr<SkeletonCosts> CostSkeleton(const Graph& graph, const std::vector<std::unique_ptr<PreparedNode>>& prepared,
                                           const FoldSkeleton& skeleton, const Cluster& cluster, const ProfileOptions& options,
                                           const CostGraphOptions& cost_options, CostGraphMemo* memo, int only_stage) {
  if (auto st = cost_options.Validate(); !st.ok()) return st;
  if (only_stage > 3) return absl::InvalidArgumentError(absl::StrCat("ZeRO stage ", only_stage, " does not exist"));
  SkeletonCosts costs;
  for (int z = 0; z < 4; ++z) costs.stages[z] = only_stage < 0 || z == only_stage;
  std::vector<int> class_of_node(graph.num_nodes(), -1);
  for (size_t c = 0; c < skeleton.classes.size(); ++c) {
    const int node = skeleton.classes[c].node;
    auto kind = CostNodeKind(*prepared[node], cluster, options, cost_options, memo, only_stage);
    if (!kind.ok()) return kind.status();
    costs.classes.push_back(*std::move(kind));
    class_of_node[node] = static_cast<int>(c);
  }
  const double passes = static_cast<double>(cost_options.micro_batches);
  for (const FoldSkeleton::Edge& e : skeleton.edges) {
    // The group's edge joins nodes of its classes' kinds: the classes' strategies are theirs.
    costs.edges.push_back(CostEdgeKind(e.type, e.port, *prepared[e.port.src], costs.classes[e.src_class].strategies,
                                       *prepared[e.port.dst], costs.classes[e.dst_class].strategies, cluster, passes,
                                       only_stage < 0 ? memo : nullptr));
  }
  costs.fixed_at_stage = skeleton.fixed_at_stage;
  return costs;
}

double LeastStateMemory(const FoldSkeleton& skeleton, const SkeletonCosts& costs, int stage) {
  double least = costs.fixed_at_stage[stage];
  for (size_t c = 0; c < skeleton.classes.size(); ++c) {
    double m = std::numeric_limits<double>::infinity();
    for (const StrategyCost& s : costs.classes[c].costs[stage]) m = std::min(m, s.memory() - s.activation_bytes);
    if (std::isfinite(m)) least += m * static_cast<double>(skeleton.classes[c].multiplicity);
  }
  return least;
}

double ChoiceMemory(const FoldSkeleton& skeleton, const SkeletonCosts& costs, const std::vector<int>& choice, int stage) {
  double bytes = costs.fixed_at_stage[stage];
  for (size_t c = 0; c < skeleton.classes.size() && c < choice.size(); ++c) {
    bytes += costs.classes[c].costs[stage][choice[c]].memory() * static_cast<double>(skeleton.classes[c].multiplicity);
  }
  return bytes;
}

v1::SolverRequest FoldedRequest(const FoldSkeleton& skeleton, const SkeletonCosts& costs, int stage) {
  v1::SolverRequest r;
  for (size_t c = 0; c < skeleton.classes.size(); ++c) {
    v1::SolverNode* node = r.add_nodes();
    node->set_name(skeleton.classes[c].name);
    node->set_multiplicity(skeleton.classes[c].multiplicity);
    AddCostRows(costs.classes[c].costs[stage], node);
  }
  for (size_t g = 0; g < skeleton.edges.size(); ++g) {
    const FoldSkeleton::Edge& e = skeleton.edges[g];
    const SharedList<double>& seconds = costs.edges[g];
    if (e.src_class == e.dst_class) {
      v1::SolverNode* node = r.mutable_nodes(e.src_class);
      FoldDiagonalIntoNode(seconds, static_cast<double>(e.multiplicity) / static_cast<double>(node->multiplicity()), node);
      continue;
    }
    v1::SolverEdge* edge = r.add_edges();
    edge->set_src(e.src_class);
    edge->set_dst(e.dst_class);
    edge->set_multiplicity(e.multiplicity);
    for (double x : seconds) edge->add_cost(x);
  }
  r.set_memory_fixed(costs.fixed_at_stage[stage]);
  return r;
}

}  // namespace mapd

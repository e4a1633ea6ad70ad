#include "planner/plan/folded_bound.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "planner/plan/recompute_groups.h"
#include "planner/solver/strategy_solver.h"

namespace mapd {

FoldSkeleton MakeFoldSkeleton(const Graph& graph, const std::vector<std::unique_ptr<PreparedNode>>& prepared,
                              const std::vector<std::string>& layer_keys, const LayerIndex& layers) {
  FoldSkeleton sk;
  const v1::Graph& p = graph.proto();
  std::unordered_map<std::string, int> kind_of_signature;
  std::map<std::pair<std::string, int>, int> class_of_key;  // (layer-free name, kind) → class
  std::vector<int> kind(p.nodes_size()), cls(p.nodes_size());
  for (int n = 0; n < p.nodes_size(); ++n) {
    const PreparedNode& pn = *prepared[n];
    kind[n] = kind_of_signature.emplace(pn.signature, static_cast<int>(kind_of_signature.size())).first->second;
    auto [it, fresh] = class_of_key.emplace(std::make_pair(layer_keys[n], kind[n]), static_cast<int>(sk.classes.size()));
    if (fresh) {
      const bool repeated = layers.of_node[n] >= 0;
      sk.classes.push_back({layer_keys[n], n, 0, repeated, repeated ? BoundaryOutputs(graph, n, layers.of_node) : std::vector<bool>{}});
    }
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
    std::vector<double> boundary;
    if (skeleton.classes[c].repeated) {
      for (const Strategy& s : kind->strategies) boundary.push_back(BoundaryBytes(graph, node, skeleton.classes[c].boundary, s, cluster));
    }
    costs.boundary_bytes.push_back(std::move(boundary));
    costs.classes.push_back(*std::move(kind));
    class_of_node[node] = static_cast<int>(c);
  }
  costs.in_flight = cost_options.activations_in_flight;
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

double BudgetedBound(const FoldSkeleton& skeleton, const SkeletonCosts& costs, int stage, double budget, double gap, double target) {
  const v1::SolverRequest base = FoldedRequest(skeleton, costs, stage);
  const double room = budget - costs.fixed_at_stage[stage];
  v1::SolverRequest priced = base;
  priced.set_relative_gap(gap);
  priced.set_time_limit_seconds(1);  // an answer CBC could not prove in time bounds nothing
  // L(λ) at one λ: its value (a lower bound) and the slope of the minimising choice's line,
  // T(x) + λ·(M(x) − room): L is the lower envelope of those lines, so concave.
  struct Point {
    double lambda, value, slope;
  };
  // Per copy of a node that recomputes: the seconds it adds and the bytes it changes (what it
  // saves less the checkpoint, then once a group what it takes again: spread over the node's
  // copies, which are at least the group's layers, so no more than the group adds per copy).
  const double in_flight = static_cast<double>(std::max<int64_t>(1, costs.in_flight));
  auto recompute = [&](int c, int k) -> std::pair<double, double> {
    const StrategyCost& row = costs.classes[c].costs[stage][k];
    const double copies = static_cast<double>(std::max<int64_t>(1, skeleton.classes[c].multiplicity));
    const double held = k < static_cast<int>(costs.boundary_bytes[c].size()) ? costs.boundary_bytes[c][k] : 0;
    return {row.forward_seconds, -(row.activation_bytes - in_flight * held) + row.activation_bytes / in_flight / copies};
  };
  auto lagrangian = [&](double lambda) -> std::optional<Point> {
    for (int c = 0; c < base.nodes_size(); ++c) {
      const v1::SolverNode& node = base.nodes(c);
      v1::SolverNode* out = priced.mutable_nodes(c);
      for (int k = 0; k < node.cost_size(); ++k) {
        double cost = node.cost(k) + lambda * node.memory(k);
        if (skeleton.classes[c].repeated) {
          const auto [seconds, bytes] = recompute(c, k);
          cost += std::min(0.0, seconds + lambda * bytes);
        }
        out->set_cost(k, cost);
      }
    }
    auto r = SolveStrategies(priced);
    // Only a proven answer (within `gap`) bounds: not one the solver refuses, nor CBC's best when
    // its time ran out, nor the greedy fallback's.
    if (!r.ok() || r->status() != v1::SolverResponse::OPTIMAL || r->choice_size() != base.nodes_size()) return std::nullopt;
    double memory = 0;
    for (int c = 0; c < base.nodes_size(); ++c) {
      const int k = r->choice(c);
      double m = base.nodes(c).memory(k);
      if (skeleton.classes[c].repeated) {
        const auto [seconds, bytes] = recompute(c, k);
        if (seconds + lambda * bytes < 0) m += bytes;  // it recomputes at this λ
      }
      memory += m * static_cast<double>(base.nodes(c).multiplicity());
    }
    return Point{lambda, r->objective() / (1 + gap) - lambda * room, memory - room};
  };
  auto at_zero = lagrangian(0);
  if (!at_zero) return 0;
  double best = std::max(at_zero->value, 0.0);
  if (at_zero->slope <= 0 || room <= 0 || best >= target) return best;
  // A λ whose choice fits (its line falls): doubling from where the first line has doubled.
  Point lo = *at_zero;
  std::optional<Point> hi;
  for (double lambda = std::max(best, 1e-30) / lo.slope; !hi && lambda < 1e300; lambda *= 4) {
    auto p = lagrangian(lambda);
    if (!p) return best;
    best = std::max(best, p->value);
    if (best >= target) return best;
    if (p->slope > 0) {
      lo = *p;
    } else {
      hi = *p;
    }
  }
  if (!hi) return best;
  // Kelley's cutting planes between the two lines: where they cross is the most L can reach in
  // the bracket; evaluated there, L either meets it (the maximum) or gives a new line.
  for (int i = 0; i < 12; ++i) {
    const double lambda = (hi->value - lo.value + lo.lambda * lo.slope - hi->lambda * hi->slope) / (lo.slope - hi->slope);
    const double reach = lo.value + (lambda - lo.lambda) * lo.slope;
    if (reach < target || !(lambda > lo.lambda && lambda < hi->lambda)) return best;  // the target is out of reach
    auto p = lagrangian(lambda);
    if (!p) return best;
    best = std::max(best, p->value);
    if (best >= target || p->value >= reach * (1 - 1e-9)) return best;
    if (p->slope > 0) {
      lo = *p;
    } else {
      hi = *p;
    }
  }
  return best;
}

}  // namespace mapd

#include "planner/solver/dominance.h"

namespace mapd {

std::vector<int> PrunedRequest::Original(const std::vector<int>& choice) const {
  std::vector<int> out(choice.size());
  for (size_t v = 0; v < choice.size(); ++v) out[v] = kept[v][choice[v]];
  return out;
}

namespace {

// Edge costs as dense matrices over the current strategy sets.
struct Edge {
  int src, dst;
  std::vector<double> cost;  // [i * kd + j] over the current sets
};

}  // namespace

PrunedRequest PruneDominated(const v1::SolverRequest& r) {
  const int n = r.nodes_size();
  std::vector<std::vector<int>> kept(n);
  for (int v = 0; v < n; ++v) {
    for (int k = 0; k < r.nodes(v).cost_size(); ++k) kept[v].push_back(k);
  }
  std::vector<std::vector<int>> out_edges(n), in_edges(n);
  for (int e = 0; e < r.edges_size(); ++e) {
    out_edges[r.edges(e).src()].push_back(e);
    in_edges[r.edges(e).dst()].push_back(e);
  }
  const bool budgeted = r.memory_budget() > 0;
  // Recompute groups: per member node its member entry and layer count; per edge its recompute
  // seconds (null when none). Every term is linear in the group's count ρ ∈ [0, L], so a
  // strategy no worse at ρ = 0 and at ρ = L is no worse at every ρ.
  std::vector<const v1::RecomputeMember*> member(n, nullptr);
  std::vector<double> layers(n, 0);
  std::vector<const v1::RecomputeEdge*> recompute_edge(r.edges_size(), nullptr);
  std::vector<double> edge_layers(r.edges_size(), 0);
  for (const auto& g : r.recompute()) {
    for (const auto& m : g.members()) {
      member[m.node()] = &m;
      layers[m.node()] = static_cast<double>(g.layers());
    }
    for (const auto& e : g.edges()) {
      recompute_edge[e.edge()] = &e;
      edge_layers[e.edge()] = static_cast<double>(g.layers());
    }
  }
  auto mult = [&](int64_t m) { return m <= 0 ? 1.0 : static_cast<double>(m); };
  // Resharding seconds of edge e with original strategies i (src) and j (dst).
  auto edge_cost = [&](int e, int i, int j) { return r.edges(e).cost(i * r.nodes(r.edges(e).dst()).cost_size() + j); };
  // The same with every layer of the edge's group recomputed (per copy of the edge).
  auto edge_cost_all = [&](int e, int i, int j) {
    const double c = edge_cost(e, i, j);
    if (recompute_edge[e] == nullptr) return c;
    const int kd = r.nodes(r.edges(e).dst()).cost_size();
    return c + edge_layers[e] * recompute_edge[e]->seconds(i * kd + j) / mult(r.edges(e).multiplicity());
  };
  // Does a (original index) dominate b at node v, over the current strategy sets of its neighbours?
  auto dominates = [&](int v, int a, int b) {
    const auto& node = r.nodes(v);
    if (node.cost(a) > node.cost(b)) return false;
    if (budgeted && node.memory(a) > node.memory(b)) return false;
    if (const v1::RecomputeMember* m = member[v]) {
      const double n_v = mult(node.multiplicity()), l = layers[v];
      if (n_v * node.cost(a) + l * m->seconds(a) > n_v * node.cost(b) + l * m->seconds(b)) return false;
      if (budgeted && (n_v * node.memory(a) - l * m->saved(a) > n_v * node.memory(b) - l * m->saved(b) ||
                       m->rematerialized(a) > m->rematerialized(b))) {
        return false;
      }
    }
    for (int e : out_edges[v]) {
      for (int j : kept[r.edges(e).dst()]) {
        if (edge_cost(e, a, j) > edge_cost(e, b, j) || edge_cost_all(e, a, j) > edge_cost_all(e, b, j)) return false;
      }
    }
    for (int e : in_edges[v]) {
      for (int i : kept[r.edges(e).src()]) {
        if (edge_cost(e, i, a) > edge_cost(e, i, b) || edge_cost_all(e, i, a) > edge_cost_all(e, i, b)) return false;
      }
    }
    return true;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (int v = 0; v < n; ++v) {
      std::vector<int> next;
      for (int b : kept[v]) {
        bool dominated = false;
        for (int a : kept[v]) {
          if (a == b) continue;
          // Strictly better somewhere, or identical and earlier: never both ways.
          if (dominates(v, a, b) && (!dominates(v, b, a) || a < b)) {
            dominated = true;
            break;
          }
        }
        if (!dominated) next.push_back(b);
      }
      if (next.size() != kept[v].size()) {
        kept[v] = std::move(next);
        changed = true;
      }
    }
  }
  PrunedRequest p;
  p.kept = kept;
  p.request = r;
  for (int v = 0; v < n; ++v) {
    auto* node = p.request.mutable_nodes(v);
    node->clear_cost();
    node->clear_memory();
    for (int k : kept[v]) {
      node->add_cost(r.nodes(v).cost(k));
      node->add_memory(r.nodes(v).memory(k));
    }
  }
  for (int e = 0; e < r.edges_size(); ++e) {
    auto* edge = p.request.mutable_edges(e);
    edge->clear_cost();
    for (int i : kept[r.edges(e).src()]) {
      for (int j : kept[r.edges(e).dst()]) edge->add_cost(edge_cost(e, i, j));
    }
  }
  for (int g = 0; g < r.recompute_size(); ++g) {
    auto* group = p.request.mutable_recompute(g);
    for (auto& m : *group->mutable_members()) {
      const v1::RecomputeMember& old = *member[m.node()];
      m.clear_saved();
      m.clear_seconds();
      m.clear_rematerialized();
      for (int k : kept[m.node()]) {
        m.add_saved(old.saved(k));
        m.add_seconds(old.seconds(k));
        m.add_rematerialized(old.rematerialized(k));
      }
    }
    for (auto& re : *group->mutable_edges()) {
      const auto& edge = r.edges(re.edge());
      const int kd = r.nodes(edge.dst()).cost_size();
      const v1::RecomputeEdge& old = *recompute_edge[re.edge()];
      re.clear_seconds();
      for (int i : kept[edge.src()]) {
        for (int j : kept[edge.dst()]) re.add_seconds(old.seconds(i * kd + j));
      }
    }
  }
  return p;
}

}  // namespace mapd

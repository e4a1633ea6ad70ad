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
  // Resharding seconds of edge e with original strategies i (src) and j (dst).
  auto edge_cost = [&](int e, int i, int j) { return r.edges(e).cost(i * r.nodes(r.edges(e).dst()).cost_size() + j); };
  // Does a (original index) dominate b at node v, over the current strategy sets of its neighbours?
  auto dominates = [&](int v, int a, int b) {
    const auto& node = r.nodes(v);
    if (node.cost(a) > node.cost(b)) return false;
    if (budgeted && node.memory(a) > node.memory(b)) return false;
    for (int e : out_edges[v]) {
      for (int j : kept[r.edges(e).dst()]) {
        if (edge_cost(e, a, j) > edge_cost(e, b, j)) return false;
      }
    }
    for (int e : in_edges[v]) {
      for (int i : kept[r.edges(e).src()]) {
        if (edge_cost(e, i, a) > edge_cost(e, i, b)) return false;
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
  return p;
}

}  // namespace mapd

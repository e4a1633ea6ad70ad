#include "planner/solver/elimination.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

namespace mapd {

namespace {

double Mult(int64_t m) { return m <= 0 ? 1.0 : static_cast<double>(m); }

// m[i * cols + j] as [j * rows + i].
std::vector<double> Transposed(const std::vector<double>& m, int rows, int cols) {
  std::vector<double> t(m.size());
  for (int i = 0; i < rows; ++i) {
    for (int j = 0; j < cols; ++j) t[j * rows + i] = m[i * cols + j];
  }
  return t;
}

// Adds `m` into `sum` (which starts empty).
void AddInto(std::vector<double>& sum, const std::vector<double>& m) {
  if (sum.empty()) sum.assign(m.size(), 0.0);
  for (size_t x = 0; x < m.size(); ++x) sum[x] += m[x];
}

// min_j (a[j] + b[j]) over n entries, with four running minima so that the additions overlap
// (the minimum of a set is exact in any order). The hot loop of elimination: a degree-2 node's
// min-plus product.
double MinOfSums(const double* a, const double* b, int n) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  double m0 = kInf, m1 = kInf, m2 = kInf, m3 = kInf;
  int j = 0;
  for (; j + 4 <= n; j += 4) {
    m0 = std::min(m0, a[j] + b[j]);
    m1 = std::min(m1, a[j + 1] + b[j + 1]);
    m2 = std::min(m2, a[j + 2] + b[j + 2]);
    m3 = std::min(m3, a[j + 3] + b[j + 3]);
  }
  for (; j < n; ++j) m0 = std::min(m0, a[j] + b[j]);
  return std::min(std::min(m0, m1), std::min(m2, m3));
}

// An edge between nodes a < b with total costs [ia * k_b + ib].
struct WorkEdge {
  int a, b;
  std::vector<double> cost;
};

}  // namespace

EliminatedRequest::EliminatedRequest(const v1::SolverRequest& r) {
  const int n = r.nodes_size();
  k_.resize(n);
  std::vector<std::vector<double>> cost(n), memory(n);
  for (int v = 0; v < n; ++v) {
    k_[v] = r.nodes(v).cost_size();
    for (int j = 0; j < k_[v]; ++j) {
      cost[v].push_back(Mult(r.nodes(v).multiplicity()) * r.nodes(v).cost(j));
      memory[v].push_back(Mult(r.nodes(v).multiplicity()) * r.nodes(v).memory(j));
    }
  }
  // A matrix between a and b ([ia * k_b + ib]) keyed by the (smaller, larger) endpoints and
  // oriented that way.
  auto ordered = [&](int a, int b, std::vector<double> m) {
    if (a > b) {
      m = Transposed(m, k_[a], k_[b]);
      std::swap(a, b);
    }
    return std::make_pair(std::make_pair(a, b), std::move(m));
  };
  // Edges keyed by their (smaller, larger) endpoints; parallel edges summed.
  std::map<std::pair<int, int>, WorkEdge> edges;
  auto AddEdge = [&](int a, int b, std::vector<double> c_ab) {  // c_ab[ia * k_b + ib]
    auto [key, m] = ordered(a, b, std::move(c_ab));
    auto it = edges.try_emplace(key, WorkEdge{key.first, key.second, {}}).first;
    AddInto(it->second.cost, m);
  };
  for (const auto& e : r.edges()) {
    if (e.src() == e.dst()) {  // both ends are one decision: only the diagonal can occur
      for (int j = 0; j < k_[e.src()]; ++j) cost[e.src()][j] += Mult(e.multiplicity()) * e.cost(j * k_[e.src()] + j);
      continue;
    }
    std::vector<double> c(e.cost_size());
    for (int x = 0; x < e.cost_size(); ++x) c[x] = Mult(e.multiplicity()) * e.cost(x);
    AddEdge(e.src(), e.dst(), std::move(c));
  }
  // Recompute groups: their members stay (their choice changes what recomputation costs and
  // saves); their member edges' recompute seconds are kept beside the merged edges, oriented
  // like them.
  std::vector<bool> member(n, false);
  for (const auto& g : r.recompute()) {
    for (const auto& m : g.members()) member[m.node()] = true;
  }
  std::map<std::pair<int, int>, std::pair<int, std::vector<double>>> recompute_edges;  // → (group, seconds)
  for (int g = 0; g < r.recompute_size(); ++g) {
    for (const auto& re : r.recompute(g).edges()) {
      auto [key, sec] = ordered(r.edges(re.edge()).src(), r.edges(re.edge()).dst(),
                                std::vector<double>(re.seconds().begin(), re.seconds().end()));
      auto it = recompute_edges.try_emplace(key, g, std::vector<double>{}).first;
      AddInto(it->second.second, sec);
    }
  }
  std::vector<std::set<int>> adj(n);
  for (const auto& [key, e] : edges) {
    adj[key.first].insert(key.second);
    adj[key.second].insert(key.first);
  }
  const bool budgeted = r.memory_budget() > 0;
  double fixed = r.memory_fixed();
  std::vector<bool> alive(n, true);
  auto memory_constant = [&](int v) {
    return std::all_of(memory[v].begin(), memory[v].end(), [&](double m) { return m == memory[v][0]; });
  };
  // The edge matrix between v and its neighbour u, oriented [u strategy][v strategy].
  auto oriented = [&](int u, int v) {
    const WorkEdge& e = edges.at({std::min(u, v), std::max(u, v)});
    return e.a == u ? e.cost : Transposed(e.cost, k_[v], k_[u]);
  };
  std::vector<int> queue;
  for (int v = 0; v < n; ++v) queue.push_back(v);
  while (!queue.empty()) {
    const int v = queue.back();
    queue.pop_back();
    if (!alive[v] || member[v] || adj[v].size() > 2 || (budgeted && !memory_constant(v))) continue;
    Removed rem{v, cost[v], memory[v], {}};
    for (int u : adj[v]) rem.neighbours.emplace_back(u, oriented(u, v));
    const int kv = k_[v];
    if (rem.neighbours.size() == 2) {
      const int u = rem.neighbours[0].first, w = rem.neighbours[1].first;
      const auto& uv = rem.neighbours[0].second;  // [i * kv + j]
      const auto& wv = rem.neighbours[1].second;  // [k * kv + j]
      // uw[i][k] = min_j (C_v[j] + uv[i][j]) + wv[k][j], the sums in the order written.
      std::vector<double> uw(static_cast<size_t>(k_[u]) * k_[w]);
      std::vector<double> through(kv);  // C_v[j] + uv[i][j] for one i
      for (int i = 0; i < k_[u]; ++i) {
        for (int j = 0; j < kv; ++j) through[j] = cost[v][j] + uv[i * kv + j];
        for (int k = 0; k < k_[w]; ++k) uw[i * k_[w] + k] = MinOfSums(through.data(), &wv[k * kv], kv);
      }
      AddEdge(u, w, std::move(uw));
      adj[u].insert(w);
      adj[w].insert(u);
    } else if (rem.neighbours.size() == 1) {
      const int u = rem.neighbours[0].first;
      const auto& uv = rem.neighbours[0].second;
      for (int i = 0; i < k_[u]; ++i) {
        double best = std::numeric_limits<double>::infinity();
        for (int j = 0; j < kv; ++j) best = std::min(best, cost[v][j] + uv[i * kv + j]);
        cost[u][i] += best;
      }
    }
    // (degree 0: the constant min_j C_v[j] is added back by ObjectiveOf on the original.)
    for (const auto& [u, matrix] : rem.neighbours) {
      edges.erase({std::min(u, v), std::max(u, v)});
      adj[u].erase(v);
      queue.push_back(u);
    }
    adj[v].clear();
    alive[v] = false;
    if (budgeted) fixed += memory[v][0];
    order_.push_back(std::move(rem));
  }
  // The reduced request.
  std::vector<int> index(n, -1);
  for (int v = 0; v < n; ++v) {
    if (!alive[v]) continue;
    index[v] = static_cast<int>(survivor_.size());
    survivor_.push_back(v);
    v1::SolverNode* node = reduced_.add_nodes();
    node->set_name(r.nodes(v).name());
    node->set_multiplicity(1);
    for (int j = 0; j < k_[v]; ++j) {
      node->add_cost(cost[v][j]);
      node->add_memory(memory[v][j]);
    }
  }
  for (const auto& g : r.recompute()) {
    v1::RecomputeGroup* rg = reduced_.add_recompute();
    *rg = g;
    rg->clear_edges();
    for (auto& m : *rg->mutable_members()) m.set_node(index[m.node()]);
  }
  for (const auto& [key, e] : edges) {
    v1::SolverEdge* edge = reduced_.add_edges();
    edge->set_src(index[e.a]);
    edge->set_dst(index[e.b]);
    edge->set_multiplicity(1);
    for (double c : e.cost) edge->add_cost(c);
    auto rc = recompute_edges.find(key);
    if (rc != recompute_edges.end()) {
      v1::RecomputeEdge* re = reduced_.mutable_recompute(rc->second.first)->add_edges();
      re->set_edge(reduced_.edges_size() - 1);
      for (double x : rc->second.second) re->add_seconds(x);
    }
  }
  reduced_.set_memory_budget(r.memory_budget());
  reduced_.set_memory_fixed(fixed);
  reduced_.set_time_limit_seconds(r.time_limit_seconds());
}

std::vector<int> EliminatedRequest::Original(const std::vector<int>& reduced_choice) const {
  std::vector<int> choice(k_.size(), -1);
  for (size_t s = 0; s < survivor_.size(); ++s) choice[survivor_[s]] = reduced_choice[s];
  for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
    const int kv = k_[it->node];
    int best_j = 0;
    double best = std::numeric_limits<double>::infinity();
    for (int j = 0; j < kv; ++j) {
      double c = it->cost[j];
      for (const auto& [u, matrix] : it->neighbours) c += matrix[choice[u] * kv + j];
      const double tie = j == 0 ? 0 : 1e-12 * std::max(1.0, std::abs(best));
      if (j == 0 || c < best - tie || (c <= best + tie && it->memory[j] < it->memory[best_j])) {
        best = j == 0 ? c : std::min(best, c);
        best_j = j;
      }
    }
    choice[it->node] = best_j;
  }
  return choice;
}

}  // namespace mapd

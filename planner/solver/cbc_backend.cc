#include "planner/solver/cbc_backend.h"

#include <coin/Cbc_C_Interface.h>

#include <cmath>
#include <limits>
#include <memory>
#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"

namespace mapd {

namespace {
struct ModelDeleter {
  void operator()(Cbc_Model* m) const { Cbc_deleteModel(m); }
};
double Mult(int64_t m) { return m <= 0 ? 1.0 : static_cast<double>(m); }
// CBC's solver front end (CbcMain) keeps state in globals: one solve at a time in a process (the
// planner's pipeline search runs beside its other search, pipeline_search.h).
std::mutex cbc_mutex;
}  // namespace

absl::StatusOr<CbcResult> SolveWithCbc(const v1::SolverRequest& r, const std::vector<int>* start) {
  std::lock_guard<std::mutex> one_at_a_time(cbc_mutex);
  std::unique_ptr<Cbc_Model, ModelDeleter> model(Cbc_newModel());
  if (!model) return absl::InternalError("CBC: cannot create a model");
  Cbc_Model* m = model.get();
  Cbc_setLogLevel(m, 0);

  // Columns: s_vk (binary), then e_uvij (continuous in [0,1]: (C2)-(C3) force the product).
  // The matrix is assembled column by column and loaded at once (adding rows one by one costs
  // CBC a copy of the matrix per row).
  std::vector<int> s_first(r.nodes_size());
  std::vector<double> obj;
  for (int v = 0; v < r.nodes_size(); ++v) {
    s_first[v] = static_cast<int>(obj.size());
    for (double c : r.nodes(v).cost()) obj.push_back(Mult(r.nodes(v).multiplicity()) * c);
  }
  const int s_cols = static_cast<int>(obj.size());
  std::vector<int> e_first(r.edges_size());
  for (int e = 0; e < r.edges_size(); ++e) {
    e_first[e] = static_cast<int>(obj.size());
    for (double c : r.edges(e).cost()) obj.push_back(Mult(r.edges(e).multiplicity()) * c);
  }
  // Recompute groups: ρ_g (integer), b_g (binary), then z_vk and t_vk per member, y_eij per
  // member edge.
  struct GroupCols {
    int rho, b;
    std::vector<int> z, t, y;  // first column per member / member edge
  };
  std::vector<GroupCols> gcols(r.recompute_size());
  std::vector<double> col_lb, col_ub;
  col_lb.assign(obj.size(), 0.0);
  col_ub.assign(obj.size(), 1.0);
  std::vector<int> integer_cols;
  auto add_col = [&](double cost, double lb, double ub) {
    obj.push_back(cost);
    col_lb.push_back(lb);
    col_ub.push_back(ub);
    return static_cast<int>(obj.size()) - 1;
  };
  for (int g = 0; g < r.recompute_size(); ++g) {
    const auto& group = r.recompute(g);
    const double layers = static_cast<double>(group.layers());
    GroupCols& gc = gcols[g];
    gc.rho = add_col(0.0, static_cast<double>(group.min_recomputed()), layers);
    gc.b = add_col(0.0, 0.0, 1.0);
    integer_cols.push_back(gc.rho);
    integer_cols.push_back(gc.b);
    for (const auto& mem : group.members()) {
      gc.z.push_back(static_cast<int>(obj.size()));
      for (double f : mem.seconds()) add_col(f, 0.0, layers);
      gc.t.push_back(static_cast<int>(obj.size()));
      for (int k = 0; k < mem.seconds_size(); ++k) add_col(0.0, 0.0, 1.0);
    }
    for (const auto& e : group.edges()) {
      gc.y.push_back(static_cast<int>(obj.size()));
      for (double f : e.seconds()) add_col(f, 0.0, layers);
    }
  }
  const int cols = static_cast<int>(obj.size());
  std::vector<std::vector<std::pair<int, double>>> by_col(cols);  // (row, coefficient)
  std::vector<double> row_lb, row_ub;
  auto add_row = [&](double lb, double ub) {
    row_lb.push_back(lb);
    row_ub.push_back(ub);
    return static_cast<int>(row_lb.size()) - 1;
  };
  // (C1) one strategy per node.
  for (int v = 0; v < r.nodes_size(); ++v) {
    const int row = add_row(1.0, 1.0);
    for (int k = 0; k < r.nodes(v).cost_size(); ++k) by_col[s_first[v] + k].push_back({row, 1.0});
  }
  // (C2) Σ_j e_uvij = s_ui and (C3) Σ_i e_uvij = s_vj.
  for (int e = 0; e < r.edges_size(); ++e) {
    const auto& edge = r.edges(e);
    const int ks = r.nodes(edge.src()).cost_size(), kd = r.nodes(edge.dst()).cost_size();
    for (int i = 0; i < ks; ++i) {
      const int row = add_row(0.0, 0.0);
      for (int j = 0; j < kd; ++j) by_col[e_first[e] + i * kd + j].push_back({row, 1.0});
      by_col[s_first[edge.src()] + i].push_back({row, -1.0});
    }
    for (int j = 0; j < kd; ++j) {
      const int row = add_row(0.0, 0.0);
      for (int i = 0; i < ks; ++i) by_col[e_first[e] + i * kd + j].push_back({row, 1.0});
      by_col[s_first[edge.dst()] + j].push_back({row, -1.0});
    }
  }
  // (C4) memory per device at the peak.
  const double inf = std::numeric_limits<double>::max();
  if (r.memory_budget() > 0) {
    const int row = add_row(-inf, r.memory_budget() - r.memory_fixed());
    for (int v = 0; v < r.nodes_size(); ++v) {
      for (int k = 0; k < r.nodes(v).cost_size(); ++k) {
        by_col[s_first[v] + k].push_back({row, Mult(r.nodes(v).multiplicity()) * r.nodes(v).memory(k)});
      }
    }
    for (int g = 0; g < r.recompute_size(); ++g) {
      for (int m = 0; m < r.recompute(g).members_size(); ++m) {
        const auto& mem = r.recompute(g).members(m);
        for (int k = 0; k < mem.saved_size(); ++k) {
          if (mem.saved(k) != 0) by_col[gcols[g].z[m] + k].push_back({row, -mem.saved(k)});
          if (mem.rematerialized(k) != 0) by_col[gcols[g].t[m] + k].push_back({row, mem.rematerialized(k)});
        }
      }
    }
  }
  for (int g = 0; g < r.recompute_size(); ++g) {
    const auto& group = r.recompute(g);
    const GroupCols& gc = gcols[g];
    const double layers = static_cast<double>(group.layers());
    // (C5)-(C6) and (C9): w_j ≤ L_g x_j for n columns and Σ_j w_j = ρ_g — w is ρ_g times the
    // one-hot x (a node's s, an edge's e).
    auto count_times_one_hot = [&](int w_first, int x_first, int n) {
      const int sum = add_row(0.0, 0.0);
      by_col[gc.rho].push_back({sum, -1.0});
      for (int j = 0; j < n; ++j) {
        by_col[w_first + j].push_back({sum, 1.0});
        const int bound = add_row(-inf, 0.0);
        by_col[w_first + j].push_back({bound, 1.0});
        by_col[x_first + j].push_back({bound, -layers});
      }
    };
    // (C7) ρ_g ≤ L_g b_g.
    const int c7 = add_row(-inf, 0.0);
    by_col[gc.rho].push_back({c7, 1.0});
    by_col[gc.b].push_back({c7, -layers});
    for (int m = 0; m < group.members_size(); ++m) {
      const int v = group.members(m).node();
      count_times_one_hot(gc.z[m], s_first[v], r.nodes(v).cost_size());  // (C5)-(C6)
      for (int k = 0; k < r.nodes(v).cost_size(); ++k) {
        // (C8) t_vk − s_vk − b_g ≥ −1.
        const int c8 = add_row(-1.0, inf);
        by_col[gc.t[m] + k].push_back({c8, 1.0});
        by_col[s_first[v] + k].push_back({c8, -1.0});
        by_col[gc.b].push_back({c8, -1.0});
      }
    }
    for (int x = 0; x < group.edges_size(); ++x) {
      count_times_one_hot(gc.y[x], e_first[group.edges(x).edge()], group.edges(x).seconds_size());  // (C9)
    }
  }
  std::vector<CoinBigIndex> starts = {0};
  std::vector<int> index;
  std::vector<double> value;
  for (const auto& col : by_col) {
    for (const auto& [row, coef] : col) {
      index.push_back(row);
      value.push_back(coef);
    }
    starts.push_back(static_cast<CoinBigIndex>(index.size()));
  }
  Cbc_loadProblem(m, cols, static_cast<int>(row_lb.size()), starts.data(), index.data(), value.data(), col_lb.data(),
                  col_ub.data(), obj.data(), row_lb.data(), row_ub.data());
  for (int c = 0; c < s_cols; ++c) Cbc_setInteger(m, c);
  for (int c : integer_cols) Cbc_setInteger(m, c);

  if (start != nullptr) {
    std::vector<std::string> names;
    for (int c = 0; c < s_cols; ++c) {
      names.push_back(absl::StrCat("s", c));
      Cbc_setColName(m, c, const_cast<char*>(names.back().c_str()));
    }
    std::vector<const char*> start_names;
    std::vector<double> start_values;
    for (int v = 0; v < r.nodes_size(); ++v) {
      for (int k = 0; k < r.nodes(v).cost_size(); ++k) {
        start_names.push_back(names[s_first[v] + k].c_str());
        start_values.push_back((*start)[v] == k ? 1.0 : 0.0);
      }
    }
    Cbc_setMIPStart(m, static_cast<int>(start_names.size()), start_names.data(), start_values.data());
  }
  // CBC's LP presolve and MIP preprocessing cost more than they save on this problem (its
  // relaxation is nearly integral): off, the planner's solves took 4-7x less time with the same
  // optima (llama2-70b on 64 devices: 1.25 s -> 0.24 s of solving). MAPD_CBC_PARAMS
  // ("name=value,...") overrides CBC parameters for experiments.
  Cbc_setParameter(m, "presolve", "off");
  Cbc_setParameter(m, "preprocess", "off");
  // Nor does the feasibility pump pay: the solves start from the Lagrangian's plan (a MIP
  // start), and the pump spent a quarter of the pipeline searches' time at CBC's root for no
  // better plan (`plan_bench --pipelines`: llama3-70b on 1024 H100s 6.3 -> 4.4 s; the grid of
  // `plan_bench` 25.4 -> 14.4 s; every plan the same).
  Cbc_setParameter(m, "feas", "off");
  if (const char* params = getenv("MAPD_CBC_PARAMS")) {
    std::string all(params);
    size_t pos = 0;
    while (pos < all.size()) {
      size_t eq = all.find('=', pos), end = all.find(',', pos);
      if (end == std::string::npos) end = all.size();
      Cbc_setParameter(m, all.substr(pos, eq - pos).c_str(), all.substr(eq + 1, end - eq - 1).c_str());
      pos = end + 1;
    }
  }
  // The limit in elapsed seconds: CBC's default, the process's CPU time, runs faster while
  // another thread of the planner computes.
  Cbc_setParameter(m, "timeMode", "elapsed");
  if (r.time_limit_seconds() > 0) Cbc_setMaximumSeconds(m, r.time_limit_seconds());
  // Only solutions better than the cutoff are wanted (none: proven infeasible), and one within
  // the relative gap of CBC's bound is optimal enough.
  if (r.objective_cutoff() > 0) Cbc_setParameter(m, "cutoff", absl::StrCat(r.objective_cutoff()).c_str());
  if (r.relative_gap() > 0) Cbc_setParameter(m, "ratioGap", absl::StrCat(r.relative_gap()).c_str());
  Cbc_solve(m);

  CbcResult result;
  if (Cbc_isProvenInfeasible(m)) {
    result.status = CbcOutcome::kInfeasible;
    return result;
  }
  const double* x = Cbc_getColSolution(m);
  if (x == nullptr || Cbc_numberSavedSolutions(m) == 0) {
    result.status = CbcOutcome::kNoSolution;
    return result;
  }
  result.choice.resize(r.nodes_size());
  for (int v = 0; v < r.nodes_size(); ++v) {
    int best = 0;
    for (int k = 1; k < r.nodes(v).cost_size(); ++k) {
      if (x[s_first[v] + k] > x[s_first[v] + best]) best = k;
    }
    result.choice[v] = best;
  }
  for (const GroupCols& gc : gcols) result.recomputed.push_back(static_cast<int64_t>(std::llround(x[gc.rho])));
  result.status = Cbc_isProvenOptimal(m) ? CbcOutcome::kOptimal : CbcOutcome::kFeasible;
  return result;
}

}  // namespace mapd

#include "planner/solver/cbc_backend.h"

#include <coin/Cbc_C_Interface.h>

#include <cmath>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

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
constexpr double kInf = std::numeric_limits<double>::max();

// The ILP of a request as CBC loads it: columns with their costs and bounds, rows with theirs,
// the matrix column by column (adding rows one by one costs CBC a copy of the matrix per row).
// Each Add* builds the columns or the constraints its label names (strategy_solver.h states them).
class IlpMatrix {
 public:
  explicit IlpMatrix(const v1::SolverRequest& r) : r_(r) {}

  // Columns: s_vk (binary), then e_uvij (continuous in [0,1]: (C2)-(C3) force the product).
  void AddStrategyColumns() {
    s_first_.resize(r_.nodes_size());
    for (int v = 0; v < r_.nodes_size(); ++v) {
      s_first_[v] = static_cast<int>(obj_.size());
      for (double c : r_.nodes(v).cost()) AddColumn(Mult(r_.nodes(v).multiplicity()) * c, 0.0, 1.0);
    }
    s_cols_ = static_cast<int>(obj_.size());
    e_first_.resize(r_.edges_size());
    for (int e = 0; e < r_.edges_size(); ++e) {
      e_first_[e] = static_cast<int>(obj_.size());
      for (double c : r_.edges(e).cost()) AddColumn(Mult(r_.edges(e).multiplicity()) * c, 0.0, 1.0);
    }
  }

  // Recompute groups: ρ_g (integer), b_g (binary), then z_vk and t_vk per member, y_eij per
  // member edge.
  void AddRecomputeColumns() {
    groups_.resize(r_.recompute_size());
    for (int g = 0; g < r_.recompute_size(); ++g) {
      const auto& group = r_.recompute(g);
      const double layers = static_cast<double>(group.layers());
      GroupCols& gc = groups_[g];
      gc.rho = AddColumn(0.0, static_cast<double>(group.min_recomputed()), layers);
      gc.b = AddColumn(0.0, 0.0, 1.0);
      integer_cols_.push_back(gc.rho);
      integer_cols_.push_back(gc.b);
      for (const auto& mem : group.members()) {
        gc.z.push_back(static_cast<int>(obj_.size()));
        for (double f : mem.seconds()) AddColumn(f, 0.0, layers);
        gc.t.push_back(static_cast<int>(obj_.size()));
        for (int k = 0; k < mem.seconds_size(); ++k) AddColumn(0.0, 0.0, 1.0);
      }
      for (const auto& e : group.edges()) {
        gc.y.push_back(static_cast<int>(obj_.size()));
        for (double f : e.seconds()) AddColumn(f, 0.0, layers);
      }
    }
    by_col_.resize(obj_.size());
  }

  // (C1) one strategy per node.
  void AddOneStrategyPerNode() {
    for (int v = 0; v < r_.nodes_size(); ++v) {
      const int row = AddRow(1.0, 1.0);
      for (int k = 0; k < r_.nodes(v).cost_size(); ++k) Set(row, s_first_[v] + k, 1.0);
    }
  }

  // (C2) Σ_j e_uvij = s_ui and (C3) Σ_i e_uvij = s_vj.
  void AddEdgeProducts() {
    for (int e = 0; e < r_.edges_size(); ++e) {
      const auto& edge = r_.edges(e);
      const int ks = r_.nodes(edge.src()).cost_size(), kd = r_.nodes(edge.dst()).cost_size();
      for (int i = 0; i < ks; ++i) {
        const int row = AddRow(0.0, 0.0);
        for (int j = 0; j < kd; ++j) Set(row, e_first_[e] + i * kd + j, 1.0);
        Set(row, s_first_[edge.src()] + i, -1.0);
      }
      for (int j = 0; j < kd; ++j) {
        const int row = AddRow(0.0, 0.0);
        for (int i = 0; i < ks; ++i) Set(row, e_first_[e] + i * kd + j, 1.0);
        Set(row, s_first_[edge.dst()] + j, -1.0);
      }
    }
  }

  // (C4) memory per device at the peak, under a budget.
  void AddMemoryRow() {
    if (r_.memory_budget() <= 0) return;
    const int row = AddRow(-kInf, r_.memory_budget() - r_.memory_fixed());
    for (int v = 0; v < r_.nodes_size(); ++v) {
      for (int k = 0; k < r_.nodes(v).cost_size(); ++k) Set(row, s_first_[v] + k, Mult(r_.nodes(v).multiplicity()) * r_.nodes(v).memory(k));
    }
    for (int g = 0; g < r_.recompute_size(); ++g) {
      for (int m = 0; m < r_.recompute(g).members_size(); ++m) {
        const auto& mem = r_.recompute(g).members(m);
        for (int k = 0; k < mem.saved_size(); ++k) {
          if (mem.saved(k) != 0) Set(row, groups_[g].z[m] + k, -mem.saved(k));
          if (mem.rematerialized(k) != 0) Set(row, groups_[g].t[m] + k, mem.rematerialized(k));
        }
      }
    }
  }

  // (C5)-(C9): each recompute group's count, its members' and edges' shares of it.
  void AddRecomputeRows() {
    for (int g = 0; g < r_.recompute_size(); ++g) {
      const auto& group = r_.recompute(g);
      const GroupCols& gc = groups_[g];
      const double layers = static_cast<double>(group.layers());
      // (C7) ρ_g ≤ L_g b_g.
      const int c7 = AddRow(-kInf, 0.0);
      Set(c7, gc.rho, 1.0);
      Set(c7, gc.b, -layers);
      for (int m = 0; m < group.members_size(); ++m) {
        const int v = group.members(m).node();
        CountTimesOneHot(gc, gc.z[m], s_first_[v], r_.nodes(v).cost_size(), layers);  // (C5)-(C6)
        for (int k = 0; k < r_.nodes(v).cost_size(); ++k) {
          // (C8) t_vk − s_vk − b_g ≥ −1.
          const int c8 = AddRow(-1.0, kInf);
          Set(c8, gc.t[m] + k, 1.0);
          Set(c8, s_first_[v] + k, -1.0);
          Set(c8, gc.b, -1.0);
        }
      }
      for (int x = 0; x < group.edges_size(); ++x) {
        CountTimesOneHot(gc, gc.y[x], e_first_[group.edges(x).edge()], group.edges(x).seconds_size(), layers);  // (C9)
      }
    }
  }

  // The problem into `m`: the matrix, the bounds, the integer columns.
  void LoadInto(Cbc_Model* m) const {
    std::vector<CoinBigIndex> starts = {0};
    std::vector<int> index;
    std::vector<double> value;
    for (const auto& col : by_col_) {
      for (const auto& [row, coef] : col) {
        index.push_back(row);
        value.push_back(coef);
      }
      starts.push_back(static_cast<CoinBigIndex>(index.size()));
    }
    Cbc_loadProblem(m, static_cast<int>(obj_.size()), static_cast<int>(row_lb_.size()), starts.data(), index.data(), value.data(),
                    col_lb_.data(), col_ub_.data(), obj_.data(), row_lb_.data(), row_ub_.data());
    for (int c = 0; c < s_cols_; ++c) Cbc_setInteger(m, c);
    for (int c : integer_cols_) Cbc_setInteger(m, c);
  }

  // `start` (a strategy per node) as CBC's MIP start.
  void SetStart(Cbc_Model* m, const std::vector<int>& start) const {
    std::vector<std::string> names;
    names.reserve(s_cols_);
    for (int c = 0; c < s_cols_; ++c) {
      names.push_back(absl::StrCat("s", c));
      Cbc_setColName(m, c, const_cast<char*>(names.back().c_str()));
    }
    std::vector<const char*> start_names;
    std::vector<double> start_values;
    for (int v = 0; v < r_.nodes_size(); ++v) {
      for (int k = 0; k < r_.nodes(v).cost_size(); ++k) {
        start_names.push_back(names[s_first_[v] + k].c_str());
        start_values.push_back(start[v] == k ? 1.0 : 0.0);
      }
    }
    Cbc_setMIPStart(m, static_cast<int>(start_names.size()), start_names.data(), start_values.data());
  }

  // The strategies and recompute counts of CBC's solution `x`.
  void ReadSolution(const double* x, CbcResult& result) const {
    result.choice.resize(r_.nodes_size());
    for (int v = 0; v < r_.nodes_size(); ++v) {
      int best = 0;
      for (int k = 1; k < r_.nodes(v).cost_size(); ++k) {
        if (x[s_first_[v] + k] > x[s_first_[v] + best]) best = k;
      }
      result.choice[v] = best;
    }
    for (const GroupCols& gc : groups_) result.recomputed.push_back(static_cast<int64_t>(std::llround(x[gc.rho])));
  }

 private:
  struct GroupCols {
    int rho = 0, b = 0;
    std::vector<int> z, t, y;  // first column per member / member edge
  };

  int AddColumn(double cost, double lb, double ub) {
    obj_.push_back(cost);
    col_lb_.push_back(lb);
    col_ub_.push_back(ub);
    return static_cast<int>(obj_.size()) - 1;
  }
  int AddRow(double lb, double ub) {
    row_lb_.push_back(lb);
    row_ub_.push_back(ub);
    return static_cast<int>(row_lb_.size()) - 1;
  }
  void Set(int row, int col, double coefficient) { by_col_[col].push_back({row, coefficient}); }

  // (C5)-(C6) and (C9): w_j ≤ L_g x_j for n columns and Σ_j w_j = ρ_g — w is ρ_g times the
  // one-hot x (a node's s, an edge's e).
  void CountTimesOneHot(const GroupCols& gc, int w_first, int x_first, int n, double layers) {
    const int sum = AddRow(0.0, 0.0);
    Set(sum, gc.rho, -1.0);
    for (int j = 0; j < n; ++j) {
      Set(sum, w_first + j, 1.0);
      const int bound = AddRow(-kInf, 0.0);
      Set(bound, w_first + j, 1.0);
      Set(bound, x_first + j, -layers);
    }
  }

  const v1::SolverRequest& r_;
  std::vector<int> s_first_, e_first_;  // first column of each node's s, each edge's e
  int s_cols_ = 0;                      // the s columns come first
  std::vector<GroupCols> groups_;
  std::vector<int> integer_cols_;       // besides the s columns
  std::vector<double> obj_, col_lb_, col_ub_, row_lb_, row_ub_;
  std::vector<std::vector<std::pair<int, double>>> by_col_;  // (row, coefficient) per column
};

// CBC's parameters for the request: its limits, and the parts of CBC that do not pay here.
void SetParameters(Cbc_Model* m, const v1::SolverRequest& r) {
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
}

}  // namespace

absl::StatusOr<CbcResult> SolveWithCbc(const v1::SolverRequest& r, const std::vector<int>* start) {
  std::lock_guard<std::mutex> one_at_a_time(cbc_mutex);
  std::unique_ptr<Cbc_Model, ModelDeleter> model(Cbc_newModel());
  if (!model) return absl::InternalError("CBC: cannot create a model");
  Cbc_Model* m = model.get();
  Cbc_setLogLevel(m, 0);

  IlpMatrix ilp(r);
  ilp.AddStrategyColumns();
  ilp.AddRecomputeColumns();
  ilp.AddOneStrategyPerNode();  // (C1)
  ilp.AddEdgeProducts();        // (C2)-(C3)
  ilp.AddMemoryRow();           // (C4)
  ilp.AddRecomputeRows();       // (C5)-(C9)
  ilp.LoadInto(m);
  if (start != nullptr) ilp.SetStart(m, *start);
  SetParameters(m, r);
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
  ilp.ReadSolution(x, result);
  result.status = Cbc_isProvenOptimal(m) ? CbcOutcome::kOptimal : CbcOutcome::kFeasible;
  return result;
}

}  // namespace mapd

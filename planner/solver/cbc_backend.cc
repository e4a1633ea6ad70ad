#include "planner/solver/cbc_backend.h"

#include <coin/Cbc_C_Interface.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"

namespace mapd {

namespace {
struct ModelDeleter {
  void operator()(Cbc_Model* m) const { Cbc_deleteModel(m); }
};
double Mult(int64_t m) { return m <= 0 ? 1.0 : static_cast<double>(m); }
}  // namespace

absl::StatusOr<CbcResult> SolveWithCbc(const v1::SolverRequest& r, const std::vector<int>* start) {
  std::unique_ptr<Cbc_Model, ModelDeleter> model(Cbc_newModel());
  if (!model) return absl::InternalError("CBC: cannot create a model");
  Cbc_Model* m = model.get();
  Cbc_setLogLevel(m, 0);

  // Columns: s_vk (binary), then e_uvij (continuous in [0,1]: (C2)-(C3) force the product).
  std::vector<int> s_first(r.nodes_size());
  std::vector<std::string> names;
  int cols = 0;
  for (int v = 0; v < r.nodes_size(); ++v) {
    s_first[v] = cols;
    const auto& node = r.nodes(v);
    for (int k = 0; k < node.cost_size(); ++k) {
      names.push_back(absl::StrCat("s_", v, "_", k));
      Cbc_addCol(m, names.back().c_str(), 0.0, 1.0, Mult(node.multiplicity()) * node.cost(k), 1, 0, nullptr, nullptr);
      ++cols;
    }
  }
  std::vector<int> e_first(r.edges_size());
  for (int e = 0; e < r.edges_size(); ++e) {
    e_first[e] = cols;
    const auto& edge = r.edges(e);
    for (int x = 0; x < edge.cost_size(); ++x) {
      Cbc_addCol(m, absl::StrCat("e_", e, "_", x).c_str(), 0.0, 1.0, Mult(edge.multiplicity()) * edge.cost(x), 0, 0,
                 nullptr, nullptr);
      ++cols;
    }
  }

  std::vector<int> idx;
  std::vector<double> coef;
  auto row = [&](char sense, double rhs) {
    Cbc_addRow(m, "", static_cast<int>(idx.size()), idx.data(), coef.data(), sense, rhs);
    idx.clear();
    coef.clear();
  };
  // (C1) one strategy per node.
  for (int v = 0; v < r.nodes_size(); ++v) {
    for (int k = 0; k < r.nodes(v).cost_size(); ++k) {
      idx.push_back(s_first[v] + k);
      coef.push_back(1.0);
    }
    row('E', 1.0);
  }
  // (C2) Σ_j e_uvij = s_ui and (C3) Σ_i e_uvij = s_vj.
  for (int e = 0; e < r.edges_size(); ++e) {
    const auto& edge = r.edges(e);
    const int ks = r.nodes(edge.src()).cost_size(), kd = r.nodes(edge.dst()).cost_size();
    for (int i = 0; i < ks; ++i) {
      for (int j = 0; j < kd; ++j) {
        idx.push_back(e_first[e] + i * kd + j);
        coef.push_back(1.0);
      }
      idx.push_back(s_first[edge.src()] + i);
      coef.push_back(-1.0);
      row('E', 0.0);
    }
    for (int j = 0; j < kd; ++j) {
      for (int i = 0; i < ks; ++i) {
        idx.push_back(e_first[e] + i * kd + j);
        coef.push_back(1.0);
      }
      idx.push_back(s_first[edge.dst()] + j);
      coef.push_back(-1.0);
      row('E', 0.0);
    }
  }
  // (C4) memory per device at the peak.
  if (r.memory_budget() > 0) {
    for (int v = 0; v < r.nodes_size(); ++v) {
      for (int k = 0; k < r.nodes(v).cost_size(); ++k) {
        idx.push_back(s_first[v] + k);
        coef.push_back(Mult(r.nodes(v).multiplicity()) * r.nodes(v).memory(k));
      }
    }
    row('L', r.memory_budget() - r.memory_fixed());
  }

  if (start != nullptr) {
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
  if (r.time_limit_seconds() > 0) Cbc_setMaximumSeconds(m, r.time_limit_seconds());
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
  result.status = Cbc_isProvenOptimal(m) ? CbcOutcome::kOptimal : CbcOutcome::kFeasible;
  return result;
}

}  // namespace mapd

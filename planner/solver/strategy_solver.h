// Picks one strategy per node to minimise step time under the per-device memory budget.
//
// The integer linear program (DESIGN §6), over a SolverRequest with nodes v (strategies k,
// multiplicity n_v) and edges (u,v) (multiplicity n_uv):
//
//   minimise    Σ_v n_v Σ_k c_vk s_vk  +  Σ_(u,v) n_uv Σ_(i,j) r_uvij e_uvij
//   subject to  (C1) Σ_k s_vk = 1                                for every node v
//               (C2) Σ_j e_uvij = s_ui                           for every edge (u,v), every i
//               (C3) Σ_i e_uvij = s_vj                           for every edge (u,v), every j
//               (C4) Σ_v n_v Σ_k m_vk s_vk  ≤  M − F             memory per device
//               s_vk, e_uvij ∈ {0, 1}
//
// c: seconds of a node's strategy (compute + its own communication); r: seconds of resharding
// between a producer's and a consumer's strategies; m: bytes per device at the memory peak; M:
// the budget; F: bytes that do not depend on the choice. (C2)-(C3) make e the product s_u ⊗ s_v
// without quadratic terms. CBC solves it under a time limit; a greedy choice (cheapest per
// node given its producers, repaired for memory, improved by single-node moves) answers when
// CBC finds nothing in time, and is kept whenever it is better than CBC's incumbent.
#ifndef MAPD_PLANNER_SOLVER_STRATEGY_SOLVER_H_
#define MAPD_PLANNER_SOLVER_STRATEGY_SOLVER_H_

#include <vector>

#include "absl/status/statusor.h"
#include "proto/mapd/v1/solver.pb.h"

namespace mapd {

// Checks sizes: every node has ≥ 1 strategy with as many memory entries as costs; edges name
// existing nodes and have k_src × k_dst costs; multiplicities ≥ 1 (0 is read as 1).
absl::Status ValidateSolverRequest(const v1::SolverRequest& request);

// Objective (seconds) and memory (bytes per device, fixed part included) of a choice.
double ObjectiveOf(const v1::SolverRequest& request, const std::vector<int>& choice);
double MemoryOf(const v1::SolverRequest& request, const std::vector<int>& choice);

// Solves with CBC (falling back to greedy). INFEASIBLE is a response status, not an error;
// errors are for malformed requests.
absl::StatusOr<v1::SolverResponse> SolveStrategies(const v1::SolverRequest& request);

// The greedy answer alone (also the fallback).
v1::SolverResponse SolveGreedy(const v1::SolverRequest& request);

}  // namespace mapd

#endif  // MAPD_PLANNER_SOLVER_STRATEGY_SOLVER_H_

// Picks one strategy per node to minimise step time under the per-device memory budget.
//
// The integer linear program (DESIGN §6), over a SolverRequest with nodes v (strategies k,
// multiplicity n_v), edges (u,v) (multiplicity n_uv) and recompute groups g (L_g identical layers
// whose member nodes G_v and member edges G_e are folded into one decision each):
//
//   minimise    Σ_v n_v Σ_k c_vk s_vk  +  Σ_(u,v) n_uv Σ_(i,j) r_uvij e_uvij
//               + Σ_g ( Σ_(v∈G_v) Σ_k f_vk z_vk  +  Σ_(e∈G_e) Σ_(i,j) f_eij y_eij )
//   subject to  (C1) Σ_k s_vk = 1                                for every node v
//               (C2) Σ_j e_uvij = s_ui                           for every edge (u,v), every i
//               (C3) Σ_i e_uvij = s_vj                           for every edge (u,v), every j
//               (C4) Σ_v n_v Σ_k m_vk s_vk
//                    − Σ_g Σ_(v∈G_v) Σ_k a_vk z_vk + Σ_g Σ_(v∈G_v) Σ_k q_vk t_vk  ≤  M − F
//               (C5) z_vk ≤ L_g s_vk,   (C6) Σ_k z_vk = ρ_g      for every member v of g
//               (C7) ρ_g ≤ L_g b_g,     ρ_g ≥ ρmin_g             for every group g
//               (C8) t_vk ≥ s_vk + b_g − 1                       for every member v of g
//               (C9) y_eij ≤ L_g e_eij, Σ_ij y_eij = ρ_g         for every member edge e of g
//               s_vk, e_uvij, b_g ∈ {0, 1};  ρ_g ∈ {0..L_g};  z, y ∈ [0, L_g];  t ∈ [0, 1]
//
// c: seconds of a node's strategy (compute + its own communication); r: seconds of resharding
// between a producer's and a consumer's strategies; m: bytes per device at the memory peak; M:
// the budget; F: bytes that do not depend on the choice. (C2)-(C3) make e the product s_u ⊗ s_v
// without quadratic terms. Recomputation: ρ_g of group g's layers recompute; (C5)-(C6) make
// z_vk = ρ_g s_vk and (C9) y_eij = ρ_g e_eij (s and e are 0/1, so the products are exact), so a
// recomputed layer saves a (its activations less the boundary the checkpoint holds) and costs f
// (its forward and forward resharding again); while a recomputed layer's backward runs its
// activations q are live again (b_g: any layer recomputes; (C8) t = s_v ∧ b_g). CBC solves it
// under a time limit; a greedy choice (cheapest per node given its producers, repaired for
// memory by strategy switches or more recomputed layers, improved by single moves) answers when
// CBC finds nothing in time, and is kept whenever it is better than CBC's incumbent.
#ifndef MAPD_PLANNER_SOLVER_STRATEGY_SOLVER_H_
#define MAPD_PLANNER_SOLVER_STRATEGY_SOLVER_H_

#include <vector>

#include "absl/status/statusor.h"
#include "proto/mapd/v1/solver.pb.h"

namespace mapd {

// Checks sizes: every node has ≥ 1 strategy with as many memory entries as costs; edges name
// existing nodes and have k_src × k_dst costs; multiplicities ≥ 1 (0 is read as 1); recompute
// groups have ≥ 1 layer, members in one group at most with k entries per array, member edges
// join two members of their group.
absl::Status ValidateSolverRequest(const v1::SolverRequest& request);

// Objective (seconds) and memory (bytes per device, fixed part included) of a choice: one
// strategy per node and, per recompute group, how many of its layers recompute (empty: none).
double ObjectiveOf(const v1::SolverRequest& request, const std::vector<int>& choice,
                   const std::vector<int64_t>& recomputed = {});
double MemoryOf(const v1::SolverRequest& request, const std::vector<int>& choice,
                const std::vector<int64_t>& recomputed = {});
// The seconds and bytes that recomputation adds to a choice (bytes negative when it saves).
double RecomputeSecondsOf(const v1::SolverRequest& request, const std::vector<int>& choice,
                          const std::vector<int64_t>& recomputed);
double RecomputeBytesOf(const v1::SolverRequest& request, const std::vector<int>& choice,
                        const std::vector<int64_t>& recomputed);
// The least memory of any choice: each node at its smallest — exact with at most one recompute
// group (the best count), a lower bound with more (every layer recomputed, rematerialization
// left out).
double LeastMemory(const v1::SolverRequest& request);

// Solves with CBC (falling back to greedy). INFEASIBLE is a response status, not an error;
// errors are for malformed requests.
absl::StatusOr<v1::SolverResponse> SolveStrategies(const v1::SolverRequest& request);

// The greedy answer alone (also the fallback).
v1::SolverResponse SolveGreedy(const v1::SolverRequest& request);

}  // namespace mapd

#endif  // MAPD_PLANNER_SOLVER_STRATEGY_SOLVER_H_

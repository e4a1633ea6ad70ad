// Exact elimination of low-degree decisions before the ILP — MAP's form of "followers merged
// into producers". A node v with at most two resharding edges is removed and its cheapest
// choice folded into its neighbours:
//
//   degree 2 (u — v — w):  a new edge u—w with cost  R[i][k] = min_j (C_v[j] + E_uv[i][j] + E_vw[j][k])
//   degree 1 (u — v):      u's cost gains              min_j (C_v[j] + E_uv[i][j])
//   degree 0:              the constant min_j C_v[j]
//
// (C and E are totals: costs times multiplicities.) Parallel edges between two nodes are
// summed into one. The minimum over j is exact for the objective, so the reduced ILP has the
// same optimum; under a memory budget only nodes whose memory does not depend on their choice
// are eliminated (their memory becomes fixed), which keeps it exact there too. Chains of
// elementwise ops, views and norms between matmuls — most of a transformer — collapse this way.
// Members of recompute groups are never eliminated; their member edges keep their recompute
// seconds through merging. After solving, each eliminated node takes its argmin given its neighbours' choices (among
// equally fast strategies the one with the least memory), in the reverse order of elimination.
#ifndef MAPD_PLANNER_SOLVER_ELIMINATION_H_
#define MAPD_PLANNER_SOLVER_ELIMINATION_H_

#include <vector>

#include "proto/mapd/v1/solver.pb.h"

namespace mapd {

class EliminatedRequest {
 public:
  // The request must be valid (ValidateSolverRequest).
  explicit EliminatedRequest(const v1::SolverRequest& request);

  // The reduced problem: surviving nodes (multiplicity 1, total costs), merged edges.
  const v1::SolverRequest& request() const { return reduced_; }
  // Number of original nodes removed.
  int eliminated() const { return static_cast<int>(order_.size()); }
  // A choice for the reduced request as a choice for every original node.
  std::vector<int> Original(const std::vector<int>& reduced_choice) const;

 private:
  struct Removed {
    int node;
    std::vector<double> cost;    // total cost per strategy
    std::vector<double> memory;  // total memory per strategy (ties in cost go to less memory)
    // Up to two neighbours with the edge matrix oriented [neighbour strategy][own strategy].
    std::vector<std::pair<int, std::vector<double>>> neighbours;
  };
  std::vector<int> k_;           // strategies per original node
  std::vector<Removed> order_;   // in elimination order
  std::vector<int> survivor_;    // reduced index → original node
  v1::SolverRequest reduced_;
};

}  // namespace mapd

#endif  // MAPD_PLANNER_SOLVER_ELIMINATION_H_

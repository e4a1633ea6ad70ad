// Removes dominated strategies before the ILP: strategy k of node v is dominated by k' when k'
// costs no more seconds and no more memory, and on every edge at v no more resharding whatever
// the other end picks. Any choice using k turns into one using k' that is no slower and no
// bigger, so the optimum is unchanged; identical strategies keep the first. Repeated until
// nothing changes (removing a neighbour's strategies shortens the rows compared).
#ifndef MAPD_PLANNER_SOLVER_DOMINANCE_H_
#define MAPD_PLANNER_SOLVER_DOMINANCE_H_

#include <vector>

#include "proto/mapd/v1/solver.pb.h"

namespace mapd {

struct PrunedRequest {
  v1::SolverRequest request;            // the same problem with fewer strategies
  std::vector<std::vector<int>> kept;   // per node: original index of each remaining strategy
  // A choice of the pruned request as a choice of the original.
  std::vector<int> Original(const std::vector<int>& choice) const;
};

// The request must be valid (ValidateSolverRequest).
PrunedRequest PruneDominated(const v1::SolverRequest& request);

}  // namespace mapd

#endif  // MAPD_PLANNER_SOLVER_DOMINANCE_H_

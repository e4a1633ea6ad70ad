// The ILP of strategy_solver.h, built and solved with COIN-OR CBC (Debian's coinor-libcbc).
#ifndef MAPD_PLANNER_SOLVER_CBC_BACKEND_H_
#define MAPD_PLANNER_SOLVER_CBC_BACKEND_H_

#include <vector>

#include "absl/status/statusor.h"
#include "proto/mapd/v1/solver.pb.h"

namespace mapd {

enum class CbcOutcome { kOptimal, kFeasible, kInfeasible, kNoSolution };

struct CbcResult {
  CbcOutcome status = CbcOutcome::kNoSolution;
  std::vector<int> choice;
  std::vector<int64_t> recomputed;  // per recompute group
};

// `start` (optional): a feasible choice to warm-start the branch and bound.
absl::StatusOr<CbcResult> SolveWithCbc(const v1::SolverRequest& request, const std::vector<int>* start);

}  // namespace mapd

#endif  // MAPD_PLANNER_SOLVER_CBC_BACKEND_H_

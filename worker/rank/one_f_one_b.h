// The order in which one pipeline stage runs its micro-batches' passes under 1F1B (DESIGN §6b;
// PipeDream-Flush, as Megatron-LM schedules it): stage i of p first runs the forwards of
// w = min(p − 1 − i, m) micro-batches (the warm-up), then alternates one forward and one
// backward until every forward has run, then runs the remaining backwards (the cool-down). So
// stage i keeps at most min(p − i, m) micro-batches' activations at once — what the planner
// charges it — and the last stage runs each backward right after its forward. Torch-free.
#ifndef MAPD_WORKER_RANK_ONE_F_ONE_B_H_
#define MAPD_WORKER_RANK_ONE_F_ONE_B_H_

#include <cstdint>
#include <string>
#include <vector>

namespace mapd {

struct PassAction {
  bool forward = true;
  int64_t micro_batch = 0;
  bool operator==(const PassAction& o) const { return forward == o.forward && micro_batch == o.micro_batch; }
};

// The actions of `stage` (0 ≤ stage < stages) for `micro_batches` ≥ 1, in order: 2m of them.
std::vector<PassAction> OneFOneBSchedule(int stage, int stages, int64_t micro_batches);

// "F0 F1 B0 F2 B1 B2", for tests and traces.
std::string DescribeSchedule(const std::vector<PassAction>& actions);

}  // namespace mapd

#endif  // MAPD_WORKER_RANK_ONE_F_ONE_B_H_

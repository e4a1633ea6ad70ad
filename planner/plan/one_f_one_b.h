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
  int chunk = 0;  // interleaved: which of the stage's chunks of layers (0 under 1F1B)
  bool operator==(const PassAction& o) const {
    return forward == o.forward && micro_batch == o.micro_batch && chunk == o.chunk;
  }
};

// The actions of `stage` (0 ≤ stage < stages) for `micro_batches` ≥ 1, in order: 2m of them.
std::vector<PassAction> OneFOneBSchedule(int stage, int stages, int64_t micro_batches);

// Interleaved 1F1B (Megatron-LM's schedule, Narayanan et al. 2021 §2.2): every stage holds
// `chunks` = V chunks of layers, chunk v of stage d being the model's chunk v·p + d, and runs
// m·V chunk forwards and as many backwards. Forwards go through the chunks in groups of p
// micro-batches (micro-batches g·p … g·p + p − 1 on chunk 0, then on chunk 1, ...), backwards the
// same way from the last chunk down; stage d first runs 2(p − d − 1) + (V − 1)·p forwards (the
// warm-up, at most m·V), then alternates one forward and one backward, then runs the backwards
// left. So stage d keeps at most min(m·V, warm-up + 1) chunk-passes of activations — what the
// planner charges it (pipeline_search.h) — and a step takes (m·V + p − 1) chunk passes of equal
// chunks: the bubble 1/V of 1F1B's. `micro_batches` must be a multiple of `stages` (as Megatron
// requires), `chunks` ≥ 1 (1 is OneFOneBSchedule).
std::vector<PassAction> InterleavedSchedule(int stage, int stages, int chunks, int64_t micro_batches);

// "F0 F1 B0 F2 B1 B2", or with chunks "F0.0 F1.0 F0.1 ..." (micro-batch.chunk), for tests and
// traces.
std::string DescribeSchedule(const std::vector<PassAction>& actions);

}  // namespace mapd

#endif  // MAPD_WORKER_RANK_ONE_F_ONE_B_H_

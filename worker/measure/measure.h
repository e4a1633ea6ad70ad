// Measures real training steps — peak memory through the counting allocator and wall time —
// for comparison with the symbolic profiler's predictions (`mapctl profile --measure`).
#ifndef MAPD_WORKER_MEASURE_MEASURE_H_
#define MAPD_WORKER_MEASURE_MEASURE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/mapd/v1/graph.pb.h"
#include "worker/local/local_training.h"

namespace mapd {

struct MeasuredStep {
  int64_t peak_bytes = 0;  // live-bytes peak during the step, the batch included
  double seconds = 0;
  double loss = 0;
};

struct MeasureResult {
  std::vector<MeasuredStep> steps;  // every step, the first included
  int64_t peak_bytes = 0;           // largest peak of steps 2..N
  double step_seconds = 0;          // median time of steps 2..N
};

// Runs `options.training.steps()` (at least 2) training steps of `graph` (output 0 is the loss) on the CPU
// with the counting allocator installed. The first step allocates the optimizer state (the
// profiler predicts the steady state), so the figures come from steps 2..N. Memory counts from
// before the parameters are made: parameters, optimizer state, the batch, activations,
// gradients and temporaries.
absl::StatusOr<MeasureResult> MeasureTraining(const v1::Graph& graph, const LocalTrainingOptions& options);

}  // namespace mapd

#endif  // MAPD_WORKER_MEASURE_MEASURE_H_

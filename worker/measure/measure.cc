#include "worker/measure/measure.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "worker/memory/counting_allocator.h"
#include "worker/local/trainer_factory.h"

namespace mapd {

absl::StatusOr<MeasureResult> MeasureTraining(const v1::Graph& graph, const LocalTrainingOptions& options) {
  const int64_t steps = options.training.steps();
  if (steps < 2) {
    return absl::InvalidArgumentError(absl::StrCat("measure: steps must be at least 2, got ", steps));
  }
  if (options.device != "cpu") {
    return absl::FailedPreconditionError(
        absl::StrCat("measure: memory is counted on the CPU only; got device '", options.device, "'"));
  }
  CountingCpuAllocator& counter = CountingCpuAllocator::Install();
  auto source = MakeSource(graph, options, c10::Device(c10::kCPU));
  if (!source.ok()) return source.status();
  // The data source's own buffers (a text file, say) are not part of the step.
  const int64_t baseline = counter.live_bytes();
  auto trainer = MakeTrainer(graph, options);
  if (!trainer.ok()) return trainer.status();

  MeasureResult result;
  std::vector<double> times;
  for (int64_t i = 0; i < steps; ++i) {
    TensorMap batch;
    {
      auto next = (*source)->Next();
      if (!next.ok()) return next.status();
      batch = std::move(*next);
    }
    counter.ResetPeak();
    auto step = (*trainer)->Step(batch);
    if (!step.ok()) return step.status();
    MeasuredStep m;
    m.peak_bytes = counter.peak_bytes() - baseline;
    m.seconds = step->seconds;
    m.loss = step->loss;
    result.steps.push_back(m);
    if (i > 0) {
      result.peak_bytes = std::max(result.peak_bytes, m.peak_bytes);
      times.push_back(m.seconds);
    }
  }
  std::sort(times.begin(), times.end());
  result.step_seconds = times[times.size() / 2];
  return result;
}

}  // namespace mapd

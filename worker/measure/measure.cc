#include "worker/measure/measure.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "worker/memory/counting_allocator.h"
#include "worker/runtime/data.h"
#include "worker/runtime/trainer.h"

namespace mapd {

absl::Status MeasureOptions::Validate() const {
  if (steps < 2) return absl::InvalidArgumentError(absl::StrCat("measure: steps must be at least 2, got ", steps));
  if (optimizer != "sgd" && optimizer != "momentum" && optimizer != "adamw") {
    return absl::InvalidArgumentError(absl::StrCat("measure: unknown optimizer '", optimizer, "'"));
  }
  if (!(lr > 0)) return absl::InvalidArgumentError("measure: lr must be positive");
  return absl::OkStatus();
}

namespace {

absl::StatusOr<TrainerOptions> ToTrainerOptions(const MeasureOptions& m) {
  TrainerOptions t;
  t.executor.device = "cpu";
  t.executor.seed = m.seed;
  t.optimizer.kind = m.optimizer == "adamw" ? OptimizerOptions::Kind::kAdamW : OptimizerOptions::Kind::kSgd;
  t.optimizer.momentum = m.optimizer == "momentum" ? 0.9 : 0.0;
  t.optimizer.lr = m.lr;
  return t;
}

}  // namespace

absl::StatusOr<MeasureResult> MeasureTraining(const v1::Graph& graph, const MeasureOptions& options) {
  if (auto st = options.Validate(); !st.ok()) return st;
  CountingCpuAllocator& counter = CountingCpuAllocator::Install();
  auto source_kind = ParseDataSource(options.data);
  if (!source_kind.ok()) return source_kind.status();
  DataOptions data;
  data.source = *source_kind;
  data.path = options.data_path;
  data.seed = options.seed;
  auto trainer_options = ToTrainerOptions(options);
  if (!trainer_options.ok()) return trainer_options.status();
  auto source = MakeDataSource(graph, data, c10::Device(c10::kCPU));
  if (!source.ok()) return source.status();
  // The data source's own buffers (a text file, say) are not part of the step.
  const int64_t baseline = counter.live_bytes();
  auto trainer = Trainer::Create(graph, *trainer_options);
  if (!trainer.ok()) return trainer.status();

  MeasureResult result;
  std::vector<double> times;
  for (int i = 0; i < options.steps; ++i) {
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

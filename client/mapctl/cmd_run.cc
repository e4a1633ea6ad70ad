// `mapctl run`: train a model on this machine (one device) and show its loss step by step;
// several ranks go to cmd_run_ranks.cc.
#include <iostream>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/mapctl/commands.h"
#include "client/mapctl/job_output.h"
#include "client/mapctl/model_loader.h"
#include "client/mapctl/torch_commands.h"
#include "common/bytes.h"
#include "common/data_spec.h"
#include "model/graph/mixed_precision.h"
#include "model/ir/tensor_type.h"
#include "planner/profile/profile_options.h"
#include "planner/sharding/cluster.h"
#include "worker/local/local_training.h"

namespace mapd::cli {

absl::StatusOr<LocalTrainingOptions> MakeTrainingOptions(const RunArgs& args) {
  LocalTrainingOptions options;
  options.training = args.training;
  options.device = args.device;
  if (!args.memory_per_device.empty()) {
    auto cap = ParseBytes(args.memory_per_device);
    if (!cap.ok()) return cap.status();
    options.memory_cap = *cap;
  }
  if (auto st = options.Validate(); !st.ok()) return st;
  return options;
}

std::string FormatEvaluation(int64_t step, double loss, int64_t batches) {
  return absl::StrFormat("eval after step %d  loss %.4f  (%d batch%s, no gradients)\n", step, loss, batches, batches == 1 ? "" : "es");
}

std::string FormatThroughput(const StepItems& items, double seconds) {
  if (items.count <= 0 || seconds <= 0) return "";
  return absl::StrFormat("%10.0f %s/s", static_cast<double>(items.count) / seconds, items.unit);
}

int RunTraining(const RunArgs& args) {
  if (args.model.model.empty() == args.plan.empty()) {
    return ReportError(absl::InvalidArgumentError("give a MODEL, or --plan FILE (a saved plan carries its model), not both"));
  }
  // Micro-batches and checkpoints run on the rank runtime (one rank is a mesh of 1), and so does a
  // memory budget: there the plan is made against it (recomputation, micro-batches where asked),
  // and running out of it is one message with what to give instead.
  if (args.ranks > 1 || !args.plan.empty() || args.training.micro_batches() != "1" || !args.resume.empty() || !args.checkpoint_dir.empty() ||
      !args.memory_per_device.empty()) {
    return RunOnRanks(args);
  }
  auto made = MakeTrainingOptions(args);
  if (!made.ok()) return ReportError(made.status());
  const LocalTrainingOptions& options = *made;
  auto graph = LoadTrainingGraph(args.model.model, args.model.inputs, /*batch_size=*/0, /*seq_len=*/0, args.loss);
  if (!graph.ok()) return ReportError(graph.status());
  if (auto st = InitFrom(args.init_from, *graph); !st.ok()) return ReportError(st);
  // One process is not planned: its device type only picks the precision's default (auto: this
  // host's, a CPU's — fp32), so nothing is measured for it.
  auto precision = ResolvePrecision(args.training.precision(), args.device_type == "auto" ? "cpu" : args.device_type);
  if (!precision.ok()) return ReportError(precision.status());
  if (*precision == Precision::kBf16Mixed) {  // train the mixed-precision graph
    auto mixed = ToBf16Mixed(*std::move(graph));
    if (!mixed.ok()) return ReportError(mixed.status());
    graph = *std::move(mixed);
  }

  const StepItems items = ItemsPerStep(*graph);
  nlohmann::json steps = nlohmann::json::array();
  nlohmann::json evals = nlohmann::json::array();
  double first = 0, total_seconds = 0;
  std::vector<double> losses;
  auto st = TrainLocally(*graph, options, [&](const LocalStep& s) {
    if (s.step == 1) first = s.loss;
    losses.push_back(s.loss);
    total_seconds += s.seconds;
    if (IsDocumentFormat(args.format)) {
      steps.push_back({{"step", s.step}, {"loss", s.loss}, {"seconds", s.seconds}, {"lr", s.lr},
                       {absl::StrCat(items.unit, "_per_second"), s.seconds > 0 ? items.count / s.seconds : 0.0}});
      if (s.device_peak_allocated > 0) {  // a CUDA device's allocator peaks over the step
        steps.back()["device_peak_allocated_bytes"] = s.device_peak_allocated;
        steps.back()["device_peak_reserved_bytes"] = s.device_peak_reserved;
      }
    } else if (s.step == 1 || s.step % args.log_every == 0 || s.step == options.training.steps()) {
      std::cout << absl::StrFormat("step %6d  loss %.4f  lr %.3g  %8.1f ms  %s\n", s.step, s.loss, s.lr, s.seconds * 1e3,
                                   FormatThroughput(items, s.seconds))
                << std::flush;
    }
    if (!s.evaluated) return;
    if (IsDocumentFormat(args.format)) {
      evals.push_back({{"step", s.step}, {"loss", s.eval_loss}, {"batches", options.training.eval_batches()}});
    } else {
      std::cout << FormatEvaluation(s.step, s.eval_loss, options.training.eval_batches()) << std::flush;
    }
  });
  if (!st.ok()) return ReportError(st);
  const size_t tail = std::min<size_t>(10, losses.size());
  double last = 0;
  for (size_t i = losses.size() - tail; i < losses.size(); ++i) last += losses[i] / static_cast<double>(tail);
  if (IsDocumentFormat(args.format)) {
    nlohmann::json j = {{"model", graph->name()},   {"steps", steps},        {"evals", evals},  {"first_loss", first},
                        {"final_loss_mean", last},  {"seconds", total_seconds}};
    PrintDocument(args.format, j);
    return kExitOk;
  }
  std::cout << absl::StrFormat("trained %d steps in %.1f s: loss %.4f -> %.4f (mean of the last %d)\n", options.training.steps(),
                               total_seconds, first, last, static_cast<int>(tail));
  return kExitOk;
}

}  // namespace mapd::cli

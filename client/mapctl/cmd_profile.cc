// `mapctl profile`: memory and compute of one training step, predicted from the IR.
#include <iostream>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/mapctl/command_table.h"
#include "client/mapctl/job_output.h"
#include "client/mapctl/cli_checks.h"
#include "client/mapctl/commands.h"
#include "client/mapctl/model_loader.h"
#include "client/mapctl/table.h"
#include "common/bytes.h"
#include "common/file_io.h"
#include "model/ir/graph.h"
#include "planner/profile/profiler.h"
#include "planner/profile/timeline_svg.h"
#include "client/mapctl/torch_commands.h"

namespace mapd::cli {

namespace {

// "FLOPs by formula 100%" or "FLOPs by formula 97.1%, estimated 2.9% (12 generic nodes of no
// known formula, costed as memory-bound)".
std::string FlopsShares(const ProfileReport& r) {
  const double total = r.training_flops();
  const double estimated = total > 0 ? r.estimated_flops / total : 0.0;
  std::string s = absl::StrFormat("FLOPs by formula %.1f%%", 100.0 * (1.0 - estimated));
  if (r.estimated_flops > 0) absl::StrAppendFormat(&s, ", estimated %.1f%% (generic ops of no known formula, costed as memory-bound)", 100.0 * estimated);
  if (r.generic_nodes > 0) absl::StrAppend(&s, "; ", r.generic_nodes, " node(s) by the generic ATen path");
  return s;
}

nlohmann::json BreakdownJson(const MemoryBreakdown& b) {
  return {{"parameters", b.parameters},
          {"gradients", b.gradients},
          {"optimizer_states", b.optimizer_states},
          {"saved_activations", b.saved_activations},
          {"transients", b.transients}};
}

std::string Seconds(double s) {
  if (s >= 1) return absl::StrFormat("%.3f s", s);
  if (s >= 1e-3) return absl::StrFormat("%.3f ms", s * 1e3);
  return absl::StrFormat("%.1f us", s * 1e6);
}

std::string Flops(double f) {
  if (f >= 1e15) return absl::StrFormat("%.2f PFLOP", f / 1e15);
  if (f >= 1e12) return absl::StrFormat("%.2f TFLOP", f / 1e12);
  if (f >= 1e9) return absl::StrFormat("%.2f GFLOP", f / 1e9);
  return absl::StrFormat("%.2f MFLOP", f / 1e6);
}

}  // namespace

int RunProfile(const ProfileArgs& args) {
  ProfileOptions options;
  auto opt = ParseOptimizer(args.optimizer);
  if (!opt.ok()) return ReportError(opt.status());
  options.optimizer = *opt;
  // auto: this host measured where steps run here (--measure), else the catalogue's cpu.
  auto device_type = args.device_type != "auto" ? absl::StatusOr<std::string>(args.device_type)
                     : args.measure            ? ResolveDeviceType("auto")
                                               : absl::StatusOr<std::string>("cpu");
  if (!device_type.ok()) return ReportError(device_type.status());
  auto prec = ResolvePrecision(args.precision, *device_type);
  if (!prec.ok()) return ReportError(prec.status());
  options.precision = *prec;
  auto device = LoadDeviceProfile(*device_type);
  if (!device.ok()) return ReportError(device.status());
  options.device = *device;
  auto trainable = LoadTrainingGraph(args.model.model, args.model.inputs, args.batch_size, args.seq_len, args.loss);
  if (!trainable.ok()) return ReportError(trainable.status());
  auto loaded = Graph::Create(*std::move(trainable));
  if (!loaded.ok()) return ReportError(loaded.status());
  // bf16: the mixed-precision graph, profiled and (--measure) run.
  auto graph = GraphAtPrecision(*loaded, options.precision);
  if (!graph.ok()) return ReportError(graph.status());
  auto report = ProfileTrainingStep(*graph, options);
  if (!report.ok()) return ReportError(report.status());
  const ProfileReport& r = *report;
  std::optional<MeasureResult> measured;
  if (args.measure) {
    auto result = MeasureSteps(graph->proto(), args.steps, args.optimizer);
    if (!result.ok()) return ReportError(result.status());
    measured = *result;
  }
  auto error = [](double predicted, double measured) { return measured > 0 ? (predicted - measured) / measured : 0.0; };

  if (!args.timeline.empty()) {
    auto st = WriteStringToFileAtomic(args.timeline, RenderTimelineSvg(r, absl::StrCat(graph->name(), " on ", options.device.name)));
    if (!st.ok()) return ReportError(st);
  }

  if (IsDocumentFormat(args.format)) {
    nlohmann::json j;
    j["model"] = graph->name();
    j["device"] = options.device.name;
    j["optimizer"] = OptimizerName(options.optimizer);
    j["precision"] = PrecisionName(options.precision);
    j["params"] = r.params;
    j["parameter_bytes"] = r.parameter_bytes;
    j["flops_per_step"] = r.flops_per_step();
    j["training_flops"] = r.training_flops();
    j["forward_flops"] = r.forward_flops;
    j["backward_flops"] = r.backward_flops;
    j["optimizer_flops"] = r.optimizer_flops;
    // Of forward + backward: counted by a formula, and estimated (generic ops of no known formula).
    j["flops_by_formula_share"] = r.training_flops() > 0 ? 1.0 - r.estimated_flops / r.training_flops() : 1.0;
    j["flops_estimated_share"] = r.training_flops() > 0 ? r.estimated_flops / r.training_flops() : 0.0;
    j["generic_nodes"] = r.generic_nodes;
    j["predicted_peak_bytes"] = r.predicted_peak_bytes;
    j["peak_breakdown"] = BreakdownJson(r.peak_breakdown);
    j["peak_phase"] = PhaseName(r.peak_phase);
    j["peak_at"] = r.peak_at;
    j["predicted_step_seconds"] = r.predicted_step_seconds();
    j["forward_seconds"] = r.forward_seconds;
    j["backward_seconds"] = r.backward_seconds;
    j["optimizer_seconds"] = r.optimizer_seconds;
    j["profile_seconds"] = r.profile_seconds;
    j["fits_device_memory"] = r.predicted_peak_bytes <= options.device.memory_bytes;
    j["layers"] = nlohmann::json::array();
    for (const auto& l : r.layers) {
      j["layers"].push_back({{"layer", l.layer}, {"nodes", l.nodes}, {"flops", l.flops}, {"seconds", l.seconds},
                             {"saved_bytes", l.saved_bytes}, {"parameter_bytes", l.parameter_bytes}});
    }
    if (measured) {
      j["measured_peak_bytes"] = measured->peak_bytes;
      j["measured_step_seconds"] = measured->step_seconds;
      j["peak_error"] = error(static_cast<double>(r.predicted_peak_bytes), static_cast<double>(measured->peak_bytes));
      j["step_time_error"] = error(r.predicted_step_seconds(), measured->step_seconds);
      j["measured_steps"] = nlohmann::json::array();
      for (const auto& s : measured->steps) {
        j["measured_steps"].push_back({{"peak_bytes", s.peak_bytes}, {"seconds", s.seconds}, {"loss", s.loss}});
      }
    }
    if (args.ops) {
      j["ops"] = nlohmann::json::array();
      for (const auto& o : r.ops) {
        j["ops"].push_back({{"node", o.node}, {"op", o.op}, {"scope", o.scope}, {"forward_flops", o.forward_flops},
                            {"backward_flops", o.backward_flops}, {"flops_estimated", o.flops_estimated}, {"bytes", o.bytes},
                            {"forward_seconds", o.forward_seconds}, {"backward_seconds", o.backward_seconds},
                            {"saved_bytes", o.saved_bytes}});
      }
    }
    PrintDocument(args.format, j);
    return kExitOk;
  }

  Table layers({"LAYER", "NODES", "FLOPS", "TIME", "SAVED", "PARAMS"});
  for (const auto& l : r.layers) {
    layers.Row({l.layer, absl::StrCat(l.nodes), Flops(l.flops), Seconds(l.seconds), FormatBytes(l.saved_bytes),
                FormatBytes(l.parameter_bytes)});
  }
  layers.Print(std::cout);
  const auto& b = r.peak_breakdown;
  std::cout << "\nModel:        " << graph->name() << "  (" << r.params << " parameters)\n"
            << "Step:         " << OptimizerName(options.optimizer) << ", " << PrecisionName(options.precision) << ", on "
            << options.device.name << "\n"
            << "FLOPs/step:   " << Flops(r.flops_per_step()) << " (forward " << Flops(r.forward_flops) << ", backward "
            << Flops(r.backward_flops) << ", optimizer " << Flops(r.optimizer_flops) << ")\n"
            << "              " << FlopsShares(r) << "\n"
            << "Peak memory:  " << FormatBytes(r.predicted_peak_bytes) << " in " << PhaseName(r.peak_phase) << " at "
            << r.peak_at << (r.predicted_peak_bytes > options.device.memory_bytes ? "  — does NOT fit " : "  — fits ")
            << FormatBytes(options.device.memory_bytes) << "\n"
            << "  parameters " << FormatBytes(b.parameters) << ", gradients " << FormatBytes(b.gradients)
            << ", optimizer states " << FormatBytes(b.optimizer_states) << ", saved activations "
            << FormatBytes(b.saved_activations) << ", transients " << FormatBytes(b.transients) << "\n"
            << "Step time:    " << Seconds(r.predicted_step_seconds()) << " (forward " << Seconds(r.forward_seconds)
            << ", backward " << Seconds(r.backward_seconds) << ", optimizer " << Seconds(r.optimizer_seconds) << ")\n"
            << "Profiled in:  " << Seconds(r.profile_seconds) << "\n";
  if (measured) {
    std::cout << absl::StrFormat("Measured:     peak %s (predicted %+.1f%%), step %s (predicted %+.1f%%), over steps 2..%d on this CPU\n",
                                 FormatBytes(measured->peak_bytes),
                                 100 * error(static_cast<double>(r.predicted_peak_bytes), static_cast<double>(measured->peak_bytes)),
                                 Seconds(measured->step_seconds), 100 * error(r.predicted_step_seconds(), measured->step_seconds),
                                 args.steps);
  }
  if (!args.timeline.empty()) std::cout << "Timeline:     " << args.timeline << "\n";
  return kExitOk;
}

void AddProfileCommand(CLI::App& app, Commands& out) {
  auto args = std::make_shared<ProfileArgs>();
  CLI::App* profile = app.add_subcommand(
      "profile", "Predict memory (peak and its composition) and compute of one training step, without running it");
  profile->add_option("MODEL", args->model.model, "Zoo spec, .pt archive or .pb/.json graph")->required();
  profile->add_option("--input", args->model.inputs, "Input spec NAME:DTYPE[D0,D1,...] (repeatable)");
  profile->add_option("--batch-size", args->batch_size, "Batch size (zoo models)")->check(AtLeastOne());
  profile->add_option("--seq-len", args->seq_len, "Sequence length (zoo language models)")->check(AtLeastOne());
  profile->add_option("--loss", args->loss,
                      "How the step gets its loss: auto (the model's scalar output, else cross_entropy on its logits), "
                      "output, cross_entropy, mse")
      ->capture_default_str();
  profile->add_option("--optimizer", args->optimizer, "sgd | momentum | adamw")->capture_default_str();
  profile->add_option("--precision", args->precision, "auto (bf16 on GPU device types, fp32 on cpu) | fp32 | bf16 (mixed: bf16 weights, activations and gradients; fp32 master weights, optimizer states and loss)")->capture_default_str();
  profile->add_option("--device-type", args->device_type,
                      "auto (with --measure: this host, measured once and cached; else cpu) | cpu | a100-40g | a100-80g | "
                      "h100-80g | h200-141g, or a JSON profile from `mapctl calibrate`")
      ->capture_default_str();
  profile->add_flag("--measure", args->measure,
                    "Also run real training steps on this CPU (LibTorch) and compare predicted with measured peak "
                    "memory and step time");
  profile->add_option("--steps", args->steps, "Steps to run with --measure (the first warms up)")
      ->check(CLI::Range(2, 1000))
      ->capture_default_str();
  profile->add_flag("--ops", args->ops, "Include one row per op in the JSON");
  profile->add_option("-o,--output", args->format, "Output format")->check(CLI::IsMember({"table", "json", "yaml"}))->capture_default_str();
  profile->add_option("--timeline", args->timeline, "Write live memory over the step as an SVG picture");
  profile->footer(kModelHelp);

  out.push_back({profile, [args] { return RunProfile(*args); }});
}

}  // namespace mapd::cli

// `mapctl plan`: the sharding plan that trains fastest within the memory budget — mesh shape,
// ZeRO stage and one strategy per operator (planner/plan/planner.h) — with its predicted step
// time, memory breakdown and communication, beside the baselines on the same cost model.
#include <fstream>
#include <iostream>
#include <memory>
#include <map>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/mapctl/command_table.h"
#include "client/mapctl/job_output.h"
#include "client/mapctl/cli_checks.h"
#include "client/mapctl/commands.h"
#include "client/mapctl/torch_commands.h"
#include "client/mapctl/model_loader.h"
#include "client/mapctl/table.h"
#include "common/bytes.h"
#include "common/file_io.h"
#include "model/ir/graph.h"
#include "planner/plan/describe.h"
#include "planner/plan/planner.h"
#include "planner/plan/report_html.h"
#include "planner/profile/profiler.h"
#include "planner/runnable/plan_request.h"
#include "planner/runnable/memory_margin.h"
#include "planner/runnable/runnable_plan.h"
#include "worker/calibrate/calibration_cache.h"

namespace mapd::cli {

namespace {

std::string MeshString(const std::vector<int64_t>& mesh) { return absl::StrJoin(mesh, "x"); }

std::string Ms(double seconds) { return absl::StrFormat("%.1f ms", seconds * 1e3); }

std::string Bytes(double bytes) { return FormatBytes(static_cast<int64_t>(bytes)); }

std::string SequenceParallelString(int norms) {
  return norms == 0 ? "no" : absl::StrCat("yes (", norms, " norms split on the sequence)");
}

nlohmann::json CandidateJson(const Graph& graph, const PlanCandidate& c, int64_t global_batch) {
  nlohmann::json j = {{"name", c.name},
                      {"mesh", c.mesh},
                      {"zero_stage", c.zero_stage},
                      {"micro_batches", c.micro_batches},
                      {"micro_batch_size", c.micro_batches > 0 ? global_batch / c.micro_batches : global_batch},
                      {"applicable", c.applicable},
                      {"fits", c.fits}};
  if (!c.applicable) {
    j["note"] = c.note;
    j["predicted_step_seconds"] = nullptr;
    j["predicted_peak_bytes"] = nullptr;
    return j;
  }
  j["predicted_step_seconds"] = c.cost.step_seconds;
  j["predicted_peak_bytes"] = static_cast<int64_t>(c.cost.peak_bytes());
  j["recomputed_layers"] = c.recomputed_layers;
  j["sequence_parallel"] = SequenceParallelNorms(graph, c.strategies) > 0;
  j["solver_status"] = v1::SolverResponse::Status_Name(c.solver_status);
  return j;
}

nlohmann::json StageJson(const StagePlan& s) {
  return {{"layers", {s.first_name, s.last_name}},
          {"first_layer", s.first_layer},
          {"end_layer", s.end_layer},
          {"mesh", s.plan.mesh},
          {"zero_stage", s.plan.zero_stage},
          {"micro_batches_in_flight", s.in_flight},
          {"recomputed_layers", s.plan.recomputed_layers.size()},
          {"predicted_pass_seconds", s.pass_seconds},
          {"predicted_once_seconds", s.once_seconds},
          {"predicted_send_seconds", s.send_seconds},
          {"predicted_peak_bytes", static_cast<int64_t>(s.plan.cost.peak_bytes())},
          {"fits", s.plan.fits}};
}

nlohmann::json PipelineJson(const PipelinePlan& p, int64_t global_batch) {
  nlohmann::json j = {{"name", p.name},
                      {"pipeline_stages", p.stages},
                      {"stage_mesh", p.stage_mesh},
                      {"micro_batches", p.micro_batches},
                      {"micro_batch_size", p.micro_batches > 0 ? global_batch / p.micro_batches : global_batch},
                      {"schedule", p.schedule},
                      {"virtual_stages", p.virtual_stages},
                      {"applicable", p.applicable},
                      {"fits", p.fits}};
  if (!p.applicable || p.pruned) {
    j["note"] = p.note;
    if (p.pruned) {
      j["pruned"] = true;
      j["lower_bound_step_seconds"] = p.step_seconds;
    }
    return j;
  }
  j["predicted_step_seconds"] = p.step_seconds;
  j["predicted_peak_bytes"] = static_cast<int64_t>(p.peak_bytes);
  j["bubble_fraction"] = p.bubble_fraction;
  j["stages"] = nlohmann::json::array();
  for (const StagePlan& s : p.stage_plans) j["stages"].push_back(StageJson(s));
  return j;
}

// The stages of a pipeline plan, one row each.
void PrintStages(const PipelinePlan& p) {
  Table t({"STAGE", "LAYERS", "MESH", "ZERO", "RECOMPUTED", "IN FLIGHT", "PASS", "SEND", "ONCE", "PEAK/DEVICE", "FITS"});
  for (size_t i = 0; i < p.stage_plans.size(); ++i) {
    const StagePlan& s = p.stage_plans[i];
    t.Row({std::to_string(i), s.LayerRange(), MeshString(s.plan.mesh), std::to_string(s.plan.zero_stage),
           std::to_string(s.plan.recomputed_layers.size()), std::to_string(s.in_flight), Ms(s.pass_seconds),
           Ms(s.send_seconds), Ms(s.once_seconds), Bytes(s.plan.cost.peak_bytes()), s.plan.fits ? "yes" : "no"});
  }
  t.Print(std::cout);
}

// "layers.1, layers.2, …, layers.28" — the first and last few of a long list.
std::string LayerList(const std::vector<std::string>& layers) {
  if (layers.size() <= 6) return absl::StrJoin(layers, ", ");
  return absl::StrCat(absl::StrJoin(layers.begin(), layers.begin() + 3, ", "), ", ..., ",
                      absl::StrJoin(layers.end() - 2, layers.end(), ", "));
}

// "4 × 384 samples" (passes × samples per pass).
std::string MicroBatchesString(int64_t m, int64_t global_batch) {
  return absl::StrCat(m, " x ", m > 0 ? global_batch / m : global_batch);
}

}  // namespace

// The plan without stages: its layers' strategies, mesh, memory and communication.
void PrintFlatPlan(const Graph& g, const PlanResult& r, const PlannerOptions& options) {
  const Graph* graph = &g;
  const PlanResult* result = &r;
  const PlanCandidate& plan = r.plan;
  const Cluster& cluster = r.cluster;
  const ChoiceCost& cost = plan.cost;
  const int sequence_parallel_norms = SequenceParallelNorms(g, plan.strategies);
  Table layers({"LAYER", "OP", "STRATEGY", "COUNT"});
  for (const LayerSummary& r : SummarizeLayers(*graph, plan.strategies)) {
    layers.Row({r.layer, graph->node(r.node).op(), r.words, std::to_string(r.count)});
  }
  layers.Print(std::cout);

  std::vector<std::string> axes;
  for (int a = 0; a < cluster.num_axes(); ++a) {
    axes.push_back(absl::StrCat("axis ", a, ": ", cluster.mesh[a], " devices, ",
                                cluster.links[a].inter_node ? "across nodes" : "inside a node"));
  }
  std::cout << "\nMesh:         " << cluster.MeshString() << " " << cluster.device.name << " (" << absl::StrJoin(axes, "; ")
            << ")\n"
            << "ZeRO:         " << (plan.zero_stage == 0 ? std::string("off") : absl::StrCat("stage ", plan.zero_stage))
            << "\n"
            << "Micro-batches: " << MicroBatchesString(plan.micro_batches, result->global_batch) << " samples per step"
            << (plan.micro_batches > 1 ? " (gradients accumulated, reduced and applied once)" : "")
            << (result->micro_batch_note.empty() ? std::string() : absl::StrCat(" (only 1 searched: ", result->micro_batch_note, ")"))
            << "\n"
            << "Sequence par.: " << SequenceParallelString(sequence_parallel_norms) << "\n"
            << "Precision:    "
            << (options.profile.precision == Precision::kBf16Mixed
                    ? "bf16 mixed (bf16 weights, activations, gradients; fp32 master weights, optimizer states and loss)"
                    : "fp32")
            << "\n"
            << "Recompute:    "
            << (plan.recomputed_layers.empty()
                    ? std::string("none (every activation kept for backward)")
                    : absl::StrCat(plan.recomputed_layers.size(), " layer(s): ", LayerList(plan.recomputed_layers), " (",
                                   Ms(cost.recompute_seconds), " more per step, ", Bytes(-cost.recompute_bytes),
                                   " less per device)"))
            << "\n"
            << "Step time:    " << Ms(cost.step_seconds) << " predicted (compute " << Ms(cost.compute_seconds)
            << ", communication " << Ms(cost.comm_seconds)
            << (cost.recompute_seconds > 0 ? absl::StrCat(", recompute ", Ms(cost.recompute_seconds)) : std::string())
            << ") by the search's model; a run's and a job's figure is its rank programs' (each op of each rank profiled, "
               "a collective per gradient bucket at its latency), which the ranks are measured against\n"
            << "Memory:       " << Bytes(cost.peak_bytes()) << " per device predicted, of "
            << FormatBytes(cluster.memory_per_device) << ": parameters " << Bytes(cost.parameter_bytes) << ", gradients "
            << Bytes(cost.gradient_bytes) << ", optimizer states " << Bytes(cost.optimizer_bytes) << ", activations "
            << Bytes(cost.activation_bytes + cost.recompute_bytes);
  if (cost.fixed_bytes > 0) std::cout << ", gathered parameters " << Bytes(cost.fixed_bytes);
  std::cout << "\nCommunication per device per step:";
  for (int k = 0; k < 4; ++k) {
    std::cout << (k ? ", " : " ") << CollectiveName(static_cast<CollectiveKind>(k)) << " " << Bytes(cost.comm_bytes[k]);
  }
  if (!result->adopted_note.empty()) std::cout << "\nNote:         " << result->adopted_note;
  std::cout << absl::StrFormat(
      "\nSearch:       %.2f s; %d mesh shape(s) solved, %d pruned by their lower bound; %s with %d decisions for %d "
      "operators (repeated layers shared)\n",
      result->search_seconds, result->meshes_solved, result->meshes_pruned,
      v1::SolverResponse::Status_Name(plan.solver_status), plan.decisions, graph->num_nodes());

}

namespace {

// The planner's options from `plan`'s flags: the choices `run` and a job make too
// (planner/runnable/plan_request.h), and the search's own settings.
absl::StatusOr<PlannerOptions> PlanOptionsOf(const PlanArgs& args) {
  auto device_type = ResolveDeviceType(args.device_type);  // auto: this host, measured
  if (!device_type.ok()) return device_type.status();
  auto choices = ChoicesFromFlags(args.devices, args.mesh, *device_type, args.memory_per_device);
  if (!choices.ok()) return choices.status();
  choices->optimizer = args.optimizer;
  choices->precision = args.precision;
  choices->zero = args.zero;
  choices->recompute = args.recompute;
  choices->micro_batches = args.micro_batches;
  choices->pipeline_stages = args.pipeline_stages;
  choices->pin = args.pin;
  auto request = PlanRequestOf(*choices);
  if (!request.ok()) return request.status();
  PlannerOptions options = request->planner;
  options.cluster.gpus_per_node = args.gpus_per_node;
  options.time_limit_seconds = args.time_limit;
  options.relative_gap = args.gap;
  if (auto st = options.Validate(); !st.ok()) return st;
  if (auto c = MakeCluster(options.cluster); !c.ok()) return c.status();
  return options;
}

// With pins: what was pinned, and the name of the configuration that keeps them (a baseline or a
// pipeline baseline of the same output).
void AddPinsJson(nlohmann::json& j, const PlanResult& result, const PlannerOptions& options) {
  if (options.pins.empty()) return;
  j["pins"] = options.pins.ToString();
  j["pinned"] = result.pinned_name;
}

// -o json of a pipeline plan: the pipeline, with the keys a plan without stages has for it as a whole.
nlohmann::json PipelinePlanJson(const Graph* graph, const PlanResult* result, const PlannerOptions& options) {
  const PipelinePlan* pipeline = &*result->pipeline;
  const PlanCandidate& plan = result->plan;
  const Cluster& cluster = result->cluster;
  nlohmann::json j = PipelineJson(*pipeline, result->global_batch);
  // The keys a plan without stages has, for the pipeline as a whole.
  std::vector<std::string> recomputed;
  int zero = 0;
  for (const StagePlan& st : pipeline->stage_plans) {
    recomputed.insert(recomputed.end(), st.plan.recomputed_layers.begin(), st.plan.recomputed_layers.end());
    zero = std::max(zero, st.plan.zero_stage);
  }
  j["mesh"] = pipeline->stage_mesh;
  j["zero_stage"] = zero;
  j["recomputed_layers"] = recomputed;
  j["micro_batch_counts_searched"] = result->micro_batch_counts;
  j["model"] = graph->name();
  j["device"] = cluster.device.name;
  j["devices"] = pipeline->devices();
  j["global_batch"] = result->global_batch;
  j["precision"] = PrecisionName(options.profile.precision);
  j["memory_per_device"] = cluster.memory_per_device;
  j["solve_seconds"] = result->search_seconds;
  j["without_stages"] = CandidateJson(*graph, plan, result->global_batch);
  j["pipelines"] = nlohmann::json::array();
  for (const auto& p : result->pipelines) j["pipelines"].push_back(PipelineJson(p, result->global_batch));
  j["pipeline_baselines"] = nlohmann::json::array();
  for (const auto& b : result->pipeline_baselines) j["pipeline_baselines"].push_back(PipelineJson(b, result->global_batch));
  j["baselines"] = nlohmann::json::array();
  for (const auto& b : result->baselines) j["baselines"].push_back(CandidateJson(*graph, b, result->global_batch));
  AddPinsJson(j, *result, options);
  return j;
}

// -o json of a plan without stages.
nlohmann::json FlatPlanJson(const Graph* graph, const PlanResult* result, const PlannerOptions& options) {
  const PlanCandidate& plan = result->plan;
  const Cluster& cluster = result->cluster;
  const ChoiceCost& cost = plan.cost;
  const int sequence_parallel_norms = SequenceParallelNorms(*graph, plan.strategies);
  nlohmann::json j;
  j["model"] = graph->name();
  j["pipeline_stages"] = 1;
  j["device"] = cluster.device.name;
  j["devices"] = cluster.num_devices();
  j["mesh"] = plan.mesh;
  j["zero_stage"] = plan.zero_stage;
  j["global_batch"] = result->global_batch;
  j["micro_batches"] = plan.micro_batches;
  j["micro_batch_size"] = plan.micro_batches > 0 ? result->global_batch / plan.micro_batches : result->global_batch;
  j["micro_batch_counts_searched"] = result->micro_batch_counts;
  if (!result->micro_batch_note.empty()) j["micro_batch_note"] = result->micro_batch_note;
  if (!result->adopted_note.empty()) j["adopted_note"] = result->adopted_note;
  j["precision"] = PrecisionName(options.profile.precision);
  j["sequence_parallel"] = sequence_parallel_norms > 0;
  j["sequence_parallel_norms"] = sequence_parallel_norms;
  j["memory_per_device"] = cluster.memory_per_device;
  j["fits"] = result->fits;
  j["predicted_step_seconds"] = cost.step_seconds;
  j["predicted_compute_seconds"] = cost.compute_seconds;
  j["predicted_communication_seconds"] = cost.comm_seconds;
  j["predicted_recompute_seconds"] = cost.recompute_seconds;
  j["recomputed_layers"] = plan.recomputed_layers;
  j["predicted_peak_bytes"] = static_cast<int64_t>(cost.peak_bytes());
  j["memory_breakdown"] = {{"parameters", static_cast<int64_t>(cost.parameter_bytes)},
                           {"gradients", static_cast<int64_t>(cost.gradient_bytes)},
                           {"optimizer_states", static_cast<int64_t>(cost.optimizer_bytes)},
                           {"activations", static_cast<int64_t>(cost.activation_bytes + cost.recompute_bytes)},
                           {"gathered_parameters", static_cast<int64_t>(cost.fixed_bytes)}};
  nlohmann::json comm;
  for (int k = 0; k < 4; ++k) comm[CollectiveName(static_cast<CollectiveKind>(k))] = static_cast<int64_t>(cost.comm_bytes[k]);
  j["communication_bytes"] = comm;
  j["solve_seconds"] = result->search_seconds;
  j["solver_status"] = v1::SolverResponse::Status_Name(plan.solver_status);
  j["decisions"] = plan.decisions;
  j["meshes_solved"] = result->meshes_solved;
  j["meshes_pruned"] = result->meshes_pruned;
  j["alternatives"] = nlohmann::json::array();
  for (const auto& a : result->alternatives) j["alternatives"].push_back(CandidateJson(*graph, a, result->global_batch));
  j["pruned"] = nlohmann::json::array();
  for (const auto& p : result->pruned) {
    j["pruned"].push_back({{"mesh", p.mesh}, {"lower_bound_step_seconds", p.cost.step_seconds}, {"note", p.note}});
  }
  j["baselines"] = nlohmann::json::array();
  for (const auto& b : result->baselines) j["baselines"].push_back(CandidateJson(*graph, b, result->global_batch));
  j["pipelines"] = nlohmann::json::array();
  for (const auto& p : result->pipelines) j["pipelines"].push_back(PipelineJson(p, result->global_batch));
  j["pipeline_baselines"] = nlohmann::json::array();
  for (const auto& b : result->pipeline_baselines) j["pipeline_baselines"].push_back(PipelineJson(b, result->global_batch));
  if (!result->pipeline_note.empty()) j["pipeline_note"] = result->pipeline_note;
  j["layers"] = nlohmann::json::array();
  for (const LayerSummary& r : SummarizeLayers(*graph, plan.strategies)) {
    j["layers"].push_back({{"layer", r.layer},
                           {"op", graph->node(r.node).op()},
                           {"strategy", r.words},
                           {"placements", plan.strategies[r.node].PlacementsString()},
                           {"count", r.count}});
  }
  j["nodes"] = nlohmann::json::array();
  for (int n = 0; n < graph->num_nodes(); ++n) {
    const Strategy& s = plan.strategies[n];
    j["nodes"].push_back({{"node", graph->node(n).name()}, {"op", graph->node(n).op()}, {"strategy", s.ToString()},
                          {"placements", s.PlacementsString()}});
  }
  AddPinsJson(j, *result, options);
  return j;
}

// The tables: the plan (pipeline or not), the mesh shapes, the baselines and the pipelines.
void PrintPlanTables(const Graph* graph, const PlanResult* result, const PlannerOptions& options) {
  const PipelinePlan* pipeline = result->pipeline ? &*result->pipeline : nullptr;
  const Cluster& cluster = result->cluster;
  const ChoiceCost& cost = result->plan.cost;
  const double chosen_step = pipeline != nullptr ? pipeline->step_seconds : cost.step_seconds;
  if (pipeline != nullptr) {
    PrintStages(*pipeline);
    std::cout << "\nPipeline:     " << pipeline->stages << " stages, " << pipeline->schedule << ", each on "
              << MeshString(pipeline->stage_mesh) << " " << cluster.device.name << " ("
              << pipeline->devices() / pipeline->stages << " devices)\n"
              << "Micro-batches: " << MicroBatchesString(pipeline->micro_batches, result->global_batch)
              << " samples per step, streamed through the stages\n"
              << "Step time:    " << Ms(pipeline->step_seconds) << " predicted (bubble "
              << absl::StrFormat("%.1f%%", 100 * pipeline->bubble_fraction) << " of the stages' time; without stages "
              << (result->fits ? Ms(cost.step_seconds) : std::string("nothing fits")) << ")\n"
              << "Memory:       " << Bytes(pipeline->peak_bytes) << " per device predicted at the fullest stage, of "
              << FormatBytes(cluster.memory_per_device) << "\n"
              << absl::StrFormat("Search:       %.2f s; %d (stages, mesh, micro-batches) solved, %d pruned by their lower bound\n",
                                 result->search_seconds, result->pipeline_configs_solved, result->pipeline_configs_pruned);
  } else {
    PrintFlatPlan(*graph, *result, options);
  }
  std::cout << "\nMesh shapes (MAP's best on each):\n";
  Table alts({"MESH", "ZERO", "MICRO-BATCHES", "RECOMPUTED", "STEP", "PEAK/DEVICE", "FITS"});
  for (const auto& a : result->alternatives) {
    alts.Row({MeshString(a.mesh), std::to_string(a.zero_stage), MicroBatchesString(a.micro_batches, result->global_batch),
              std::to_string(a.recomputed_layers.size()), Ms(a.cost.step_seconds), Bytes(a.cost.peak_bytes()), a.fits ? "yes" : "no"});
  }
  for (const auto& p : result->pruned) {
    alts.Row({MeshString(p.mesh), "-", "-", "-", absl::StrCat(">= ", Ms(p.cost.step_seconds)), "-", "pruned"});
  }
  alts.Print(std::cout);
  std::cout << "\nBaselines (same cost model):\n";
  Table base({"BASELINE", "MESH", "MICRO-BATCHES", "STEP", "PEAK/DEVICE", "FITS", "MAP SPEEDUP"});
  for (const auto& b : result->baselines) {
    if (!b.applicable) {
      base.Row({b.name, MeshString(b.mesh), "-", "-", "-", "n/a", b.note});
      continue;
    }
    base.Row({b.name, MeshString(b.mesh), MicroBatchesString(b.micro_batches, result->global_batch), Ms(b.cost.step_seconds),
              Bytes(b.cost.peak_bytes()), b.fits ? "yes" : "no", absl::StrFormat("%.2fx", b.cost.step_seconds / chosen_step)});
  }
  base.Print(std::cout);
  if (!result->pipelines.empty() || !result->pipeline_baselines.empty()) {
    std::cout << "\nPipeline stages (MAP's best per stage count), and Megatron TP x PP x DP (same cost model):\n";
    Table pipes({"PLAN", "STAGES x MESH", "MICRO-BATCHES", "STEP", "BUBBLE", "PEAK/DEVICE", "FITS", "MAP SPEEDUP"});
    for (const auto* list : {&result->pipelines, &result->pipeline_baselines}) {
      for (const PipelinePlan& p : *list) {
        if (!p.applicable || p.pruned) {
          pipes.Row({p.name, p.MeshString(), "-", p.pruned ? absl::StrCat(">= ", Ms(p.step_seconds)) : "-", "-", "-",
                     p.pruned ? "pruned" : "n/a", p.note});
          continue;
        }
        pipes.Row({p.name, p.MeshString(), MicroBatchesString(p.micro_batches, result->global_batch), Ms(p.step_seconds),
                   absl::StrFormat("%.1f%%", 100 * p.bubble_fraction), Bytes(p.peak_bytes), p.fits ? "yes" : "no",
                   absl::StrFormat("%.2fx", p.step_seconds / chosen_step)});
      }
    }
    pipes.Print(std::cout);
  } else if (!result->pipeline_note.empty()) {
    std::cout << "\nPipeline stages: not searched (" << result->pipeline_note << ")\n";
  }
  if (!options.pins.empty()) {
    std::cout << "\nPinned:       " << options.pins.ToString() << " — "
              << (result->pinned_name.empty() ? std::string("no baseline keeps every pin; MAP's plan above keeps them")
                                              : absl::StrCat("'", result->pinned_name, "' above is the pinned configuration; MAP's plan keeps the pins too"))
              << "\n";
  }
}

}  // namespace

int RunPlan(const PlanArgs& args) {
  auto options = PlanOptionsOf(args);
  if (!options.ok()) return ReportError(options.status());
  auto trainable = LoadTrainingGraph(args.model.model, args.model.inputs, args.batch_size, args.seq_len, args.loss);
  if (!trainable.ok()) return ReportError(trainable.status());
  // bf16: the search plans the mixed-precision graph, which a saved plan carries.
  auto graph = TrainingGraphOf(*std::move(trainable), "sync", 1, options->profile.precision);
  if (!graph.ok()) return ReportError(graph.status());
  auto result = SearchPlan(*graph, *options);
  if (!result.ok()) return ReportError(result.status());
  const Cluster& cluster = result->cluster;
  if (!args.dump_request.empty()) {
    if (result->plan.request == nullptr) {
      return ReportError(absl::FailedPreconditionError("--dump-request: the plan has no ILP of its own to dump"));
    }
    if (auto st = WriteStringToFileAtomic(args.dump_request, result->plan.request->SerializeAsString()); !st.ok()) {
      return ReportError(st);
    }
  }
  if (!args.report.empty()) {
    PlanReportInfo info{graph->name(), args.devices > 0 ? args.devices : cluster.num_devices(), cluster.device.name,
                        static_cast<double>(cluster.memory_per_device)};
    if (auto st = WriteStringToFileAtomic(args.report, RenderPlanHtml(*graph, *result, info)); !st.ok()) {
      return ReportError(st);
    }
  }
  const PipelinePlan* pipeline = result->pipeline ? &*result->pipeline : nullptr;
  if (!result->fits && pipeline == nullptr) {
    return ReportError(NothingFitsError(*graph, *options, ReadMemoryMargin(MemoryRecordDir()).fraction));
  }
  if (!args.save.empty()) {
    if (auto st = WriteStringToFileAtomic(args.save, ToPlanProto(*graph, *result, *options).SerializeAsString()); !st.ok()) {
      return ReportError(st);
    }
  }

  if (IsDocumentFormat(args.format)) {
    PrintDocument(args.format, pipeline != nullptr ? PipelinePlanJson(&*graph, &*result, *options) : FlatPlanJson(&*graph, &*result, *options));
  }
  else PrintPlanTables(&*graph, &*result, *options);
  if (!IsDocumentFormat(args.format) && !args.save.empty()) std::cout << "\nSaved the plan to " << args.save << "\n";
  if (!IsDocumentFormat(args.format) && !args.report.empty()) std::cout << "Wrote the report to " << args.report << "\n";
  return kExitOk;
}

void AddPlanCommand(CLI::App& app, Commands& out) {
  auto args = std::make_shared<PlanArgs>();
  CLI::App* plan = app.add_subcommand(
      "plan", "Find the sharding plan that trains fastest within the memory budget: mesh shape, ZeRO stage and a strategy per operator, beside the baselines");
  plan->add_option("MODEL", args->model.model, "Zoo spec, .pt archive or .pb/.json graph")->required();
  plan->add_option("--input", args->model.inputs, "Input spec NAME:DTYPE[D0,D1,...] (repeatable)");
  plan->add_option("--devices", args->devices, "Number of devices")->check(AtLeastOne());
  plan->add_option("--mesh", args->mesh, "Pin the mesh shape, outermost axis first, e.g. 2x4 (default: search every 1-D and 2-D shape)");
  plan->add_option("--device-type", args->device_type,
                   "Catalogue name, a `mapctl calibrate` JSON, or auto (this host, measured once per host and build and cached)")
      ->capture_default_str();
  plan->add_option("--memory-per-device", args->memory_per_device, "Budget per device, e.g. 80GiB (default: the device's)");
  plan->add_option("--gpus-per-node", args->gpus_per_node, "Devices per node (fast links inside)")->capture_default_str();
  plan->add_option("--batch-size", args->batch_size, "Global batch (zoo models)")->check(AtLeastOne());
  plan->add_option("--seq-len", args->seq_len, "Sequence length (zoo language models)")->check(AtLeastOne());
  plan->add_option("--loss", args->loss, "auto | output | cross_entropy | mse")->capture_default_str();
  plan->add_option("--optimizer", args->optimizer, "sgd | momentum | adamw")->capture_default_str();
  plan->add_option("--time-limit", args->time_limit, "Solver time limit in seconds")->capture_default_str();
  plan->add_option("--gap", args->gap,
                   "Accepted optimality gap: the plan is within this fraction of the cost model's optimum (0: proven optimal, slower)")
      ->capture_default_str();
  plan->add_option("--dump-solver-request", args->dump_request, "Write the winning ILP request (proto) here");
  plan->add_option("--zero", args->zero, "ZeRO stage over data-parallel axes: auto | 0 | 1 | 2 | 3")->capture_default_str();
  plan->add_option("--precision", args->precision, "auto (bf16 on GPU device types, fp32 on cpu) | fp32 | bf16 (mixed: bf16 weights, activations and gradients; fp32 master weights, optimizer states and loss)")
      ->capture_default_str();
  plan->add_option("--recompute", args->recompute,
                   "Activation checkpointing: auto (under the budget the search may recompute repeated layers) | off")
      ->check(CLI::IsMember({"auto", "off"}))
      ->capture_default_str();
  plan->add_option("--micro-batches", args->micro_batches,
                   "Forward/backward passes per step, gradients accumulated: auto (the search chooses among the divisors of the global batch) | N")
      ->capture_default_str();
  plan->add_option("--pipeline-stages", args->pipeline_stages,
                   "Pipeline stages over the layers (1F1B, each stage on devices/N devices): auto (the search also tries "
                   "every N dividing the devices, up to the layers) | N (1: none)")
      ->capture_default_str();
  plan->add_option("--pin", args->pin,
                   "Fix parts of the configuration and search the rest: tp=T,pp=P,dp=D,mbs=S (samples per micro-batch per "
                   "data-parallel rank),recompute=full|off,schedule=1f1b|interleaved|interleaved:V,zero=Z; the configuration "
                   "that keeps every pin is costed beside MAP's plan (docs/planner.md)");
  plan->add_option("--save", args->save, "Save the plan (proto, with its graph) to this file");
  plan->add_option("--report", args->report, "Write a self-contained HTML report (SVG) to this file");
  plan->add_option("-o,--output", args->format, "Output format")->check(CLI::IsMember({"table", "json", "yaml"}))->capture_default_str();
  plan->footer(kModelHelp);

  out.push_back({plan, [args] { return RunPlan(*args); }});
}

}  // namespace mapd::cli

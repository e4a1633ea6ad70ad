// mapctl: the command-line interface of MAP.
#include <algorithm>
#include <iostream>

#include <CLI/CLI.hpp>

#include "common/allocator.h"
#include "common/version.h"
#include "client/mapctl/commands.h"
#include "client/mapctl/suggest.h"
#include "client/mapctl/training_flags.h"
#include "worker/local/local_training.h"

namespace {

constexpr const char* kModelHelp =
    "MODEL: a zoo name with optional overrides (gpt2, llama2-7b:layers=2,seq=128; see `mapctl models`), "
    "a TorchScript archive (.pt, made by torch.jit.trace/script and torch.jit.save), or a MAP graph file "
    "(.pb or .json, made by `mapctl import`)";

}  // namespace

int main(int argc, char** argv) {
  mapd::RetainFreedMemory();  // planning frees and reuses cost graphs by the hundred
  using namespace mapd::cli;
  CLI::App app{"mapctl — plan and run PyTorch training across devices with MAP (Memory-aware Automated Parallelism)"};
  app.set_version_flag("--version", mapd::VersionLine("mapctl"));
  app.require_subcommand(1);
  app.footer(std::string("\n") + kModelHelp +
             "\n\nExit codes: 0 success, 1 the command failed, 2 bad usage; `watch`: 0 the job succeeded, 1 it failed, 3 it was cancelled.");

  std::string format = "table";
  auto add_format = [&format](CLI::App* cmd) {
    cmd->add_option("-o,--output", format, "Output format")->check(CLI::IsMember({"table", "json"}))->capture_default_str();
  };

  CLI::App* models = app.add_subcommand("models", "List the model zoo and each model's options");
  add_format(models);

  bool aten = false;
  CLI::App* ops = app.add_subcommand("ops", "List the operators MAP understands (the op registry)");
  add_format(ops);
  ops->add_flag("--aten", aten, "List the PyTorch aten ops the TorchScript importer maps instead");

  CLI::App* devices = app.add_subcommand("devices", "Show whether CUDA/NCCL support is built and which GPUs are visible");
  add_format(devices);

  ModelArgs model_args;
  bool text = false;
  CLI::App* inspect = app.add_subcommand("inspect", "Describe a model: nodes by op, parameters, inputs and outputs");
  inspect->add_option("MODEL", model_args.model, "Zoo spec, .pt archive or .pb/.json graph")->required();
  inspect->add_option("--input", model_args.inputs,
                      "Input spec of a TorchScript model, NAME:DTYPE[D0,D1,...] (repeatable), e.g. idx:i64[8,1024]");
  add_format(inspect);
  inspect->add_flag("--text", text, "Print the whole graph in MAP's text form instead");
  inspect->footer(kModelHelp);

  std::string import_out;
  CLI::App* import = app.add_subcommand("import", "Convert a model (usually a TorchScript .pt) into a MAP graph file");
  import->add_option("MODEL", model_args.model, "TorchScript archive (or zoo spec / graph file)")->required();
  import->add_option("--input", model_args.inputs, "Input spec NAME:DTYPE[D0,D1,...] (repeatable)");
  import->add_option("-o,--output", import_out, "Output file: .pb (binary) or .json")->required();
  import->footer(kModelHelp);

  ProfileArgs prof;
  CLI::App* profile = app.add_subcommand(
      "profile", "Predict memory (peak and its composition) and compute of one training step, without running it");
  profile->add_option("MODEL", prof.model.model, "Zoo spec, .pt archive or .pb/.json graph")->required();
  profile->add_option("--input", prof.model.inputs, "Input spec NAME:DTYPE[D0,D1,...] (repeatable)");
  profile->add_option("--batch-size", prof.batch_size, "Batch size (zoo models)")->check(CLI::PositiveNumber);
  profile->add_option("--seq-len", prof.seq_len, "Sequence length (zoo language models)")->check(CLI::PositiveNumber);
  profile->add_option("--loss", prof.loss,
                      "How the step gets its loss: auto (the model's scalar output, else cross_entropy on its logits), "
                      "output, cross_entropy, mse")
      ->capture_default_str();
  profile->add_option("--optimizer", prof.optimizer, "sgd | momentum | adamw")->capture_default_str();
  profile->add_option("--precision", prof.precision, "auto (bf16 on GPU device types, fp32 on cpu) | fp32 | bf16 (mixed: bf16 weights, activations and gradients; fp32 master weights, optimizer states and loss)")->capture_default_str();
  profile->add_option("--device-type", prof.device_type,
                      "cpu | a100-40g | a100-80g | h100-80g | h200-141g, or a JSON profile from `mapctl calibrate`")
      ->capture_default_str();
  profile->add_flag("--measure", prof.measure,
                    "Also run real training steps on this CPU (LibTorch) and compare predicted with measured peak "
                    "memory and step time");
  profile->add_option("--steps", prof.steps, "Steps to run with --measure (the first warms up)")
      ->check(CLI::Range(2, 1000))
      ->capture_default_str();
  profile->add_flag("--ops", prof.ops, "Include one row per op in the JSON");
  profile->add_option("-o,--output", prof.format, "Output format")->check(CLI::IsMember({"table", "json"}))->capture_default_str();
  profile->add_option("--timeline", prof.timeline, "Write live memory over the step as an SVG picture");
  profile->footer(kModelHelp);

  RunArgs run_args;
  CLI::App* run = app.add_subcommand(
      "run", "Train a model on this machine — on one device, or on N local ranks under a plan — and print its loss per step");
  run->add_option("MODEL", run_args.model.model, "Zoo spec, .pt archive or .pb/.json graph (not with --plan)");
  run->add_option("--input", run_args.model.inputs, "Input spec NAME:DTYPE[D0,D1,...] (repeatable)");
  run->add_option("--loss", run_args.loss, "auto | output | cross_entropy | mse")->capture_default_str();
  AddTrainingFlags(run, &run_args.training, "paths on this machine");
  run->add_option("--init-from", run_args.init_from,
                  "Start from these weights: a PyTorch state dict (torch.save(model.state_dict(), FILE)), names and shapes checked");
  run->add_option("--device", run_args.device, "cpu, or cuda[:N] where LibTorch has CUDA; with --ranks: cpu (Gloo) or cuda (NCCL, rank r on GPU r)")->capture_default_str();
  run->add_option("--log-every", run_args.log_every, "Print every N steps")->check(CLI::PositiveNumber)->capture_default_str();
  run->add_option("-o,--output", run_args.format, "Output format")->check(CLI::IsMember({"table", "json"}))->capture_default_str();
  run->add_option("--ranks", run_args.ranks, "Train on N local rank processes (Gloo) under a plan")
      ->check(CLI::PositiveNumber)->capture_default_str();
  run->add_option("--mesh", run_args.mesh, "Mesh of the ranks, e.g. 2x2 (default: 1-D)");
  run->add_option("--strategy", run_args.strategy, "map (the planner's plan) | dp | tp")
      ->check(CLI::IsMember({"map", "dp", "tp"}))->capture_default_str();
  run->add_option("--plan", run_args.plan, "Run a saved plan (mapctl plan --save): its graph and mesh");
  run->add_option("--device-type", run_args.device_type, "Cost model of the planner for --strategy map")->capture_default_str();
  run->add_option("--zero", run_args.zero, "ZeRO stage of MAP's plan over data-parallel axes: auto | 0 | 1 | 2 | 3")
      ->capture_default_str();
  run->add_option("--recompute", run_args.recompute,
                  "Activation checkpointing with --ranks: auto (as MAP's plan or the saved plan says), off, all, or LAYER,LAYER... "
                  "as `mapctl profile` names them")
      ->capture_default_str();
  run->add_option("--pipeline-stages", run_args.pipeline_stages,
                  "Pipeline stages with --ranks: 1 (none) | N (the layers cut into N stages, each on ranks/N ranks, micro-batches "
                  "streamed through them by 1F1B; give --micro-batches N or auto) | auto (the planner decides)")
      ->capture_default_str();
  run->add_option("--memory-per-device", run_args.memory_per_device, "Memory per rank, e.g. 1GiB: the planner's budget, and a cap each rank enforces (an allocation past it fails, naming the rank and the bytes)");
  run->add_flag("--check-reference", run_args.check_reference, "Also train on one process and compare the losses");
  run->add_option("--gradient-buckets", run_args.gradient_buckets,
                  "With --ranks: data-parallel gradients all-reduced in buckets of this size as backward makes them "
                  "(ZeRO 2-3: reduced and gathered a bucket at a time), or off (one blocking collective per parameter)")
      ->capture_default_str();
  run->add_option("--batch-norm", run_args.batch_norm,
                  "With --ranks: sync (batch norm statistics over the whole batch, all-reduced: one process's result) | "
                  "local (over each rank's 1/ranks of the batch, as PyTorch DDP's BatchNorm: no collective)")
      ->check(CLI::IsMember({"sync", "local"}))
      ->capture_default_str();
  run->add_option("--rank-timeout", run_args.rank_timeout, "Seconds a rank may stay silent before the run is stopped")
      ->check(CLI::PositiveNumber)->capture_default_str();
  run->add_option("--checkpoint-dir", run_args.checkpoint_dir, "Write checkpoints here (the run goes on the rank runtime, one rank included)");
  run->add_option("--resume", run_args.resume, "Continue from the last checkpoint committed in this dir, under this run's plan: another plan's checkpoint is resharded");

  // `run --ranks N` and mapd-worker start `mapctl _rank` once per rank (hidden: not for people).
  RankArgs rank_args;
  CLI::App* rank_cmd = app.add_subcommand("_rank", "");
  rank_cmd->group("");
  rank_cmd->add_option("--run-dir", rank_args.run_dir)->required();
  rank_cmd->add_option("--rank", rank_args.rank)->required();
  rank_cmd->add_option("--cuda-device", rank_args.cuda_device);
  rank_cmd->add_option("--store", rank_args.store);
  run->footer(kModelHelp);

  PlanArgs plan_args;
  CLI::App* plan = app.add_subcommand(
      "plan", "Find the sharding plan that trains fastest within the memory budget: mesh shape, ZeRO stage and a strategy per operator, beside the baselines");
  plan->add_option("MODEL", plan_args.model.model, "Zoo spec, .pt archive or .pb/.json graph")->required();
  plan->add_option("--input", plan_args.model.inputs, "Input spec NAME:DTYPE[D0,D1,...] (repeatable)");
  plan->add_option("--devices", plan_args.devices, "Number of devices")->check(CLI::PositiveNumber);
  plan->add_option("--mesh", plan_args.mesh, "Pin the mesh shape, outermost axis first, e.g. 2x4 (default: search every 1-D and 2-D shape)");
  plan->add_option("--device-type", plan_args.device_type, "Catalogue name or a `mapctl calibrate` JSON")->capture_default_str();
  plan->add_option("--memory-per-device", plan_args.memory_per_device, "Budget per device, e.g. 80GiB (default: the device's)");
  plan->add_option("--gpus-per-node", plan_args.gpus_per_node, "Devices per node (fast links inside)")->capture_default_str();
  plan->add_option("--batch-size", plan_args.batch_size, "Global batch (zoo models)")->check(CLI::PositiveNumber);
  plan->add_option("--seq-len", plan_args.seq_len, "Sequence length (zoo language models)")->check(CLI::PositiveNumber);
  plan->add_option("--loss", plan_args.loss, "auto | output | cross_entropy | mse")->capture_default_str();
  plan->add_option("--optimizer", plan_args.optimizer, "sgd | momentum | adamw")->capture_default_str();
  plan->add_option("--time-limit", plan_args.time_limit, "Solver time limit in seconds")->capture_default_str();
  plan->add_option("--gap", plan_args.gap,
                   "Accepted optimality gap: the plan is within this fraction of the cost model's optimum (0: proven optimal, slower)")
      ->capture_default_str();
  plan->add_option("--dump-solver-request", plan_args.dump_request, "Write the winning ILP request (proto) here");
  plan->add_option("--zero", plan_args.zero, "ZeRO stage over data-parallel axes: auto | 0 | 1 | 2 | 3")->capture_default_str();
  plan->add_option("--precision", plan_args.precision, "auto (bf16 on GPU device types, fp32 on cpu) | fp32 | bf16 (mixed: bf16 weights, activations and gradients; fp32 master weights, optimizer states and loss)")
      ->capture_default_str();
  plan->add_option("--recompute", plan_args.recompute,
                   "Activation checkpointing: auto (under the budget the search may recompute repeated layers) | off")
      ->check(CLI::IsMember({"auto", "off"}))
      ->capture_default_str();
  plan->add_option("--micro-batches", plan_args.micro_batches,
                   "Forward/backward passes per step, gradients accumulated: auto (the search chooses among the divisors of the global batch) | N")
      ->capture_default_str();
  plan->add_option("--pipeline-stages", plan_args.pipeline_stages,
                   "Pipeline stages over the layers (1F1B, each stage on devices/N devices): auto (the search also tries "
                   "every N dividing the devices, up to the layers) | N (1: none)")
      ->capture_default_str();
  plan->add_option("--save", plan_args.save, "Save the plan (proto, with its graph) to this file");
  plan->add_option("--report", plan_args.report, "Write a self-contained HTML report (SVG) to this file");
  plan->add_option("-o,--output", plan_args.format, "Output format")->check(CLI::IsMember({"table", "json"}))->capture_default_str();
  plan->footer(kModelHelp);

  std::string calib_name = "local-cpu", calib_out;
  bool calib_quick = false;
  int calib_rounds = 3;
  std::vector<int64_t> calib_collectives;
  CLI::App* calibrate = app.add_subcommand(
      "calibrate", "Measure this machine's matmul rate, memory bandwidth and per-kernel overhead as a device profile");
  calibrate->add_option("--name", calib_name, "Name of the profile")->capture_default_str();
  calibrate->add_option("-o,--output", calib_out, "Write the profile (JSON) here; without it, print it");
  calibrate->add_flag("--quick", calib_quick, "Shorter, smaller measurements (less steady)");
  CLI::Option* rounds_option =
      calibrate->add_option("--rounds", calib_rounds, "Measure everything this many times, round after round, and keep each figure's median (1..9; --quick: 1)")
          ->check(CLI::Range(1, 9))
          ->capture_default_str();
  calibrate->add_option("--collectives", calib_collectives,
                        "Also time Gloo all-reduces among N local ranks, for each N given (2..8; e.g. --collectives 2,4): "
                        "what `mapctl run --ranks N` and plans on this host then predict collectives with")
      ->delimiter(',');

  ExportArgs export_args;
  CLI::App* export_cmd = app.add_subcommand(
      "export", "Write a checkpoint's trained weights as a PyTorch state dict (torch.load, load_state_dict) under the model's names");
  export_cmd->add_option("CHECKPOINT_DIR", export_args.sources,
                         "The run's --checkpoint-dir, or each worker's WORK_DIR/job-ID/checkpoints for a job on several workers")
      ->required();
  export_cmd->add_option("-o,--output", export_args.output, "The file to write (e.g. weights.pt)")->required();
  export_cmd->add_option("--step", export_args.step, "The committed step to export (default: the last one)")->check(CLI::NonNegativeNumber);
  export_cmd->add_flag("--optimizer-state", export_args.optimizer_state,
                       "Write {\"model\": state dict, \"optimizer\": {\"steps\", \"state\": per parameter}} instead of the state dict alone");
  export_cmd->add_option("--format", export_args.format, "What to print")->check(CLI::IsMember({"table", "json"}))->capture_default_str();

  // Job commands against the coordinator (docs/coordinator.md).
  JobArgs job_args;
  auto add_conn = [&job_args](CLI::App* cmd) {
    cmd->add_option("--address", job_args.address, "Coordinator host:port (default $MAPD_ADDRESS, the context's, else 127.0.0.1:7070)");
    cmd->add_option("--token", job_args.token, "Bearer token (visible to other users in ps: prefer --token-file or $MAPD_TOKEN)");
    cmd->add_option("--token-file", job_args.token_file, "File whose first line is the bearer token (default $MAPD_TOKEN, $MAPD_TOKEN_FILE, the context's token_file)");
    cmd->add_option("--tls-ca", job_args.tls_ca, "PEM root certificates: speak TLS to the coordinator (default $MAPD_TLS_CA, the context's)");
    cmd->add_option("--context", job_args.context, "A context of ~/.config/mapd/config.yaml (default $MAPD_CONTEXT, its current-context)");
    cmd->add_option("-o,--output", job_args.format, "Output format: table | wide | json | yaml | name")
        ->check(CLI::IsMember({"table", "wide", "json", "yaml", "name"}))
        ->capture_default_str();
  };
  SubmitArgs submit_args;
  CLI::App* submit = app.add_subcommand("submit", "Submit a training job to the coordinator (mapd)");
  submit->add_option("MODEL", submit_args.model.model, "Zoo spec, .pt archive or .pb/.json graph");
  submit->add_option("-f,--file", submit_args.file, "A job file (YAML): model, steps, ranks, mesh, memory_per_device, ...");
  submit->add_option("--input", submit_args.model.inputs, "Input spec NAME:DTYPE[D0,D1,...] (repeatable)");
  submit->add_option("--loss", submit_args.loss, "auto | output | cross_entropy | mse")->capture_default_str();
  submit->add_option("--name", submit_args.name, "Name shown by `mapctl jobs` (default: the model)");
  submit->add_option("--ranks", submit_args.ranks, "Devices to train on")->capture_default_str();
  submit->add_option("--mesh", submit_args.mesh, "Pin the mesh shape, e.g. 2x2");
  submit->add_option("--device", submit_args.device, "What the ranks run on: cpu (Gloo) | cuda (NCCL, on workers that offer GPUs)")
      ->capture_default_str();
  submit->add_option("--device-type", submit_args.device_type, "The cost model's device")->capture_default_str();
  submit->add_option("--memory-per-device", submit_args.memory_per_device, "Budget per device, e.g. 40GiB");
  AddTrainingFlags(submit, &submit_args.training, "paths under the workers' --data-root");
  submit->add_option("--init-from", submit_args.init_from,
                     "Start from these weights: a PyTorch state dict read here and sent in the job's graph");
  submit->add_option("--zero", submit_args.zero, "ZeRO stage: auto | 0 | 1 | 2 | 3")->capture_default_str();
  submit->add_option("--recompute", submit_args.recompute, "auto | off | all | LAYER,...")->capture_default_str();
  submit->add_option("--pipeline-stages", submit_args.pipeline_stages,
                     "1 (no stages) | N (the layers cut into N stages of ranks/N devices, 1F1B; micro-batches 1 then means auto) | auto")
      ->capture_default_str();
  submit->add_option("--batch-norm", submit_args.batch_norm,
                     "sync (statistics over the whole batch) | local (over each rank's 1/ranks of it, as PyTorch DDP's "
                     "BatchNorm: no collective; the groups stay when an elastic job changes its devices)")
      ->check(CLI::IsMember({"sync", "local"}))
      ->capture_default_str();
  submit->add_option("--elastic", submit_args.elastic,
                     "MIN[:MAX]: after a lost worker, go on with at least MIN devices (re-planned, checkpoint resharded) and grow "
                     "back up to MAX (default --ranks) at checkpoints; needs --checkpoint-every and a mapd with --checkpoint-dir");
  add_conn(submit);
  submit->footer(kModelHelp);
  CLI::App* jobs_cmd = app.add_subcommand("jobs", "List the coordinator's jobs");
  add_conn(jobs_cmd);
  int64_t job_id = 0;
  auto id_cmd = [&](const char* name, const char* help) {
    CLI::App* cmd = app.add_subcommand(name, help);
    cmd->add_option("ID", job_id, "Job id (mapctl jobs)")->required();
    add_conn(cmd);
    return cmd;
  };
  CLI::App* get = id_cmd("get", "Show one job: state, plan, progress");
  CLI::App* watch = id_cmd("watch", "Follow a job until it finishes (progress bar on a terminal); exits 0 succeeded, 1 failed, 3 cancelled");
  CLI::App* describe = id_cmd("describe", "Show a job in full: state, why it waits, plan, last error and its events");
  LogsArgs logs_args;
  CLI::App* logs = id_cmd("logs", "Print a job's events (progress sampled), or a rank's output with --rank");
  logs->add_option("--rank", logs_args.rank, "Print this rank's output (its stderr, as its worker captured it) instead of the events");
  logs->add_flag("-f,--follow", logs_args.follow, "Keep printing as it comes, until the job finishes");
  logs->add_option("--tail", logs_args.tail, "Only the last N lines (events or output)")->check(CLI::Range(1, 100000));
  logs->add_flag("--all-steps", logs_args.all_steps, "Every progress event (by default at most 50, spread over the job)");
  CLI::App* cancel = id_cmd("cancel", "Cancel a job");
  CLI::App* delete_cmd = id_cmd("delete", "Forget a finished job with its events and output (cancel a running one first)");
  CLI::App* workers = app.add_subcommand("workers", "List the workers registered with the coordinator, with their leases");
  add_conn(workers);
  std::string shell;
  CLI::App* completion = app.add_subcommand("completion", "Print a shell completion script: source <(mapctl completion bash)");
  completion->add_option("SHELL", shell, "bash (zsh: autoload bashcompinit && bashcompinit first)")->required()->check(CLI::IsMember({"bash"}));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // A mistyped command or flag gets the nearest one; other usage errors CLI11's words.
    if (e.get_exit_code() != 0) {
      if (const std::string hint = SuggestForCommandLine(app, argc, argv); !hint.empty()) {
        std::cerr << "mapctl: " << hint << "\n";
        return kExitUsage;
      }
    }
    const int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitUsage;
  }
  if (completion->parsed()) {
    std::cout << BashCompletion(app, "mapctl");
    return kExitOk;
  }
  // The flags typed for submit, by their job-file names: they win over -f's fields.
  for (const CLI::Option* o : submit->get_options()) {
    if (o->count() == 0) continue;
    std::string name = o->get_lnames().empty() ? o->get_name() : o->get_lnames()[0];
    if (name == "MODEL") name = "model";
    std::replace(name.begin(), name.end(), '-', '_');
    submit_args.given.insert(name);
  }
  if (models->parsed()) return RunModels(format);
  if (ops->parsed()) return RunOps(format, aten);
  if (devices->parsed()) return RunDevices(format);
  if (inspect->parsed()) return RunInspect(model_args, format, text);
  if (import->parsed()) return RunImport(model_args, import_out);
  if (profile->parsed()) return RunProfile(prof);
  if (run->parsed()) return RunTraining(run_args);
  if (rank_cmd->parsed()) return RunRank(rank_args);
  if (plan->parsed()) return RunPlan(plan_args);
  if (export_cmd->parsed()) return RunExport(export_args);
  if (calibrate->parsed()) return RunCalibrate(calib_name, calib_out, calib_quick, calib_collectives,
                                               calib_quick && rounds_option->count() == 0 ? 1 : calib_rounds);
  submit_args.conn = job_args;
  if (submit->parsed()) return RunSubmit(submit_args);
  if (jobs_cmd->parsed()) return RunJobs(job_args);
  if (get->parsed()) return RunGet(job_args, job_id);
  if (watch->parsed()) return RunWatch(job_args, job_id);
  if (logs->parsed()) return RunLogs(job_args, job_id, logs_args);
  if (describe->parsed()) return RunDescribe(job_args, job_id);
  if (cancel->parsed()) return RunCancel(job_args, job_id);
  if (delete_cmd->parsed()) return RunDelete(job_args, job_id);
  if (workers->parsed()) return RunWorkers(job_args);
  return kExitUsage;
}

// The flags of run, calibrate and export (command_table.h): registered in both programs, so that
// mapctl's help, completion and usage errors cover them; their work is mapctl-torch's
// (cmd_run.cc, cmd_calibrate.cc, cmd_export.cc), which mapctl execs (torch_commands.h).
#include <memory>
#include <string>
#include <vector>

#include "client/mapctl/command_table.h"
#include "client/mapctl/cli_checks.h"
#include "client/mapctl/commands.h"
#include "client/mapctl/training_flags.h"

namespace mapd::cli {

namespace {
struct CalibrateArgs {
  std::string name = "local-cpu";
  std::string output;
  bool quick = false;
  int rounds = 3;
  std::vector<int64_t> collectives;
};
}  // namespace

void AddRunCommand(CLI::App& app, Commands& out) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* run = app.add_subcommand(
      "run", "Train a model on this machine — on one device, or on N local ranks under a plan — and print its loss per step");
  run->add_option("MODEL", args->model.model, "Zoo spec, .pt archive or .pb/.json graph (not with --plan)");
  run->add_option("--input", args->model.inputs, "Input spec NAME:DTYPE[D0,D1,...] (repeatable)");
  run->add_option("--loss", args->loss, "auto | output | cross_entropy | mse")->capture_default_str();
  AddTrainingFlags(run, &args->training, "paths on this machine");
  run->add_option("--init-from", args->init_from,
                  "Start from these weights: a PyTorch state dict (torch.save(model.state_dict(), FILE)), names and shapes checked");
  run->add_option("--device", args->device, "cpu, or cuda[:N] where LibTorch has CUDA; with --ranks: cpu (Gloo) or cuda (NCCL, rank r on GPU r)")->capture_default_str();
  run->add_option("--log-every", args->log_every, "Print every N steps")->check(AtLeastOne())->capture_default_str();
  run->add_option("-o,--output", args->format, "Output format")->check(CLI::IsMember({"table", "json", "yaml"}))->capture_default_str();
  run->add_option("--ranks", args->ranks, "Train on N local rank processes (Gloo) under a plan")
      ->check(AtLeastOne())->capture_default_str();
  run->add_option("--mesh", args->mesh, "Mesh of the ranks, e.g. 2x2 (default: 1-D)");
  run->add_option("--strategy", args->strategy, "map (the planner's plan) | dp | tp")
      ->check(CLI::IsMember({"map", "dp", "tp"}))->capture_default_str();
  run->add_option("--plan", args->plan, "Run a saved plan (mapctl plan --save): its graph and mesh");
  run->add_option("--device-type", args->device_type,
                  "The cost model's device with --ranks: auto (this host, measured once per host and build and cached — ~12 s the "
                  "first time), a catalogue name (cpu, h100-80g, ...) or a `mapctl calibrate` JSON")
      ->capture_default_str();
  run->add_option("--zero", args->zero, "ZeRO stage of MAP's plan over data-parallel axes: auto | 0 | 1 | 2 | 3")
      ->capture_default_str();
  run->add_option("--recompute", args->recompute,
                  "Activation checkpointing with --ranks: auto (as MAP's plan or the saved plan says), off, all, or LAYER,LAYER... "
                  "as `mapctl profile` names them")
      ->capture_default_str();
  run->add_option("--pipeline-stages", args->pipeline_stages,
                  "Pipeline stages with --ranks: 1 (none) | N (the layers cut into N stages, each on ranks/N ranks, micro-batches "
                  "streamed through them by 1F1B; give --micro-batches N or auto) | auto (the planner decides)")
      ->capture_default_str();
  run->add_option("--pin", args->pin,
                  "Fix parts of the configuration with --ranks and plan the rest: tp=T,pp=P,dp=D,mbs=S,recompute=full|off,"
                  "schedule=1f1b|interleaved:V,zero=Z (as `mapctl plan --pin`)");
  run->add_option("--memory-per-device", args->memory_per_device, "Memory per rank, e.g. 1GiB: the planner's budget, and a cap each rank enforces (an allocation past it fails, naming the rank and the bytes)");
  run->add_flag("--check-reference", args->check_reference, "Also train on one process and compare the losses");
  run->add_option("--gradient-buckets", args->gradient_buckets,
                  "With --ranks: data-parallel gradients all-reduced in buckets of this size as backward makes them "
                  "(ZeRO 2-3: reduced and gathered a bucket at a time), or off (one blocking collective per parameter)")
      ->capture_default_str();
  run->add_option("--batch-norm", args->batch_norm,
                  "With --ranks: sync (batch norm statistics over the whole batch, all-reduced: one process's result) | "
                  "local (over each rank's 1/ranks of the batch, as PyTorch DDP's BatchNorm: no collective)")
      ->check(CLI::IsMember({"sync", "local"}))
      ->capture_default_str();
  run->add_option("--rank-timeout", args->rank_timeout, "Seconds a rank may stay silent before the run is stopped")
      ->check(AtLeastOne())->capture_default_str();
  run->add_option("--checkpoint-dir", args->checkpoint_dir, "Write checkpoints here (the run goes on the rank runtime, one rank included)");
  run->add_option("--resume", args->resume, "Continue from the last checkpoint committed in this dir, under this run's plan: another plan's checkpoint is resharded");

  out.push_back({run, [args] { return RunTraining(*args); }});
}

void AddCalibrateCommand(CLI::App& app, Commands& out) {
  auto a = std::make_shared<CalibrateArgs>();
  CLI::App* calibrate = app.add_subcommand(
      "calibrate", "Measure this machine's matmul rate, memory bandwidth and per-kernel overhead as a device profile");
  calibrate->add_option("--name", a->name, "Name of the profile")->capture_default_str();
  calibrate->add_option("-o,--output", a->output, "Write the profile (JSON) here; without it, print it");
  calibrate->add_flag("--quick", a->quick, "Shorter, smaller measurements (less steady)");
  CLI::Option* rounds_option =
      calibrate->add_option("--rounds", a->rounds, "Measure everything this many times, round after round, and keep each figure's median (1..9; --quick: 1)")
          ->check(CLI::Range(1, 9))
          ->capture_default_str();
  calibrate->add_option("--collectives", a->collectives,
                        "Also time Gloo all-reduces among N local ranks, for each N given (2..8; e.g. --collectives 2,4): "
                        "what `mapctl run --ranks N` and plans on this host then predict collectives with")
      ->delimiter(',');

  out.push_back({calibrate, [a, rounds_option] {
    return RunCalibrate(a->name, a->output, a->quick, a->collectives, a->quick && rounds_option->count() == 0 ? 1 : a->rounds);
  }});
}

void AddExportCommand(CLI::App& app, Commands& out) {
  auto args = std::make_shared<ExportArgs>();
  CLI::App* export_cmd = app.add_subcommand(
      "export", "Write a checkpoint's trained weights as a PyTorch state dict (torch.load, load_state_dict) under the model's names");
  export_cmd->add_option("CHECKPOINT_DIR", args->sources,
                         "The run's --checkpoint-dir, or each worker's WORK_DIR/job-ID/checkpoints for a job on several workers")
      ->required();
  export_cmd->add_option("-o,--output", args->output, "The file to write (e.g. weights.pt)")->required();
  export_cmd->add_option("--step", args->step, "The committed step to export (default: the last one)")->check(ZeroOrMore());
  export_cmd->add_flag("--optimizer-state", args->optimizer_state,
                       "Write {\"model\": state dict, \"optimizer\": {\"steps\", \"state\": per parameter}} instead of the state dict alone");
  export_cmd->add_option("--format", args->format, "What to print")->check(CLI::IsMember({"table", "json", "yaml"}))->capture_default_str();

  out.push_back({export_cmd, [args] { return RunExport(*args); }});
}

}  // namespace mapd::cli

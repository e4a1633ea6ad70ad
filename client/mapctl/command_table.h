// How a subcommand enters mapctl: each group's file has one function that adds its subcommands
// to the app — their flags bound to arguments the command keeps — each with what runs it once
// parsed; main parses and runs the one parsed. Both programs (mapctl, mapctl-torch) add them all,
// so help, completion and "did you mean" are the same in each.
#ifndef MAPD_CLIENT_MAPCTL_COMMAND_TABLE_H_
#define MAPD_CLIENT_MAPCTL_COMMAND_TABLE_H_

#include <functional>
#include <vector>

#include <CLI/CLI.hpp>

namespace mapd::cli {

struct Command {
  CLI::App* app = nullptr;    // the subcommand
  std::function<int()> run;   // its exit code (commands.h's ExitCode)
};
using Commands = std::vector<Command>;

// The MODEL argument's forms, shown in the help of every command that takes one.
inline constexpr const char* kModelHelp =
    "MODEL: a zoo name with optional overrides (gpt2, llama2-7b:layers=2,seq=128; see `mapctl models`), "
    "a TorchScript archive (.pt, made by torch.jit.trace/script and torch.jit.save), or a MAP graph file "
    "(.pb or .json, made by `mapctl import`)";

void AddCatalogCommands(CLI::App& app, Commands& out);  // models, ops, devices (cmd_catalog.cc)
void AddModelCommands(CLI::App& app, Commands& out);    // inspect, import (cmd_model.cc)
void AddProfileCommand(CLI::App& app, Commands& out);   // profile (cmd_profile.cc)
// run, calibrate, export: their flags here (torch_command_args.cc), their work in mapctl-torch.
void AddRunCommand(CLI::App& app, Commands& out);
void AddCalibrateCommand(CLI::App& app, Commands& out);
void AddExportCommand(CLI::App& app, Commands& out);
void AddPlanCommand(CLI::App& app, Commands& out);      // plan (cmd_plan.cc)
void AddJobCommands(CLI::App& app, Commands& out);      // submit, jobs, get, describe, cancel, delete, workers (cmd_jobs.cc)
void AddLogCommands(CLI::App& app, Commands& out);      // watch, logs (cmd_logs.cc)

}  // namespace mapd::cli

#endif  // MAPD_CLIENT_MAPCTL_COMMAND_TABLE_H_

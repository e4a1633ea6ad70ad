// mapctl and mapctl-torch: the command-line interface of MAP (one command line, two programs:
// torch_commands.h). Each group of commands adds itself (command_table.h); this parses the
// command line, answers usage errors with the nearest command or flag, and runs the command.
#include <iostream>

#include <CLI/CLI.hpp>

#include "client/mapctl/command_table.h"
#include "client/mapctl/commands.h"
#include "client/mapctl/suggest.h"
#include "client/mapctl/torch_commands.h"
#include "common/allocator.h"
#include "common/escaped_exception.h"
#include "common/version.h"

int main(int argc, char** argv) {
  mapd::RetainFreedMemory();  // planning frees and reuses cost graphs by the hundred
  using namespace mapd::cli;
  RememberCommandLine(argc, argv);  // what mapctl hands to mapctl-torch where a command needs LibTorch
  CLI::App app{"mapctl — plan and run PyTorch training across devices with MAP (Memory-aware Automated Parallelism)"};
  app.set_version_flag("--version", mapd::VersionLine("mapctl"));
  app.require_subcommand(1);
  app.footer(std::string("\n") + kModelHelp +
             "\n\nExit codes: 0 success, 1 the command failed, 2 bad usage; `watch`: 0 the job succeeded, 1 it failed, 3 it was cancelled.");
  Commands commands;
  for (auto add : {AddCatalogCommands, AddModelCommands, AddProfileCommand, AddRunCommand, AddPlanCommand, AddCalibrateCommand,
                   AddExportCommand, AddJobCommands, AddLogCommands}) {
    add(app, commands);
  }
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
  for (const Command& c : commands) {
    if (!c.app->parsed()) continue;
    // Every error is meant to come back as a status; an exception that escapes one (LibTorch's,
    // a memory cap's) still ends the command with one line and exit 1, not an abort.
    try {
      return c.run();
    } catch (const std::exception& e) {
      return ReportError(mapd::EscapedExceptionStatus(e));
    }
  }
  return kExitUsage;
}

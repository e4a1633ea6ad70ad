#include "client/mapctl/suggest.h"

#include <algorithm>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace mapd::cli {

namespace {

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::vector<std::string> Commands(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App* s) { return !s->get_name().empty() && s->get_name()[0] != '_'; })) {
    names.push_back(sub->get_name());
  }
  return names;
}

std::vector<std::string> LongFlags(const CLI::App& cmd) {
  std::vector<std::string> flags;
  for (const CLI::Option* o : cmd.get_options()) {
    for (const std::string& name : o->get_lnames()) flags.push_back("--" + name);
  }
  return flags;
}

}  // namespace

std::string Closest(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = std::string::npos;
  for (const std::string& c : candidates) {
    const size_t d = EditDistance(word, c);
    if (d < best_distance) best = c, best_distance = d;
  }
  const size_t near = std::max<size_t>(2, word.size() / 3);
  return best_distance <= near ? best : "";
}

std::string SuggestForCommandLine(const CLI::App& app, int argc, const char* const* argv) {
  if (argc < 2 || argv[1][0] == '-') return "";
  const std::string command = argv[1];
  const std::vector<std::string> commands = Commands(app);
  const CLI::App* cmd = nullptr;
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (sub->get_name() == command) cmd = sub;
  }
  if (cmd == nullptr) {
    const std::string near = Closest(command, commands);
    return absl::StrCat("unknown command '", command, "'", near.empty() ? "" : absl::StrCat("; did you mean '", near, "'?"),
                        " (commands: ", absl::StrJoin(commands, ", "), ")");
  }
  const std::vector<std::string> flags = LongFlags(*cmd);
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") break;
    if (arg.rfind("--", 0) != 0) continue;
    arg = arg.substr(0, arg.find('='));
    if (std::find(flags.begin(), flags.end(), arg) != flags.end()) continue;
    const std::string near = Closest(arg, flags);
    return absl::StrCat("unknown flag ", arg, " for ", command, near.empty() ? "" : absl::StrCat("; did you mean ", near, "?"),
                        " (mapctl ", command, " --help lists them)");
  }
  return "";
}

std::string BashCompletion(const CLI::App& app, const std::string& program) {
  std::string cases;
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (sub->get_name().empty() || sub->get_name()[0] == '_') continue;
    absl::StrAppend(&cases, "    ", sub->get_name(), ") flags=\"", absl::StrJoin(LongFlags(*sub), " "), "\" ;;\n");
  }
  const std::string fn = "_" + program + "_complete";
  return absl::StrCat(
      "# bash completion for ", program, ": source <(", program, " completion bash)\n",
      fn, "() {\n",
      "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" flags=\"\"\n",
      "  if [[ $COMP_CWORD -eq 1 ]]; then\n",
      "    COMPREPLY=($(compgen -W \"", absl::StrJoin(Commands(app), " "), " --help --version\" -- \"$cur\"))\n",
      "    return\n",
      "  fi\n",
      "  case \"${COMP_WORDS[1]}\" in\n", cases, "  esac\n",
      "  if [[ \"$cur\" == -* ]]; then\n",
      "    COMPREPLY=($(compgen -W \"$flags\" -- \"$cur\"))\n",
      "  else\n",
      "    COMPREPLY=($(compgen -f -- \"$cur\"))\n",
      "  fi\n",
      "}\n",
      "complete -F ", fn, " ", program, "\n");
}

}  // namespace mapd::cli

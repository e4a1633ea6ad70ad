// "Did you mean": the nearest of some names to a mistyped one, and the same for a command line's
// unknown command or flag (mapctl's usage errors).
#ifndef MAPD_CLIENT_MAPCTL_SUGGEST_H_
#define MAPD_CLIENT_MAPCTL_SUGGEST_H_

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace mapd::cli {

// The candidate nearest `word` by edit distance (ties: the first), if it is near enough to be
// what was meant (at most 2 edits, or a third of the word's length); "" otherwise.
std::string Closest(const std::string& word, const std::vector<std::string>& candidates);

// For a usage error of `app`'s command line: "unknown command 'submt'; did you mean 'submit'?"
// or "unknown flag --rnaks for submit; did you mean --ranks?"; "" when there is nothing to say.
std::string SuggestForCommandLine(const CLI::App& app, int argc, const char* const* argv);

// A bash completion script for `app` (`source <(mapctl completion bash)`).
std::string BashCompletion(const CLI::App& app, const std::string& program);

}  // namespace mapd::cli

#endif  // MAPD_CLIENT_MAPCTL_SUGGEST_H_

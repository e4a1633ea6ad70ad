#include "common/plan_choices.h"

#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace mapd {

namespace {
// The text as a message shows it: bounded, since it may come from a client.
std::string Shown(absl::string_view text) { return std::string(text.substr(0, 64)); }
}  // namespace

absl::StatusOr<int> ParseZeroStage(absl::string_view text, int highest, absl::string_view name) {
  if (text.empty() || text == "auto") return -1;
  if (text.size() == 1 && text[0] >= '0' && text[0] - '0' <= highest) return text[0] - '0';
  std::string stages = "0";
  for (int z = 1; z <= highest; ++z) absl::StrAppend(&stages, z == highest ? " or " : ", ", z);
  return absl::InvalidArgumentError(absl::StrCat(name, " '", Shown(text), "' is not auto, ", stages,
                                                 highest < 3 ? " (stage 3 is not built in the runtime)" : ""));
}

absl::StatusOr<int64_t> ParseMicroBatches(absl::string_view text, absl::string_view name) {
  if (text == "auto") return 0;
  if (text.empty()) return 1;
  constexpr int64_t kMost = int64_t{1} << 20;
  int64_t m = 0;
  if (!absl::SimpleAtoi(text, &m) || m < 1 || m > kMost) {
    return absl::InvalidArgumentError(absl::StrCat(name, " '", Shown(text), "' is not auto or a count from 1 to ", kMost,
                                                   " (passes a step; a count divides the global batch)"));
  }
  return m;
}

absl::StatusOr<int> ParsePipelineStages(absl::string_view text, int most, absl::string_view name) {
  if (text == "auto") return 0;
  if (text.empty()) return 1;
  int p = 0;
  if (!absl::SimpleAtoi(text, &p) || p < 1 || p > most) {
    return absl::InvalidArgumentError(absl::StrCat(name, " '", Shown(text), "' is not auto or a count from 1 to ", most,
                                                   " (1: no stages)"));
  }
  return p;
}

}  // namespace mapd

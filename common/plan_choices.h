// The planner's choices as people write them — "auto" (the search chooses) or a number — parsed
// in one place for mapctl's flags (--zero, --micro-batches, --pipeline-stages), a job's spec and
// the coordinator's planning request. `name` is what the message calls the setting: the flag
// ("--zero") or the field ("zero").
#ifndef MAPD_COMMON_PLAN_CHOICES_H_
#define MAPD_COMMON_PLAN_CHOICES_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mapd {

// "auto" (or empty) → -1; "0" .. `highest` → that ZeRO stage.
absl::StatusOr<int> ParseZeroStage(absl::string_view text, int highest, absl::string_view name);

// "auto" → 0; a count from 1 to 2^20 → that many passes a step (empty: 1).
absl::StatusOr<int64_t> ParseMicroBatches(absl::string_view text, absl::string_view name);

// "auto" → 0; a count from 1 to `most` → that many stages (empty: 1).
absl::StatusOr<int> ParsePipelineStages(absl::string_view text, int most, absl::string_view name);

}  // namespace mapd

#endif  // MAPD_COMMON_PLAN_CHOICES_H_

#include "planner/plan/pins.h"

#include <algorithm>
#include <limits>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace mapd {
namespace {

constexpr char kKeys[] = "tp, pp, dp, mbs, recompute, schedule, zero";
// Far above any cluster, far below overflow when three degrees multiply.
constexpr int64_t kMaxDegree = int64_t{1} << 20;

absl::StatusOr<int64_t> Degree(absl::string_view key, absl::string_view value) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(value, &v) || v < 1 || v > kMaxDegree) {
    return absl::InvalidArgumentError(absl::StrCat("pin ", key, "=", value, ": give a whole number from 1 to ", kMaxDegree));
  }
  return v;
}

absl::StatusOr<int64_t> VirtualStages(absl::string_view value) {
  if (value == "1f1b") return 1;
  if (value == "interleaved") return -1;
  absl::string_view chunks = value;
  if (absl::ConsumePrefix(&chunks, "interleaved:")) {
    int64_t v = 0;
    if (absl::SimpleAtoi(chunks, &v) && v >= 2 && v <= kMaxDegree) return v;
  }
  return absl::InvalidArgumentError(absl::StrCat("pin schedule=", value,
                                                 ": use 1f1b, interleaved (chunks per device searched) or "
                                                 "interleaved:V (V ≥ 2 chunks of layers per device)"));
}

}  // namespace

bool PlanPins::empty() const {
  return tp == 0 && pp == 0 && dp == 0 && mbs == 0 && recompute == Recompute::kFree && virtual_stages == 0 && zero < 0;
}

std::string PlanPins::ToString() const {
  std::vector<std::string> parts;
  if (tp > 0) parts.push_back(absl::StrCat("tp=", tp));
  if (pp > 0) parts.push_back(absl::StrCat("pp=", pp));
  if (dp > 0) parts.push_back(absl::StrCat("dp=", dp));
  if (mbs > 0) parts.push_back(absl::StrCat("mbs=", mbs));
  if (recompute != Recompute::kFree) parts.push_back(recompute == Recompute::kFull ? "recompute=full" : "recompute=off");
  if (virtual_stages == 1) parts.push_back("schedule=1f1b");
  if (virtual_stages == -1) parts.push_back("schedule=interleaved");
  if (virtual_stages >= 2) parts.push_back(absl::StrCat("schedule=interleaved:", virtual_stages));
  if (zero >= 0) parts.push_back(absl::StrCat("zero=", zero));
  return absl::StrJoin(parts, ",");
}

absl::Status PlanPins::Validate() const {
  for (auto [name, v] : {std::pair<const char*, int64_t>{"tp", tp}, {"pp", pp}, {"dp", dp}, {"mbs", mbs}}) {
    if (v < 0 || v > kMaxDegree) return absl::InvalidArgumentError(absl::StrCat("pin ", name, "=", v, " is out of range"));
  }
  if (virtual_stages < -1 || virtual_stages > kMaxDegree) {
    return absl::InvalidArgumentError(absl::StrCat("pinned chunks per device ", virtual_stages, " is out of range"));
  }
  if (zero < -1 || zero > 3) return absl::InvalidArgumentError(absl::StrCat("pin zero=", zero, ": use 0, 1, 2 or 3"));
  if (pp == 1 && virtual_stages >= 2) {
    return absl::InvalidArgumentError("pin schedule=interleaved needs pipeline stages; pp=1 has none");
  }
  return absl::OkStatus();
}

absl::StatusOr<PlanPins::Degrees> PlanPins::Resolve(int64_t devices) const {
  Degrees d{tp, pp, dp};
  const int pinned = (tp > 0) + (pp > 0) + (dp > 0);
  const std::string which = ToString();
  if (pinned == 3 && tp * pp * dp != devices) {
    return absl::InvalidArgumentError(absl::StrCat("pin ", which, ": tp·pp·dp is ", tp * pp * dp, ", not the ", devices,
                                                   " devices; pin two of them, or give --devices ", tp * pp * dp));
  }
  const int64_t fixed = std::max<int64_t>(tp, 1) * std::max<int64_t>(pp, 1) * std::max<int64_t>(dp, 1);
  if (devices % fixed != 0) {
    return absl::InvalidArgumentError(absl::StrCat("pin ", which, ": the pinned degrees (product ", fixed,
                                                   ") do not divide the ", devices, " devices"));
  }
  const int64_t rest = devices / fixed;
  if (pinned == 2 || (pinned >= 1 && rest == 1)) {  // the free degree is what is left (1 when the pins use every device)
    if (tp == 0) d.tp = rest;
    if (pp == 0) d.pp = rest;
    if (dp == 0) d.dp = rest;
  }
  return d;
}

bool PlanPins::AllowsStageMesh(const std::vector<int64_t>& mesh) const {
  if (mesh.size() == 2) return (tp == 0 || mesh[1] == tp) && (dp == 0 || mesh[0] == dp);
  if (mesh.size() != 1) return tp == 0 && dp == 0;
  const int64_t n = mesh[0];
  const bool all_data = (dp == 0 || dp == n) && (tp == 0 || tp == 1);
  const bool all_tensor = (tp == 0 || tp == n) && (dp == 0 || dp == 1);
  return all_data || all_tensor;
}

PlanPins PlanPins::WithoutStages() const {
  PlanPins flat = *this;
  if (pp >= 2 && dp > 0) flat.dp = dp * pp;
  flat.pp = 0;
  return flat;
}

bool PlanPins::AllowsVirtualStages(int64_t v) const {
  if (virtual_stages == 0) return true;
  if (virtual_stages == -1) return v >= 2;
  return v == virtual_stages;
}

absl::StatusOr<PlanPins> ParsePins(absl::string_view text) {
  PlanPins pins;
  std::set<std::string> seen;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    item = absl::StripAsciiWhitespace(item);
    const size_t eq = item.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("pin '", item, "': write KEY=VALUE (keys: ", kKeys, ")"));
    }
    const std::string key(item.substr(0, eq));
    const absl::string_view value = item.substr(eq + 1);
    if (!seen.insert(key).second) return absl::InvalidArgumentError(absl::StrCat("pin ", key, " is given twice"));
    if (key == "tp" || key == "pp" || key == "dp" || key == "mbs") {
      auto v = Degree(key, value);
      if (!v.ok()) return v.status();
      (key == "tp" ? pins.tp : key == "pp" ? pins.pp : key == "dp" ? pins.dp : pins.mbs) = *v;
    } else if (key == "recompute") {
      if (value == "full") pins.recompute = PlanPins::Recompute::kFull;
      else if (value == "off") pins.recompute = PlanPins::Recompute::kOff;
      else return absl::InvalidArgumentError(absl::StrCat("pin recompute=", value, ": use full or off"));
    } else if (key == "schedule") {
      auto v = VirtualStages(value);
      if (!v.ok()) return v.status();
      pins.virtual_stages = *v;
    } else if (key == "zero") {
      int z = -1;
      if (!absl::SimpleAtoi(value, &z) || z < 0 || z > 3) {
        return absl::InvalidArgumentError(absl::StrCat("pin zero=", value, ": use 0, 1, 2 or 3"));
      }
      pins.zero = z;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("pin has no key '", key, "'; the keys are ", kKeys));
    }
  }
  if (auto st = pins.Validate(); !st.ok()) return st;
  return pins;
}

}  // namespace mapd

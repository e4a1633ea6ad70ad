#include "common/bytes.h"

#include <cmath>
#include <cstdio>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace mapd {

absl::StatusOr<int64_t> ParseBytes(const std::string& text) {
  std::string t(absl::StripAsciiWhitespace(text));
  struct Unit {
    const char* suffix;
    double factor;
  };
  // Longest suffixes first: "MiB" and "MB" both end in "B". Kubernetes' quantities too: Gi, Mi
  // (any case), and its decimal k, M, G, T — those as it spells them, since its "m" is milli.
  const Unit units[] = {{"TiB", 1099511627776.0}, {"GiB", 1073741824.0}, {"MiB", 1048576.0}, {"KiB", 1024.0},
                        {"TB", 1e12},             {"GB", 1e9},            {"MB", 1e6},        {"KB", 1e3},
                        {"Ti", 1099511627776.0},  {"Gi", 1073741824.0},  {"Mi", 1048576.0},  {"Ki", 1024.0},
                        {"B", 1}};
  const Unit kubernetes_decimal[] = {{"T", 1e12}, {"G", 1e9}, {"M", 1e6}, {"k", 1e3}};
  double factor = 1;
  bool found = false;
  for (const auto& u : units) {
    if (absl::EndsWithIgnoreCase(t, u.suffix)) {
      factor = u.factor;
      t = t.substr(0, t.size() - std::string(u.suffix).size());
      found = true;
      break;
    }
  }
  for (const auto& u : kubernetes_decimal) {
    if (!found && absl::EndsWith(t, u.suffix)) {
      factor = u.factor;
      t.pop_back();
      found = true;
    }
  }
  double v;
  if (!absl::SimpleAtod(absl::StripAsciiWhitespace(t), &v) || !(v > 0) || !std::isfinite(v)) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad memory size '", text, "': use a positive number with a unit, e.g. 80GiB, 80Gi, 40GB or 512MiB"));
  }
  const double bytes = v * factor;
  // 2^63 is exactly representable; anything at or above it does not fit in int64.
  if (!(bytes < 9223372036854775808.0)) {
    return absl::InvalidArgumentError(absl::StrCat("memory size '", text, "' is too large (over 8 EiB)"));
  }
  if (bytes < 1) return absl::InvalidArgumentError(absl::StrCat("memory size '", text, "' is less than one byte"));
  return static_cast<int64_t>(bytes);
}

std::string FormatBytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (std::fabs(v) >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  if (u == 0) std::snprintf(buf, sizeof(buf), "%lld B", static_cast<long long>(bytes));
  else std::snprintf(buf, sizeof(buf), "%.1f %s", v, units[u]);
  return buf;
}

}  // namespace mapd

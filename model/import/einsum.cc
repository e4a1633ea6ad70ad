#include "model/import/einsum.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace mapd {

namespace {
// Labels for the ellipsis's dimensions: characters no equation uses.
constexpr char kEllipsisLabels[] = "0123456789!#$%&*+/:;<=?@^~";

std::string StripSpaces(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (!std::isspace(static_cast<unsigned char>(c))) out.push_back(c);
  }
  return out;
}
}  // namespace

absl::StatusOr<EinsumEquation> ParseEinsum(const std::string& equation, const std::vector<int>& ranks) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("einsum equation '", equation, "': ", why));
  };
  const std::string eq = StripSpaces(equation);
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms = absl::StrSplit(lhs, ',');
  if (terms.size() != ranks.size()) {
    return bad(absl::StrCat("names ", terms.size(), " operands, ", ranks.size(), " are given"));
  }
  int ellipsis_dims = -1;
  EinsumEquation out;
  std::map<char, int> uses;
  for (size_t i = 0; i < terms.size(); ++i) {
    std::string term = terms[i];
    const size_t dots = term.find("...");
    int named = static_cast<int>(term.size()) - (dots == std::string::npos ? 0 : 3);
    for (char c : term) {
      if (c != '.' && !std::isalpha(static_cast<unsigned char>(c))) return bad(absl::StrCat("label '", std::string(1, c), "' is not a letter"));
    }
    std::string labels;
    if (dots != std::string::npos) {
      const int dims = ranks[i] - named;
      if (dims < 0) return bad(absl::StrCat("operand ", i, " has rank ", ranks[i], ", fewer than its ", named, " labels"));
      ellipsis_dims = std::max(ellipsis_dims, dims);
      // Right-aligned, as broadcasting aligns them.
      std::string ell(kEllipsisLabels + (static_cast<int>(sizeof(kEllipsisLabels)) - 1 - dims), dims);
      labels = term.substr(0, dots) + ell + term.substr(dots + 3);
    } else {
      labels = term;
    }
    if (static_cast<int>(labels.size()) != ranks[i]) {
      return bad(absl::StrCat("operand ", i, " has rank ", ranks[i], " but ", labels.size(), " labels"));
    }
    for (char c : labels) {
      if (std::count(labels.begin(), labels.end(), c) > 1) return bad("a label repeated within one operand (a diagonal) is not supported");
      ++uses[c];
    }
    out.operands.push_back(labels);
  }
  if (ellipsis_dims > static_cast<int>(sizeof(kEllipsisLabels)) - 1) return bad("the ellipsis stands for too many dimensions");
  const std::string ell = ellipsis_dims <= 0 ? "" : std::string(kEllipsisLabels + (sizeof(kEllipsisLabels) - 1 - ellipsis_dims), ellipsis_dims);
  if (arrow == std::string::npos) {
    out.output = ell;
    for (const auto& [c, n] : uses) {
      if (n == 1 && std::isalpha(static_cast<unsigned char>(c))) out.output.push_back(c);
    }
    return out;
  }
  const std::string rhs = eq.substr(arrow + 2);
  const size_t dots = rhs.find("...");
  out.output = dots == std::string::npos ? rhs : rhs.substr(0, dots) + ell + rhs.substr(dots + 3);
  for (char c : out.output) {
    if (!uses.count(c)) return bad(absl::StrCat("output label '", std::string(1, c), "' is in no operand"));
    if (std::count(out.output.begin(), out.output.end(), c) > 1) return bad("an output label is repeated");
  }
  return out;
}

}  // namespace mapd

#include "planner/sharding/placement.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace mapd {

std::string AxisPlacement::ToString() const {
  switch (kind) {
    case Kind::kReplicate: return "R";
    case Kind::kPartial: return "P";
    case Kind::kShard: return absl::StrCat("S(", dim, ")");
  }
  return "?";
}

std::string PlacementToString(const Placement& p) {
  std::string s;
  for (const auto& a : p) s += a.ToString();
  return s;
}

absl::StatusOr<Placement> ParsePlacement(const std::string& text) {
  Placement out;
  size_t i = 0;
  auto bad = [&text](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("bad placement '", text, "': ", why, "; expected e.g. S(0)R or RP"));
  };
  while (i < text.size()) {
    const char c = text[i];
    if (absl::ascii_isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (c == 'R') {
      out.push_back(AxisPlacement::R());
      ++i;
    } else if (c == 'P') {
      out.push_back(AxisPlacement::P());
      ++i;
    } else if (c == 'S') {
      const size_t close = text.find(')', i);
      if (i + 1 >= text.size() || text[i + 1] != '(' || close == std::string::npos) return bad("S needs (dim)");
      int d;
      if (!absl::SimpleAtoi(text.substr(i + 2, close - i - 2), &d) || d < 0) return bad("S(dim) needs a dimension >= 0");
      out.push_back(AxisPlacement::S(d));
      i = close + 1;
    } else {
      return bad(absl::StrCat("unexpected '", std::string(1, c), "'"));
    }
  }
  if (out.empty()) return bad("empty");
  return out;
}

Placement Replicated(int axes) { return Placement(axes, AxisPlacement::R()); }

absl::StatusOr<Shape> LocalShape(const Shape& global, const Placement& placement, const std::vector<int64_t>& mesh_shape) {
  if (placement.size() != mesh_shape.size()) {
    return absl::InvalidArgumentError(absl::StrCat("placement ", PlacementToString(placement), " has ", placement.size(),
                                                   " axes, the mesh ", mesh_shape.size()));
  }
  Shape local = global;
  for (size_t a = 0; a < placement.size(); ++a) {
    if (placement[a].kind != AxisPlacement::Kind::kShard) continue;
    const int d = placement[a].dim;
    if (d < 0 || d >= static_cast<int>(local.size())) {
      return absl::InvalidArgumentError(absl::StrCat("placement ", PlacementToString(placement), " splits dimension ", d,
                                                     " of a rank-", local.size(), " tensor"));
    }
    if (local[d] % mesh_shape[a] != 0) {
      return absl::FailedPreconditionError(absl::StrCat("dimension ", d, " of size ", local[d],
                                                        " does not divide over mesh axis ", a, " of ", mesh_shape[a],
                                                        " devices"));
    }
    local[d] /= mesh_shape[a];
  }
  return local;
}

}  // namespace mapd

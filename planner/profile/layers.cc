#include "planner/profile/layers.h"

#include <algorithm>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace mapd {

std::string LayerOfScope(const std::string& scope) {
  if (scope.empty()) return "(top)";
  std::vector<std::string> parts = absl::StrSplit(scope, '.');
  std::string out;
  for (const auto& p : parts) {
    out = out.empty() ? p : absl::StrCat(out, ".", p);
    if (!p.empty() && std::all_of(p.begin(), p.end(), [](char c) { return absl::ascii_isdigit(c); })) return out;
  }
  return parts.front();
}

bool IsRepeatedLayer(const std::string& layer) { return layer.find_first_of("0123456789") != std::string::npos; }

std::vector<std::string> RepeatedLayers(const Graph& graph) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (int n = 0; n < graph.num_nodes(); ++n) {
    const std::string layer = LayerOfScope(graph.node(n).scope());
    if (!IsRepeatedLayer(layer) || !seen.insert(layer).second) continue;
    out.push_back(layer);
  }
  return out;
}

}  // namespace mapd

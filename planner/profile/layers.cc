#include "planner/profile/layers.h"

#include <algorithm>
#include <map>
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

std::vector<std::string> RepeatedLayers(const Graph& graph) { return IndexLayers(graph).layers; }

LayerIndex IndexLayers(const Graph& graph) {
  LayerIndex out;
  out.of_node.assign(graph.num_nodes(), -1);
  std::map<std::string, int> index;
  for (int n = 0; n < graph.num_nodes(); ++n) {
    std::string layer = LayerOfScope(graph.node(n).scope());
    if (!IsRepeatedLayer(layer)) continue;
    auto [it, fresh] = index.emplace(layer, static_cast<int>(out.layers.size()));
    if (fresh) out.layers.push_back(std::move(layer));
    out.of_node[n] = it->second;
  }
  return out;
}

}  // namespace mapd

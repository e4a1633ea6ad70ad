#include "planner/lower/recompute.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "planner/profile/profiler.h"

namespace mapd {

absl::Status MarkRecompute(const Graph& graph, const std::vector<std::string>& layers, v1::RankProgram* program) {
  const std::set<std::string> chosen(layers.begin(), layers.end());
  std::set<std::string> found;
  // The layer of each instruction: its node's, or for a communicate step the layer of the
  // compute steps on both sides when they agree.
  const int n = program->instructions_size();
  std::vector<std::string> layer(n);
  for (int i = 0; i < n; ++i) {
    const v1::Instruction& ins = program->instructions(i);
    if (ins.has_compute()) layer[i] = LayerOfScope(graph.node(ins.compute().node()).scope());
  }
  for (int i = 0; i < n; ++i) {
    if (!layer[i].empty()) continue;
    int before = i - 1, after = i + 1;
    while (before >= 0 && layer[before].empty()) --before;
    while (after < n && layer[after].empty()) ++after;
    if (before >= 0 && after < n && layer[before] == layer[after]) layer[i] = layer[before];
  }
  for (int i = 0; i < n;) {
    if (!chosen.count(layer[i])) {
      ++i;
      continue;
    }
    int last = i;
    while (last + 1 < n && layer[last + 1] == layer[i]) ++last;
    v1::RecomputeSegment* s = program->add_recompute();
    s->set_first(i);
    s->set_last(last);
    s->set_layer(layer[i]);
    found.insert(layer[i]);
    i = last + 1;
  }
  for (const std::string& l : layers) {
    if (!found.count(l)) {
      return absl::InvalidArgumentError(absl::StrCat("--recompute: no operator belongs to layer '", l,
                                                     "'; the repeated layers are listed by `mapctl profile MODEL`"));
    }
  }
  return absl::OkStatus();
}

}  // namespace mapd

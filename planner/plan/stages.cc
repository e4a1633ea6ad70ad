#include "planner/plan/stages.h"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "model/graph/verifier.h"
#include "planner/plan/describe.h"
#include "planner/profile/layers.h"

namespace mapd {

absl::StatusOr<LayerSequence> FindLayerSequence(const Graph& graph) {
  LayerSequence seq;
  seq.layers = RepeatedLayers(graph);
  if (seq.layers.size() < 2) {
    return absl::FailedPreconditionError(absl::StrCat("'", graph.name(), "' has ", seq.layers.size(),
                                                      " repeated layer(s): pipeline stages cut a sequence of layers; "
                                                      "use --pipeline-stages 1"));
  }
  std::unordered_map<std::string, int> index;
  for (size_t l = 0; l < seq.layers.size(); ++l) index.emplace(seq.layers[l], static_cast<int>(l));
  const int nodes = graph.num_nodes();
  seq.layer_of.assign(nodes, 0);
  seq.replicable.assign(nodes, true);
  seq.node_needs_grad.assign(nodes, false);
  seq.layer_kind.assign(seq.layers.size(), "");
  std::unordered_set<std::string> grad;
  for (const auto& p : graph.proto().parameters()) {
    if (p.trainable()) grad.insert(p.name());
  }
  for (int n = 0; n < nodes; ++n) {
    const v1::Node& node = graph.node(n);
    int latest = 0;  // the latest layer this node reads from
    bool constant = true, needs_grad = false;
    for (const std::string& in : node.inputs()) {
      if (in.empty()) continue;
      const ValueInfo* vi = graph.FindValue(in);
      if (vi == nullptr) continue;
      needs_grad = needs_grad || grad.count(in) > 0 ||
                   (graph.FindParameter(in) != nullptr && graph.FindParameter(in)->trainable());
      if (vi->def == ValueDef::kParameter) constant = false;
      if (vi->def != ValueDef::kNode) continue;
      constant = constant && seq.replicable[vi->index];
      if (!seq.replicable[vi->index]) latest = std::max(latest, seq.layer_of[vi->index]);
    }
    seq.replicable[n] = constant;
    seq.node_needs_grad[n] = needs_grad;
    if (needs_grad) {
      for (const std::string& out : node.outputs()) {
        if (IsFloating(graph.TypeOf(out).dtype)) grad.insert(out);
      }
    }
    auto it = index.find(LayerOfScope(node.scope()));
    if (it == index.end()) {
      seq.layer_of[n] = latest;
      continue;
    }
    if (!constant && latest > it->second) {
      return absl::FailedPreconditionError(absl::StrCat("node '", node.name(), "' of layer '", seq.layers[it->second],
                                                        "' reads a value of the later layer '", seq.layers[latest],
                                                        "': the layers are not a sequence, so they cannot be cut into "
                                                        "pipeline stages; use --pipeline-stages 1"));
    }
    seq.layer_of[n] = it->second;
    std::string& kind = seq.layer_kind[it->second];
    absl::StrAppend(&kind, LayerFreeName(node.name()), "|", node.op(), "|", node.attrs_size());
    for (const std::string& out : node.outputs()) absl::StrAppend(&kind, "|", graph.TypeOf(out).ToString());
    absl::StrAppend(&kind, ";");
  }
  return seq;
}

absl::StatusOr<Graph> StageGraph(const Graph& graph, const LayerSequence& seq, int first_layer, int end_layer) {
  const int layers = seq.num_layers();
  if (first_layer < 0 || end_layer > layers || first_layer >= end_layer) {
    return absl::InvalidArgumentError(
        absl::StrCat("stage layers [", first_layer, ", ", end_layer, ") are not a range of the ", layers, " layers"));
  }
  const v1::Graph& src = graph.proto();
  const int nodes = graph.num_nodes();
  auto in_stage = [&](int n) { return !seq.replicable[n] && seq.layer_of[n] >= first_layer && seq.layer_of[n] < end_layer; };
  // The stage's nodes, and the constant nodes they need (made again here), in graph order.
  std::vector<bool> keep(nodes, false);
  std::set<std::string> graph_outputs(src.outputs().begin(), src.outputs().end());
  for (int n = nodes - 1; n >= 0; --n) {
    if (in_stage(n)) keep[n] = true;
    for (const std::string& o : graph.node(n).outputs()) {
      if (end_layer == layers && graph_outputs.count(o)) keep[n] = true;
    }
    if (!keep[n]) continue;
    for (const std::string& in : graph.node(n).inputs()) {
      const ValueInfo* vi = in.empty() ? nullptr : graph.FindValue(in);
      if (vi != nullptr && vi->def == ValueDef::kNode && seq.replicable[vi->index]) keep[vi->index] = true;
    }
  }
  v1::Graph out;
  out.set_name(absl::StrCat(graph.name(), " layers ", first_layer, "-", end_layer - 1));
  *out.mutable_metadata() = src.metadata();
  (*out.mutable_metadata())["pipeline_layers"] = absl::StrCat(seq.layers[first_layer], "..", seq.layers[end_layer - 1]);
  std::set<std::string> defined, inputs_added;
  std::vector<v1::GraphInput> sent, original;
  std::set<int> params;
  for (int n = 0; n < nodes; ++n) {
    if (!keep[n]) continue;
    const v1::Node& node = graph.node(n);
    for (const std::string& in : node.inputs()) {
      if (in.empty() || defined.count(in) || inputs_added.count(in)) continue;
      const ValueInfo* vi = graph.FindValue(in);
      if (vi == nullptr) continue;
      if (vi->def == ValueDef::kParameter) {
        params.insert(vi->index);
        continue;
      }
      inputs_added.insert(in);
      if (vi->def == ValueDef::kInput) {
        original.push_back(src.inputs(vi->index));
        continue;
      }
      // A value of an earlier stage: sent by it.
      v1::GraphInput gi;
      gi.set_name(in);
      *gi.mutable_type() = vi->type.ToProto();
      if (seq.node_needs_grad[vi->index] && IsFloating(vi->type.dtype)) gi.set_role(kActivationRole);
      sent.push_back(std::move(gi));
    }
    *out.add_nodes() = node;
    for (const std::string& o : node.outputs()) defined.insert(o);
  }
  // Sent values first: their first dimension is the batch the micro-batching follows.
  for (auto& gi : sent) *out.add_inputs() = std::move(gi);
  for (auto& gi : original) *out.add_inputs() = std::move(gi);
  for (int p : params) *out.add_parameters() = src.parameters(p);
  for (const auto& v : src.values()) {
    if (defined.count(v.name())) *out.add_values() = v;
  }
  if (end_layer == layers) {
    for (const std::string& o : src.outputs()) *out.add_outputs() = o;
  } else {
    // What later stages read of this stage's values (constants they make themselves).
    std::set<std::string> listed;
    for (int n = 0; n < nodes; ++n) {
      if (!in_stage(n)) continue;
      for (const std::string& o : graph.node(n).outputs()) {
        const ValueInfo* vi = graph.FindValue(o);
        bool later = false;
        for (int c : vi->consumers) later = later || (!seq.replicable[c] && seq.layer_of[c] >= end_layer);
        for (const std::string& g : src.outputs()) later = later || g == o;
        if (later && listed.insert(o).second) *out.add_outputs() = o;
      }
    }
  }
  for (const auto& u : src.buffer_updates()) {
    if (defined.count(u.value())) *out.add_buffer_updates() = u;
  }
  auto verified = MakeVerifiedGraph(std::move(out));
  if (!verified.ok()) {
    return absl::InternalError(absl::StrCat("the stage of layers ", seq.layers[first_layer], " to ", seq.layers[end_layer - 1],
                                            " does not verify: ", verified.status().message()));
  }
  return verified;
}

std::vector<std::string> SharedParameters(const Graph& a, const Graph& b) {
  std::set<std::string> names;
  for (const auto& p : a.proto().parameters()) names.insert(p.name());
  std::vector<std::string> out;
  for (const auto& p : b.proto().parameters()) {
    if (names.count(p.name())) out.push_back(p.name());
  }
  return out;
}

}  // namespace mapd

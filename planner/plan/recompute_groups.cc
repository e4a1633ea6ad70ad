#include "planner/plan/recompute_groups.h"

#include <algorithm>
#include <map>
#include <set>

#include "planner/plan/describe.h"
#include "planner/profile/profiler.h"
#include "planner/sharding/collectives.h"
#include "planner/sharding/placement.h"

namespace mapd {

namespace {

// "transformer.h.3" → "transformer.h.#": layers of one family share it.
std::string FamilyOf(const std::string& layer) {
  std::string f = LayerFreeName(layer + "/");
  f.pop_back();
  return f;
}

}  // namespace

std::vector<std::vector<std::string>> AddRecomputeGroups(const Graph& graph, const Cluster& cluster, const CostGraph& cg,
                                                         FoldedCostGraph* folded) {
  std::shared_ptr<const LayerIndex> index = cg.layer_index;
  if (index == nullptr) index = std::make_shared<const LayerIndex>(IndexLayers(graph));
  const std::vector<std::string>& layers = index->layers;
  const std::vector<int>& layer_of = index->of_node;
  const int nodes = graph.num_nodes();
  // Layers of one family whose nodes folded into the same classes (the same multiset) share
  // every decision: they form a group. A layer that folded differently (the first layer of a
  // LLaMA is charged the rotary tables it saves first) forms its own, kept only if none of its
  // classes is in a larger group already (a decision belongs to one group).
  std::map<std::pair<std::string, std::vector<int>>, std::vector<int>> buckets;  // (family, classes) → layers
  {
    std::vector<std::vector<int>> classes_of(layers.size());
    for (int n = 0; n < nodes; ++n) {
      if (layer_of[n] >= 0) classes_of[layer_of[n]].push_back(folded->class_of[n]);
    }
    for (size_t l = 0; l < layers.size(); ++l) {
      std::sort(classes_of[l].begin(), classes_of[l].end());
      buckets[{FamilyOf(layers[l]), classes_of[l]}].push_back(static_cast<int>(l));
    }
  }
  std::vector<const std::pair<const std::pair<std::string, std::vector<int>>, std::vector<int>>*> order;
  for (const auto& b : buckets) order.push_back(&b);
  std::stable_sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->second.size() > b->second.size(); });
  std::set<int> used;  // classes in a group already
  std::vector<std::vector<int>> class_nodes(folded->request.nodes_size());
  for (int n = 0; n < nodes; ++n) class_nodes[folded->class_of[n]].push_back(n);

  std::vector<std::vector<std::string>> added;
  for (const auto* bucket : order) {
    const std::string& family = bucket->first.first;
    const std::vector<int>& classes = bucket->first.second;
    const std::vector<int>& ids = bucket->second;
    const int64_t count = static_cast<int64_t>(ids.size());
    std::map<int, int64_t> per_layer;  // class → nodes of it in one layer
    for (int c : classes) ++per_layer[c];
    if (per_layer.empty() || std::any_of(per_layer.begin(), per_layer.end(), [&](const auto& c) { return used.count(c.first) > 0; })) {
      continue;
    }
    for (const auto& [c, k] : per_layer) used.insert(c);
    const std::set<int> in_group(ids.begin(), ids.end());
    v1::RecomputeGroup group;
    group.set_name(family);
    group.set_layers(count);
    for (const auto& [cls, per] : per_layer) {
      const double copies = static_cast<double>(per);
      int rep = -1;  // a node of the class in the group's first layer
      for (int n : class_nodes[cls]) {
        if (layer_of[n] == ids.front()) {
          rep = n;
          break;
        }
      }
      // Outputs read outside the layer (or by no node: a graph output): the next checkpoint holds them.
      const std::vector<bool> boundary = BoundaryOutputs(graph, rep, layer_of);
      v1::RecomputeMember* m = group.add_members();
      m->set_node(cls);
      for (size_t k = 0; k < cg.strategies[rep].size(); ++k) {
        const StrategyCost& c = cg.costs[rep][k];
        const double held = BoundaryBytes(graph, rep, boundary, cg.strategies[rep][k], cluster);
        // Each micro-batch in flight keeps its checkpoint; one layer at a time is made again.
        const double in_flight = static_cast<double>(cg.activations_in_flight);
        m->add_saved(copies * (c.activation_bytes - in_flight * held));
        m->add_seconds(copies * c.forward_seconds);
        m->add_rematerialized(copies * c.activation_bytes / in_flight);
      }
    }
    // Resharding inside a layer runs again when it recomputes (between layers it does not: the
    // checkpoint holds the value as produced).
    std::map<int, std::pair<int, int64_t>> intra;  // folded edge → (a cost-graph edge, how many)
    for (size_t e = 0; e < cg.edge_ports.size(); ++e) {
      const EdgePort& port = cg.edge_ports[e];
      if (folded->edge_of[e] < 0 || layer_of[port.src] < 0 || !in_group.count(layer_of[port.src]) ||
          layer_of[port.src] != layer_of[port.dst]) {
        continue;
      }
      auto [it, fresh] = intra.try_emplace(folded->edge_of[e], static_cast<int>(e), 0);
      ++it->second.second;
    }
    for (const auto& [fe, rep] : intra) {
      const EdgePort& port = cg.edge_ports[rep.first];
      const TensorType& type = graph.TypeOf(graph.node(port.src).outputs(port.output));
      // Once per micro-batch, as the edge's own seconds are.
      const double share = static_cast<double>(cg.micro_batches) * static_cast<double>(rep.second) / static_cast<double>(count);
      v1::RecomputeEdge* re = group.add_edges();
      re->set_edge(fe);
      for (const Strategy& ps : cg.strategies[port.src]) {
        for (const Strategy& cs : cg.strategies[port.dst]) {
          const double seconds = ReshardSeconds(type, ps.outputs[port.output], cs.inputs[port.input], cluster);
          re->add_seconds(seconds >= 0 ? share * seconds : 0.0);
        }
      }
    }
    *folded->request.add_recompute() = std::move(group);
    std::vector<std::string> names;
    for (int id : ids) names.push_back(layers[id]);
    added.push_back(std::move(names));
  }
  return added;
}

std::vector<bool> BoundaryOutputs(const Graph& graph, int node, const std::vector<int>& layer_of) {
  const v1::Node& n = graph.node(node);
  std::vector<bool> boundary(n.outputs_size(), false);
  for (int o = 0; o < n.outputs_size(); ++o) {
    const ValueInfo* vi = graph.FindValue(n.outputs(o));
    if (vi == nullptr) continue;
    boundary[o] = vi->consumers.empty();
    for (int consumer : vi->consumers) boundary[o] = boundary[o] || layer_of[consumer] != layer_of[node];
  }
  return boundary;
}

double BoundaryBytes(const Graph& graph, int node, const std::vector<bool>& boundary, const Strategy& strategy, const Cluster& cluster) {
  const v1::Node& n = graph.node(node);
  double bytes = 0;
  for (int o = 0; o < n.outputs_size() && o < static_cast<int>(boundary.size()); ++o) {
    if (boundary[o]) bytes += static_cast<double>(LocalBytes(graph.TypeOf(n.outputs(o)), strategy.outputs[o], cluster));
  }
  return bytes;
}

std::vector<std::string> RecomputedLayers(const std::vector<std::vector<std::string>>& group_layers,
                                          const std::vector<int64_t>& recomputed) {
  std::vector<std::string> out;
  for (size_t g = 0; g < group_layers.size() && g < recomputed.size(); ++g) {
    for (int64_t l = 0; l < recomputed[g] && l < static_cast<int64_t>(group_layers[g].size()); ++l) out.push_back(group_layers[g][l]);
  }
  return out;
}

}  // namespace mapd

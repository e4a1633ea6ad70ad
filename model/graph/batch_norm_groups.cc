#include "model/graph/batch_norm_groups.h"

#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/strings/str_cat.h"

namespace mapd {

namespace {

// Every value's type: graph inputs, parameters and node outputs.
std::unordered_map<std::string, v1::TensorType*> ValueTypes(v1::Graph& graph) {
  std::unordered_map<std::string, v1::TensorType*> types;
  for (auto& in : *graph.mutable_inputs()) types[in.name()] = in.mutable_type();
  for (auto& p : *graph.mutable_parameters()) types[p.name()] = p.mutable_type();
  for (auto& v : *graph.mutable_values()) types[v.name()] = v.mutable_type();
  return types;
}

}  // namespace

absl::StatusOr<v1::Graph> GroupBatchNorms(v1::Graph graph, int64_t groups) {
  if (groups < 1) return absl::InvalidArgumentError(absl::StrCat("batch norm groups must be at least 1, got ", groups));
  if (groups == 1) return graph;
  auto types = ValueTypes(graph);
  std::unordered_set<std::string> grouped_stats;  // the stats values made [groups, 2, C]
  for (v1::Node& node : *graph.mutable_nodes()) {
    if (node.op() != "batch_norm_stats") continue;
    if (node.attrs().count("group_size")) {
      return absl::InvalidArgumentError(absl::StrCat("batch norm '", node.name(), "' is already over groups"));
    }
    auto x = types.find(node.inputs(0));
    auto out = types.find(node.outputs(0));
    if (x == types.end() || out == types.end() || x->second->shape_size() < 2 || out->second->shape_size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat("batch norm '", node.name(), "' has no typed input [N, C, ...]"));
    }
    const int64_t batch = x->second->shape(0);
    if (batch % groups != 0) {
      return absl::InvalidArgumentError(absl::StrCat("batch norm '", node.name(), "': ", groups,
                                                     " groups do not divide its batch of ", batch,
                                                     "; give a batch that the ranks divide, or --batch-norm sync"));
    }
    (*node.mutable_attrs())["group_size"].set_i(batch / groups);
    v1::TensorType* stats = out->second;
    const int64_t channels = stats->shape(1);
    stats->clear_shape();
    for (int64_t d : {groups, int64_t{2}, channels}) stats->add_shape(d);
    grouped_stats.insert(node.outputs(0));
  }
  for (v1::Node& node : *graph.mutable_nodes()) {
    if (node.op() != "batch_norm_apply" || node.inputs_size() < 2 || !grouped_stats.count(node.inputs(1))) continue;
    auto count = node.mutable_attrs()->find("count");
    if (count == node.mutable_attrs()->end() || count->second.i() % groups != 0) {
      return absl::InvalidArgumentError(absl::StrCat("batch norm '", node.name(), "': its count is not ", groups, " groups'"));
    }
    count->second.set_i(count->second.i() / groups);
  }
  // The running statistics move by the whole batch's sums: the groups' sums added by a `sum`
  // node (under a split batch a Partial value, one small all-reduce), computed after every other
  // node, past the loss — where a rank runs them after backward, once the ranks have met at the
  // gradient buckets (RankTrainer's SumLossAndRunTail, which sums them in one all-reduce), instead of waiting for the slowest rank at every
  // batch norm along the forward. (They read only the stats and the buffers, so the order stays
  // topological.)
  std::vector<v1::Node> running;
  auto* nodes = graph.mutable_nodes();
  for (auto it = nodes->begin(); it != nodes->end();) {
    if (it->op() == "batch_norm_running_stats" && it->inputs_size() > 0 && grouped_stats.count(it->inputs(0))) {
      running.push_back(std::move(*it));
      it = nodes->erase(it);
    } else {
      ++it;
    }
  }
  for (v1::Node& node : running) {
    const std::string grouped = node.inputs(0);
    v1::Node sum;
    sum.set_name(node.name() + "/groups_summed");
    sum.set_op("sum");
    sum.set_scope(node.scope());
    sum.add_inputs(grouped);
    const std::string whole = grouped + ".groups_summed";
    sum.add_outputs(whole);
    (*sum.mutable_attrs())["dims"].mutable_ints()->add_values(0);
    (*sum.mutable_attrs())["keepdim"].set_b(false);
    v1::Value* value = graph.add_values();
    value->set_name(whole);
    value->mutable_type()->set_dtype(types[grouped]->dtype());
    for (int d = 1; d < types[grouped]->shape_size(); ++d) value->mutable_type()->add_shape(types[grouped]->shape(d));
    node.set_inputs(0, whole);
    *graph.add_nodes() = std::move(sum);
    *graph.add_nodes() = std::move(node);
  }
  (*graph.mutable_metadata())["batch_norm_groups"] = absl::StrCat(groups);
  return graph;
}

}  // namespace mapd

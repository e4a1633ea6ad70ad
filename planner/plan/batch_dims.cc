#include "planner/plan/batch_dims.h"

#include <unordered_map>

namespace mapd {

namespace {

// A tensor made from attributes (zeros_like(x), torch.zeros(B, ...), randn_like) that a batched
// node reads with the batch label carries the batch too: its dimension there is batch-sized,
// and a micro-batch (or a data-parallel device) makes its share of it. So does a size-1
// dimension broadcast to the batch (ViT's class token expanded to [B, 1, h] and concatenated
// with the patches).
void MarkBatchedCreations(const Graph& graph, const std::vector<std::unique_ptr<PreparedNode>>& prepared,
                          const v1::Node& node, const ShardingRule& rule, char label, BatchInfo* info) {
  for (int i = 0; i < node.inputs_size() && i < static_cast<int>(rule.inputs.size()); ++i) {
    const std::string& in = node.inputs(i);
    if (in.empty() || info->value_dim.count(in)) continue;
    const ValueInfo* v = graph.FindValue(in);
    if (v == nullptr || v->def != ValueDef::kNode) continue;
    const PreparedNode& producer = *prepared[v->index];
    const size_t d = rule.inputs[i].find(label);
    if (d == std::string::npos || d >= v->type.shape.size() || v->type.shape[d] != info->batch) continue;
    const v1::Node& made_by = graph.node(v->index);
    const bool broadcast = made_by.op() == "expand" && !made_by.inputs(0).empty() &&
                           !info->value_dim.count(made_by.inputs(0)) && d < producer.in[0].shape.size() &&
                           producer.in[0].shape.size() == v->type.shape.size() && producer.in[0].shape[d] == 1;
    if (!(producer.def->traits.creation || broadcast) || !producer.def->sharding) continue;
    auto made = producer.def->sharding(producer.ctx());
    if (!made.ok() || made->outputs.empty() || d >= made->outputs[0].size()) continue;
    info->value_dim[in] = static_cast<int>(d);
    info->label[v->index] = made->outputs[0][d];
  }
}

}  // namespace

absl::StatusOr<BatchInfo> FindBatch(const Graph& graph, const std::vector<std::unique_ptr<PreparedNode>>& prepared) {
  BatchInfo info;
  info.label.assign(graph.num_nodes(), 0);
  std::unordered_map<std::string, int>& batch_dim = info.value_dim;  // value → its batch dimension
  for (const auto& in : graph.proto().inputs()) {
    const TensorType& t = graph.TypeOf(in.name());
    if (t.shape.empty()) continue;
    if (info.batch == 0) info.batch = t.shape[0];
    if (t.shape[0] == info.batch) batch_dim[in.name()] = 0;
  }
  for (int n = 0; n < graph.num_nodes(); ++n) {
    const v1::Node& node = graph.node(n);
    const PreparedNode& pn = *prepared[n];
    if (!pn.def->sharding) continue;
    char label = 0;
    for (int i = 0; i < node.inputs_size() && label == 0; ++i) {
      auto it = node.inputs(i).empty() ? batch_dim.end() : batch_dim.find(node.inputs(i));
      if (it == batch_dim.end()) continue;
      auto rule = pn.def->sharding(pn.ctx());
      if (!rule.ok()) return rule.status();
      if (i < static_cast<int>(rule->inputs.size()) && it->second < static_cast<int>(rule->inputs[i].size())) {
        label = rule->inputs[i][it->second];
      }
      if (label == 0) break;
      info.label[n] = label;
      for (int o = 0; o < node.outputs_size() && o < static_cast<int>(rule->outputs.size()); ++o) {
        const size_t d = rule->outputs[o].find(label);
        if (d != std::string::npos) batch_dim[node.outputs(o)] = static_cast<int>(d);
      }
      MarkBatchedCreations(graph, prepared, node, *rule, label, &info);
    }
  }
  return info;
}

}  // namespace mapd

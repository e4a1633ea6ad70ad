#include "planner/plan/describe.h"

#include <map>
#include <regex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace mapd {

std::string LayerFreeName(const std::string& name) {
  static const std::regex kIndex("\\.[0-9]+(?=[./])");
  return std::regex_replace(name, kIndex, ".#");
}

namespace {

const v1::Parameter* TrainableMatrix(const Graph& graph, const v1::Node& node, int* input) {
  for (int i = 0; i < node.inputs_size(); ++i) {
    const v1::Parameter* p = node.inputs(i).empty() ? nullptr : graph.FindParameter(node.inputs(i));
    if (p != nullptr && p->trainable() && p->type().shape_size() >= 2) {
      *input = i;
      return p;
    }
  }
  return nullptr;
}

std::string MatrixSplit(const std::string& op, int dim) {
  if (op == "linear") return dim == 0 ? "column-parallel" : "row-parallel";
  if (op == "embedding") return dim == 0 ? "vocabulary-parallel" : "embedding dimension split";
  if (op == "conv2d") return dim == 0 ? "output channels split" : "input channels split";
  return absl::StrCat("weight dimension ", dim, " split");
}

std::string ActivationSplit(const std::string& op, int rank, int dim) {
  if (op == "scaled_dot_product_attention") {
    static const char* kNames[] = {"batch", "heads", "sequence", "head dimension"};
    if (dim < 4) return absl::StrCat(kNames[dim], " split");
  }
  if (dim == 0) return "batch split";
  if (rank == 4) {
    static const char* kNames[] = {"batch", "channels", "height", "width"};
    return absl::StrCat(kNames[dim], " split");
  }
  if (rank == 3) return dim == 1 ? "sequence split" : "features split";
  if (rank == 2) return "features split";
  return absl::StrCat("dimension ", dim, " split");
}

}  // namespace

std::string DescribeStrategy(const Graph& graph, int n, const Strategy& s) {
  const v1::Node& node = graph.node(n);
  int matrix = -1;
  TrainableMatrix(graph, node, &matrix);
  std::vector<std::string> parts;
  for (size_t a = 0; a < s.axis_label.size(); ++a) {
    if (s.axis_label[a] == 0) continue;
    std::string what;
    if (matrix >= 0 && s.inputs[matrix][a].kind == AxisPlacement::Kind::kShard) {
      what = MatrixSplit(node.op(), s.inputs[matrix][a].dim);
    } else {
      // The first activation input split on this axis names the split.
      for (int i = 0; i < node.inputs_size() && what.empty(); ++i) {
        if (node.inputs(i).empty() || graph.FindParameter(node.inputs(i)) != nullptr) continue;
        const AxisPlacement& p = s.inputs[i][a];
        if (p.kind == AxisPlacement::Kind::kShard) {
          what = ActivationSplit(node.op(), static_cast<int>(graph.TypeOf(node.inputs(i)).shape.size()), p.dim);
        }
      }
      if (what.empty()) what = absl::StrCat("'", std::string(1, s.axis_label[a]), "' split");
    }
    parts.push_back(absl::StrCat(what, " over axis ", a));
  }
  return parts.empty() ? "replicated" : absl::StrJoin(parts, ", ");
}

bool IsSummaryNode(const Graph& graph, int n) {
  const v1::Node& node = graph.node(n);
  int matrix = -1;
  return TrainableMatrix(graph, node, &matrix) != nullptr || node.op() == "scaled_dot_product_attention";
}

std::vector<LayerSummary> SummarizeLayers(const Graph& graph, const std::vector<Strategy>& strategies) {
  std::vector<LayerSummary> rows;
  std::map<std::string, size_t> row_of;  // layer-free name | words → row
  for (int n = 0; n < graph.num_nodes(); ++n) {
    if (!IsSummaryNode(graph, n)) continue;
    LayerSummary row{n, LayerFreeName(graph.node(n).name()), DescribeStrategy(graph, n, strategies[n]), 0};
    auto [it, fresh] = row_of.emplace(row.layer + "|" + row.words, rows.size());
    if (fresh) rows.push_back(std::move(row));
    ++rows[it->second].count;
  }
  return rows;
}

int SequenceParallelNorms(const Graph& graph, const std::vector<Strategy>& strategies) {
  int count = 0;
  for (int n = 0; n < graph.num_nodes() && n < static_cast<int>(strategies.size()); ++n) {
    const v1::Node& node = graph.node(n);
    if ((node.op() != "layer_norm" && node.op() != "rms_norm") || strategies[n].outputs.empty()) continue;
    const int rank = static_cast<int>(graph.TypeOf(node.outputs(0)).rank());
    for (const AxisPlacement& a : strategies[n].outputs[0]) {
      // A row dimension past the first: not the batch, not the normalised last one.
      if (a.kind == AxisPlacement::Kind::kShard && a.dim > 0 && a.dim < rank - 1) {
        ++count;
        break;
      }
    }
  }
  return count;
}

}  // namespace mapd

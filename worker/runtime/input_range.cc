#include "worker/runtime/input_range.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/ir/graph.h"
#include "model/ops/generic_op.h"
#include "model/ops/shape_util.h"

namespace mapd {

namespace {

// (the generic nodes whose inputs index, and how: generic_op.h)
int64_t GenericIndexedSize(const Graph& graph, const v1::Node& n, int slot);

// Ops through which an integer input keeps its values (only their arrangement changes).
bool PassesValues(const std::string& op) {
  static const std::set<std::string> ops = {"view",    "reshape", "flatten", "transpose", "permute",
                                            "contiguous", "unsqueeze", "squeeze", "expand", "slice",
                                            "select",  "split",   "chunk",   "cat",       "stack",
                                            "repeat_interleave", "where"};
  return ops.count(op) > 0;
}

// The size an integer tensor in input `slot` of `n` indexes: embedding's rows, the classes of a
// loss's target, the indexed dimension of index_select/gather/scatter(_add)/index_add, one_hot's
// classes; -1 when the op reads no index there.
int64_t IndexedSize(const Graph& graph, const v1::Node& n, int slot) {
  const std::string& op = n.op();
  if (op == "embedding" && slot == 0) return graph.TypeOf(n.inputs(1)).shape.at(0);
  if ((op == "cross_entropy" || op == "nll_loss") && slot == 1) {
    const TensorType& x = graph.TypeOf(n.inputs(0));
    return x.shape.at(x.rank() == 1 ? 0 : 1);
  }
  if (op == "one_hot" && slot == 0) {
    auto it = n.attrs().find("num_classes");
    return it == n.attrs().end() ? -1 : it->second.i();
  }
  static const std::set<std::string> indexing = {"index_select", "gather", "scatter", "scatter_add", "index_add"};
  if (op == kGenericOp) return GenericIndexedSize(graph, n, slot);
  if (indexing.count(op) > 0 && slot == 1) {
    const TensorType& x = graph.TypeOf(n.inputs(0));
    if (x.rank() == 0) return 1;
    auto it = n.attrs().find("dim");
    return x.shape.at(WrapDim(it == n.attrs().end() ? 0 : it->second.i(), x.rank()));
  }
  return -1;
}

// Walks the readers of `input` breadth first, each value once: `visit(node, slot, state)` is
// called for every node reading a value (in input `slot`) that carries `state`, and returns the
// state the node's outputs carry on (nullopt: the walk stops there) or an error, which ends it.
template <typename State, typename Visit>
absl::Status WalkReaders(const Graph& graph, const std::string& input, State start, Visit visit) {
  std::deque<std::pair<std::string, State>> todo = {{input, start}};
  std::set<std::string> seen = {input};
  while (!todo.empty()) {
    const auto [v, state] = todo.front();
    todo.pop_front();
    for (int ni : graph.FindValue(v)->consumers) {
      const v1::Node& n = graph.node(ni);
      for (int slot = 0; slot < n.inputs_size(); ++slot) {
        if (n.inputs(slot) != v) continue;
        absl::StatusOr<std::optional<State>> next = visit(n, slot, state);
        if (!next.ok()) return next.status();
        if (!next->has_value()) continue;
        for (const std::string& out : n.outputs()) {
          if (seen.insert(out).second) todo.push_back({out, **next});
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<int64_t> IndexBound(const v1::Graph& proto, const std::string& input) {
  MAPD_ASSIGN_OR_RETURN(Graph graph, Graph::Create(proto));
  if (graph.FindValue(input) == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("graph '", proto.name(), "' has no value '", input, "'"));
  }
  int64_t bound = std::numeric_limits<int64_t>::max();
  MAPD_RETURN_IF_ERROR(WalkReaders(graph, input, true, [&](const v1::Node& n, int slot, bool) -> absl::StatusOr<std::optional<bool>> {
    const int64_t indexed = IndexedSize(graph, n, slot);
    if (indexed >= 0) bound = std::min(bound, indexed);
    if (indexed >= 0 || !PassesValues(n.op())) return std::optional<bool>();
    return std::optional<bool>(true);
  }));
  if (bound == std::numeric_limits<int64_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot tell the value range of integer input '", input, "' of graph '", proto.name(),
        "': it indexes no embedding, index_select, gather, scatter or index_add, is no one_hot's classes and "
        "is the target of no cross_entropy/nll_loss; state its range as --input ", input, ":DTYPE[SHAPE]:LOW..HIGH "
        "(both inclusive; a job file's inputs and mapclient's input_ranges take the same)"));
  }
  return bound;
}


namespace {

// The size a generic node's input indexes: embedding_bag's indices (argument 1) the weight's
// rows (argument 0); an index tensor of aten::index the dimension of `self` it stands at.
int64_t GenericIndexedSize(const Graph& graph, const v1::Node& n, int slot) {
  auto g = GenericNode::Parse(n.attrs(), n.inputs_size());
  if (!g.ok() || g->args.size() < 2) return -1;
  const std::string name = g->Name();
  auto input_of = [&](int arg) { return g->args[arg].kind == GenericArg::Kind::kTensor ? g->args[arg].ints[0] : -1; };
  if ((name == "aten::embedding_bag" || name == "aten::_embedding_bag") && input_of(1) == slot && input_of(0) >= 0) {
    return graph.TypeOf(n.inputs(input_of(0))).shape.at(0);
  }
  if (name == "aten::index" && g->args[1].kind == GenericArg::Kind::kOptionalTensorList && input_of(0) >= 0) {
    const TensorType& self = graph.TypeOf(n.inputs(input_of(0)));
    for (size_t k = 0; k < g->args[1].ints.size(); ++k) {
      if (g->args[1].ints[k] == slot && static_cast<int>(k) < self.rank()) return self.shape[k];
    }
  }
  return -1;
}

// A number argument of a generic node (args[i]), if it is one.
std::optional<double> GenericNumber(const GenericNode& g, size_t i) {
  if (i >= g.args.size()) return std::nullopt;
  const GenericArg& a = g.args[i];
  if (a.kind == GenericArg::Kind::kInt) return static_cast<double>(a.ints[0]);
  if (a.kind == GenericArg::Kind::kFloat) return a.floats[0];
  return std::nullopt;
}

std::optional<double> AttrNumber(const v1::Node& n, const std::string& name) {
  auto it = n.attrs().find(name);
  if (it == n.attrs().end()) return std::nullopt;
  if (it->second.value_case() == v1::AttrValue::kF) return it->second.f();
  if (it->second.value_case() == v1::AttrValue::kI) return static_cast<double>(it->second.i());
  return std::nullopt;
}

using Interval = std::pair<double, double>;

Interval Clamp(Interval r, std::optional<double> lo, std::optional<double> hi) {
  if (lo) r = {std::max(r.first, *lo), std::max(r.second, *lo)};
  if (hi) r = {std::min(r.first, *hi), std::min(r.second, *hi)};
  return r;
}

Interval Affine(Interval r, double scale, double shift) {
  const double a = r.first * scale + shift, b = r.second * scale + shift;
  return {std::min(a, b), std::max(a, b)};
}

// The values of `n`'s output 0 when its input `slot` holds values in `r` and its other operands
// are constants; nullopt when MAP does not follow values through the op.
std::optional<Interval> Through(const v1::Node& n, int slot, Interval r) {
  const std::string& op = n.op();
  if (PassesValues(op) && op != "where") return r;
  if (op == "clamp") return Clamp(r, AttrNumber(n, "min"), AttrNumber(n, "max"));
  const bool scalar_operand = slot == 0 && (n.inputs_size() < 2 || n.inputs(1).empty());
  if ((op == "add" || op == "sub" || op == "mul") && scalar_operand) {
    auto c = AttrNumber(n, "scalar");
    if (!c) return std::nullopt;
    const double alpha = AttrNumber(n, "alpha").value_or(1.0);
    if (op == "mul") return Affine(r, *c, 0);
    return Affine(r, 1, op == "add" ? alpha * *c : -alpha * *c);
  }
  if (op == "where" && slot >= 1) {
    auto other = AttrNumber(n, slot == 1 ? "y_scalar" : "x_scalar");
    if (!other) return std::nullopt;
    return Interval{std::min(r.first, *other), std::max(r.second, *other)};
  }
  if (op != kGenericOp) return std::nullopt;
  auto g = GenericNode::Parse(n.attrs(), n.inputs_size());
  if (!g.ok() || g->args.empty() || g->args[0].kind != GenericArg::Kind::kTensor || g->args[0].ints[0] != slot) return std::nullopt;
  const std::string name = g->Name();
  const auto c = GenericNumber(*g, 1);
  if ((name == "aten::remainder" || name == "aten::fmod") && c && *c > 0) {
    if (name == "aten::remainder" || r.first >= 0) return Interval{0, *c - 1};
    return Interval{-(*c - 1), *c - 1};
  }
  if (name == "aten::clamp") return Clamp(r, GenericNumber(*g, 1), GenericNumber(*g, 2));
  if (name == "aten::clamp_min") return Clamp(r, c, std::nullopt);
  if (name == "aten::clamp_max") return Clamp(r, std::nullopt, c);
  if ((name == "aten::add" || name == "aten::sub") && c) {
    const double alpha = GenericNumber(*g, 2).value_or(1.0);
    return Affine(r, 1, name == "aten::add" ? alpha * *c : -alpha * *c);
  }
  if (name == "aten::mul" && c) return Affine(r, *c, 0);
  return std::nullopt;
}

}  // namespace

absl::StatusOr<ValueRange> InputRange(const v1::Graph& proto, const std::string& input) {
  const v1::GraphInput* in = nullptr;
  for (const auto& i : proto.inputs()) {
    if (i.name() == input) in = &i;
  }
  if (in == nullptr || !in->has_value_range()) {
    MAPD_ASSIGN_OR_RETURN(int64_t bound, IndexBound(proto, input));
    return ValueRange{0, bound - 1};
  }
  const ValueRange stated{in->value_range().low(), in->value_range().high()};
  MAPD_ASSIGN_OR_RETURN(Graph graph, Graph::Create(proto));
  // Forward: each value's range, through the ops MAP follows; every index reached must fit.
  const Interval start{static_cast<double>(stated.low), static_cast<double>(stated.high)};
  MAPD_RETURN_IF_ERROR(WalkReaders(graph, input, start, [&](const v1::Node& n, int slot, Interval r) -> absl::StatusOr<std::optional<Interval>> {
    const int64_t indexed = IndexedSize(graph, n, slot);
    if (indexed >= 0 && (r.first < 0 || r.second > static_cast<double>(indexed - 1))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input '", input, "' ranges ", stated.low, "..", stated.high, ", so node '", n.name(), "' (", n.op(),
          ") reads indices in ", static_cast<int64_t>(r.first), "..", static_cast<int64_t>(r.second), " where it takes 0..",
          indexed - 1, "; state a range that fits"));
    }
    return Through(n, slot, r);
  }));
  return stated;
}

}  // namespace mapd

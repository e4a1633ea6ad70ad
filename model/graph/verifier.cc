#include "model/graph/verifier.h"

#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/ir/tensor_type.h"

namespace mapd {
namespace {

absl::Status Invalid(const std::string& msg) { return absl::InvalidArgumentError(msg); }

// Bounds on any one tensor (graphs come from clients): beyond them no device holds it, and the
// products of its sizes (elements, bytes, FLOPs) would overflow 64 bits.
constexpr int kMaxRank = 16;
constexpr int64_t kMaxElements = int64_t{1} << 48;  // 256 Ti elements: 1 PiB of fp32

absl::Status CheckType(const v1::TensorType& t, const std::string& what) {
  if (t.dtype() == v1::DTYPE_UNSPECIFIED || !v1::DType_IsValid(t.dtype())) {
    return Invalid(absl::StrCat(what, " has no valid dtype"));
  }
  if (t.shape_size() > kMaxRank) {
    return Invalid(absl::StrCat(what, " has ", t.shape_size(), " dimensions; a tensor has at most ", kMaxRank));
  }
  int64_t elements = 1;
  for (int64_t d : t.shape()) {
    if (d < 0) {
      return Invalid(absl::StrCat(what, " has a negative dimension in ",
                                  TensorType::FromProto(t).ToString()));
    }
    // elements · d ≤ kMaxElements, checked without forming the product.
    if (d > 0 && elements > kMaxElements / d) {
      return Invalid(absl::StrCat(what, " of shape ", TensorType::FromProto(t).ToString(), " has more than 2^48 elements; ",
                                  "no device holds it (smaller sizes)"));
    }
    elements *= d;
  }
  return absl::OkStatus();
}

struct Def {
  int node = -1;  // -1 for inputs and parameters
  const v1::TensorType* type = nullptr;
};

// Finds a cycle through node `start` in the producer graph; returns its node names. Iterative
// (an explicit stack of (node, next input)): a graph's depth is the client's to choose, and a
// hundred thousand nodes in reverse order must not overflow the call stack.
std::vector<std::string> FindCycle(const v1::Graph& g, const std::unordered_map<std::string, Def>& defs, int start) {
  std::vector<int> state(g.nodes_size(), 0);  // 0 new, 1 on the path, 2 done
  std::vector<std::pair<int, int>> path;      // (node, index of the next input to follow)
  state[start] = 1;
  path.push_back({start, 0});
  while (!path.empty()) {
    auto& [n, next] = path.back();
    if (next == g.nodes(n).inputs_size()) {
      state[n] = 2;
      path.pop_back();
      continue;
    }
    auto it = defs.find(g.nodes(n).inputs(next++));
    if (it == defs.end() || it->second.node < 0) continue;
    const int p = it->second.node;
    if (state[p] == 1) {  // back on the path: the cycle is the path from p on, and p again
      std::vector<std::string> cycle;
      bool on = false;
      for (const auto& [m, unused] : path) {
        on = on || m == p;
        if (on) cycle.push_back(g.nodes(m).name());
      }
      cycle.push_back(g.nodes(p).name());
      return cycle;
    }
    if (state[p] == 0) {
      state[p] = 1;
      path.push_back({p, 0});
    }
  }
  return {};
}

// "a -> b -> c -> a", or its first and last names around a count when it is long.
std::string DescribeCycle(const std::vector<std::string>& cycle) {
  constexpr size_t kShown = 8;
  if (cycle.size() <= 2 * kShown) return absl::StrJoin(cycle, " -> ");
  return absl::StrCat(absl::StrJoin(cycle.begin(), cycle.begin() + kShown, " -> "), " -> ... (", cycle.size() - 2 * kShown,
                      " more) -> ", absl::StrJoin(cycle.end() - kShown, cycle.end(), " -> "));
}

}  // namespace

absl::Status VerifyGraph(const v1::Graph& g, const OpRegistry& registry) {
  std::unordered_map<std::string, Def> defs;
  auto define = [&defs](const std::string& name, Def d, const std::string& what) -> absl::Status {
    if (name.empty()) return Invalid(absl::StrCat(what, " has an empty name"));
    if (!defs.emplace(name, d).second) {
      return Invalid(absl::StrCat(what, " defines value '", name, "', which is already defined"));
    }
    return absl::OkStatus();
  };

  for (int i = 0; i < g.inputs_size(); ++i) {
    const auto& in = g.inputs(i);
    const std::string what = absl::StrCat("graph input '", in.name(), "'");
    if (auto st = CheckType(in.type(), what); !st.ok()) return st;
    if (auto st = define(in.name(), {-1, &in.type()}, what); !st.ok()) return st;
  }
  std::unordered_set<std::string> param_names;
  for (const auto& p : g.parameters()) {
    const std::string what = absl::StrCat("parameter '", p.name(), "'");
    if (auto st = CheckType(p.type(), what); !st.ok()) return st;
    if (auto st = define(p.name(), {-1, &p.type()}, what); !st.ok()) return st;
    if (p.kind() == v1::Parameter::KIND_UNSPECIFIED) return Invalid(absl::StrCat(what, " has no kind"));
    if (p.trainable() && (p.kind() != v1::Parameter::PARAMETER || !IsFloating(p.type().dtype()))) {
      return Invalid(absl::StrCat(what, " is trainable but is not a floating-point PARAMETER"));
    }
    param_names.insert(p.name());
    for (const auto& a : p.aliases()) {
      if (!param_names.insert(a).second) return Invalid(absl::StrCat(what, ": alias '", a, "' is used twice"));
    }
  }

  std::unordered_map<std::string, const v1::TensorType*> recorded;
  for (const auto& v : g.values()) {
    if (!recorded.emplace(v.name(), &v.type()).second) {
      return Invalid(absl::StrCat("value '", v.name(), "' has more than one recorded type"));
    }
  }
  std::unordered_set<std::string> node_names;
  for (int n = 0; n < g.nodes_size(); ++n) {
    const auto& node = g.nodes(n);
    const std::string what = absl::StrCat("node '", node.name(), "' (", node.op(), ")");
    if (node.name().empty()) return Invalid(absl::StrCat("node #", n, " (", node.op(), ") has no name"));
    if (!node_names.insert(node.name()).second) return Invalid(absl::StrCat(what, ": node name is used twice"));
    if (registry.Find(node.op()) == nullptr) {
      return Invalid(absl::StrCat(what, ": unknown op '", node.op(), "' (not in the op registry)"));
    }
    if (node.outputs_size() == 0) return Invalid(absl::StrCat(what, " defines no values"));
    for (const auto& out : node.outputs()) {
      auto rt = recorded.find(out);
      if (rt == recorded.end()) {
        return Invalid(absl::StrCat(what, " defines value '", out, "' but no type is recorded for it"));
      }
      if (auto st = CheckType(*rt->second, absl::StrCat("value '", out, "'")); !st.ok()) return st;
      if (auto st = define(out, {n, rt->second}, what); !st.ok()) return st;
    }
  }
  for (const auto& kv : recorded) {
    if (!defs.count(kv.first)) {
      return Invalid(absl::StrCat("a type is recorded for value '", kv.first, "', which no node defines"));
    }
  }

  // Dangling reads, then order and cycles.
  for (int n = 0; n < g.nodes_size(); ++n) {
    const auto& node = g.nodes(n);
    for (int i = 0; i < node.inputs_size(); ++i) {
      const std::string& in = node.inputs(i);
      if (in.empty()) continue;
      auto it = defs.find(in);
      if (it == defs.end()) {
        return Invalid(absl::StrCat("node '", node.name(), "' (", node.op(), ") input ", i, " reads value '", in,
                                    "', which no input, parameter or node defines (dangling value)"));
      }
    }
  }
  for (int n = 0; n < g.nodes_size(); ++n) {
    const auto& node = g.nodes(n);
    for (const auto& in : node.inputs()) {
      if (in.empty()) continue;
      const Def& d = defs.at(in);
      if (d.node >= n) {
        auto cycle = FindCycle(g, defs, n);
        if (!cycle.empty()) {
          return Invalid(absl::StrCat("the graph has a cycle: ", DescribeCycle(cycle)));
        }
        return Invalid(absl::StrCat("node '", node.name(), "' reads value '", in, "' defined by the later node '",
                                    g.nodes(d.node).name(), "'; nodes must be in topological order"));
      }
    }
  }

  // Shapes and attributes.
  for (const auto& node : g.nodes()) {
    std::vector<TensorType> in_types;
    in_types.reserve(node.inputs_size());
    for (const auto& in : node.inputs()) {
      in_types.push_back(in.empty() ? TensorType() : TensorType::FromProto(*defs.at(in).type));
    }
    std::vector<const TensorType*> ptrs;
    for (int i = 0; i < node.inputs_size(); ++i) ptrs.push_back(node.inputs(i).empty() ? nullptr : &in_types[i]);
    auto inferred = registry.Infer(node.name(), node.op(), ptrs, node.attrs());
    if (!inferred.ok()) return inferred.status();
    if (static_cast<int>(inferred->size()) != node.outputs_size()) {
      return Invalid(absl::StrCat("node '", node.name(), "' (", node.op(), ") defines ", node.outputs_size(),
                                  " values but the op yields ", inferred->size()));
    }
    for (int o = 0; o < node.outputs_size(); ++o) {
      const TensorType rec = TensorType::FromProto(*defs.at(node.outputs(o)).type);
      if (rec != (*inferred)[o]) {
        return Invalid(absl::StrCat("node '", node.name(), "' (", node.op(), ") output '", node.outputs(o),
                                    "' is recorded as ", rec.ToString(), " but its inputs and attributes give ",
                                    (*inferred)[o].ToString()));
      }
    }
  }

  for (const auto& out : g.outputs()) {
    if (!defs.count(out)) return Invalid(absl::StrCat("graph output '", out, "' is not a defined value"));
  }
  std::unordered_map<std::string, const v1::Parameter*> params;
  for (const auto& p : g.parameters()) params[p.name()] = &p;
  for (const auto& u : g.buffer_updates()) {
    auto pit = params.find(u.buffer());
    const v1::Parameter* buf = pit == params.end() ? nullptr : pit->second;
    if (buf == nullptr || buf->kind() != v1::Parameter::BUFFER) {
      return Invalid(absl::StrCat("buffer update names '", u.buffer(), "', which is not a buffer"));
    }
    auto it = defs.find(u.value());
    if (it == defs.end()) {
      return Invalid(absl::StrCat("buffer update of '", u.buffer(), "' reads undefined value '", u.value(), "'"));
    }
    if (TensorType::FromProto(*it->second.type).shape != TensorType::FromProto(buf->type()).shape) {
      return Invalid(absl::StrCat("buffer update of '", u.buffer(), "' has shape ",
                                  TensorType::FromProto(*it->second.type).ToString(), ", the buffer has ",
                                  TensorType::FromProto(buf->type()).ToString()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Graph> MakeVerifiedGraph(v1::Graph graph, const OpRegistry& registry) {
  if (auto st = VerifyGraph(graph, registry); !st.ok()) return st;
  return Graph::Create(std::move(graph));
}

}  // namespace mapd

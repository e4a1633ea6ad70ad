#include "model/ir/graph.h"

#include <algorithm>
#include <limits>
#include <map>

#include "absl/strings/str_cat.h"

namespace mapd {

absl::StatusOr<Graph> Graph::Create(v1::Graph proto) {
  Graph g;
  auto shared = std::make_shared<v1::Graph>(std::move(proto));
  g.proto_ = shared;
  const v1::Graph& p = *shared;

  auto define = [&g](const std::string& name, ValueInfo info,
                     const std::string& what) -> absl::Status {
    if (name.empty()) return absl::InvalidArgumentError(absl::StrCat(what, " has an empty name"));
    if (!g.values_.emplace(name, std::move(info)).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " defines value '", name, "', which is already defined; value names must be unique"));
    }
    return absl::OkStatus();
  };

  for (int i = 0; i < p.inputs_size(); ++i) {
    ValueInfo info{TensorType::FromProto(p.inputs(i).type()), ValueDef::kInput, i, 0, {}};
    auto st = define(p.inputs(i).name(), info, absl::StrCat("graph input #", i));
    if (!st.ok()) return st;
  }
  for (int i = 0; i < p.parameters_size(); ++i) {
    const auto& par = p.parameters(i);
    ValueInfo info{TensorType::FromProto(par.type()), ValueDef::kParameter, i, 0, {}};
    auto st = define(par.name(), info, absl::StrCat("parameter '", par.name(), "'"));
    if (!st.ok()) return st;
    g.param_by_name_[par.name()] = i;
    for (const auto& alias : par.aliases()) g.param_by_name_.emplace(alias, i);
  }

  std::unordered_map<std::string, const v1::TensorType*> recorded;
  for (const auto& v : p.values()) recorded[v.name()] = &v.type();

  for (int n = 0; n < p.nodes_size(); ++n) {
    const v1::Node& node = p.nodes(n);
    for (const auto& in : node.inputs()) {
      if (in.empty()) continue;  // an absent optional input
      auto it = g.values_.find(in);
      if (it == g.values_.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "node '", node.name(), "' (", node.op(), ") reads value '", in,
            "', which is not defined by an input, a parameter or an earlier node"));
      }
      auto& cons = it->second.consumers;
      if (cons.empty() || cons.back() != n) cons.push_back(n);
    }
    for (int o = 0; o < node.outputs_size(); ++o) {
      const std::string& out = node.outputs(o);
      auto rt = recorded.find(out);
      if (rt == recorded.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "node '", node.name(), "' (", node.op(), ") defines value '", out,
            "' but the graph records no type for it (add it to Graph.values)"));
      }
      ValueInfo info{TensorType::FromProto(*rt->second), ValueDef::kNode, n, o, {}};
      auto st = define(out, info, absl::StrCat("node '", node.name(), "'"));
      if (!st.ok()) return st;
    }
  }
  for (const auto& out : p.outputs()) {
    if (!g.values_.count(out)) {
      return absl::InvalidArgumentError(
          absl::StrCat("graph output '", out, "' is not a defined value"));
    }
  }
  return g;
}

const ValueInfo* Graph::FindValue(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? nullptr : &it->second;
}

const TensorType& Graph::TypeOf(const std::string& name) const { return values_.at(name).type; }

const v1::Parameter* Graph::FindParameter(const std::string& name) const {
  auto it = param_by_name_.find(name);
  return it == param_by_name_.end() ? nullptr : &proto_->parameters(it->second);
}

namespace {
// The sum of the parameters' elements (`trainable_only`: of trainable ones), saturating at
// INT64_MAX: each tensor is verified to hold at most 2^48 elements, but a graph may list many.
int64_t SumParameterElements(const v1::Graph& g, bool trainable_only) {
  int64_t n = 0;
  for (const auto& par : g.parameters()) {
    if (trainable_only && !par.trainable()) continue;
    const int64_t elements = NumElements(Shape(par.type().shape().begin(), par.type().shape().end()));
    if (__builtin_add_overflow(n, elements, &n)) return std::numeric_limits<int64_t>::max();
  }
  return n;
}
}  // namespace

int64_t Graph::NumTrainableParameters() const { return SumParameterElements(*proto_, true); }

int64_t Graph::NumParameterElements() const { return SumParameterElements(*proto_, false); }

std::vector<std::pair<std::string, int>> Graph::OpCounts() const {
  std::map<std::string, int> counts;
  for (const auto& node : proto_->nodes()) ++counts[node.op()];
  std::vector<std::pair<std::string, int>> out(counts.begin(), counts.end());
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return out;
}

}  // namespace mapd

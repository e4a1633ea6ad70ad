#include "model/graph/mixed_precision.h"

#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "model/ir/dtype.h"
#include "model/ir/tensor_type.h"

namespace mapd {

namespace {

bool IsLossOp(const std::string& op) { return op == "cross_entropy" || op == "nll_loss" || op == "mse_loss"; }

bool HasDTypeAttr(const OpDef& def) {
  for (const AttrSpec& a : def.attrs) {
    if (a.name == "dtype") return true;
  }
  return false;
}

void ToBf16(v1::TensorType* t) {
  if (t->dtype() == v1::FLOAT32) t->set_dtype(v1::BFLOAT16);
}

// A name no value of the graph has yet, from `base`.
std::string FreshName(const std::string& base, std::unordered_set<std::string>& taken) {
  std::string name = base;
  for (int k = 2; taken.count(name); ++k) name = absl::StrCat(base, ".", k);
  taken.insert(name);
  return name;
}

}  // namespace

bool IsBf16Mixed(const v1::Graph& g) {
  for (const auto& p : g.parameters()) {
    if (p.type().dtype() == v1::FLOAT32) return false;
  }
  for (const auto& in : g.inputs()) {
    if (in.type().dtype() == v1::FLOAT32) return false;
  }
  return true;
}

absl::StatusOr<v1::Graph> ToBf16Mixed(v1::Graph g, const OpRegistry& registry) {
  if (IsBf16Mixed(g)) return g;
  std::unordered_map<std::string, v1::TensorType> type;  // every value's type as rewritten
  std::unordered_set<std::string> taken;
  for (auto& in : *g.mutable_inputs()) {
    ToBf16(in.mutable_type());
    type[in.name()] = in.type();
    taken.insert(in.name());
  }
  for (auto& p : *g.mutable_parameters()) {
    // Imported data stays as stored; it is converted when the parameter is made.
    if (p.has_data() && p.data().stored_dtype() == v1::DTYPE_UNSPECIFIED) p.mutable_data()->set_stored_dtype(p.type().dtype());
    ToBf16(p.mutable_type());
    type[p.name()] = p.type();
    taken.insert(p.name());
    for (const auto& alias : p.aliases()) type[alias] = p.type();
  }
  for (const auto& v : g.values()) taken.insert(v.name());

  auto infer = [&](v1::Node& node) -> absl::Status {
    std::vector<TensorType> in_types(node.inputs_size());
    std::vector<const TensorType*> ptrs(node.inputs_size(), nullptr);
    for (int i = 0; i < node.inputs_size(); ++i) {
      if (node.inputs(i).empty()) continue;
      auto it = type.find(node.inputs(i));
      if (it == type.end()) return absl::InvalidArgumentError(absl::StrCat("node '", node.name(), "' reads unknown value '", node.inputs(i), "'"));
      in_types[i] = TensorType::FromProto(it->second);
      ptrs[i] = &in_types[i];
    }
    auto out = registry.Infer(node.name(), node.op(), ptrs, node.attrs());
    if (!out.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("in bf16 mixed precision, ", out.status().message()));
    }
    if (static_cast<int>(out->size()) != node.outputs_size()) {
      return absl::InvalidArgumentError(absl::StrCat("node '", node.name(), "' (", node.op(), ") defines ", node.outputs_size(),
                                                     " values but the op yields ", out->size()));
    }
    for (int o = 0; o < node.outputs_size(); ++o) type[node.outputs(o)] = (*out)[o].ToProto();
    return absl::OkStatus();
  };

  std::vector<v1::Node> nodes;
  nodes.reserve(g.nodes_size());
  std::vector<v1::Value> casts;  // values the inserted casts define
  for (v1::Node& node : *g.mutable_nodes()) {
    const OpDef* def = registry.Find(node.op());
    if (def == nullptr) return absl::InvalidArgumentError(absl::StrCat("node '", node.name(), "' has unknown op '", node.op(), "'"));
    if (node.inputs_size() == 0 && HasDTypeAttr(*def)) {
      // A creation op: bf16 where it would make f32 (named or by default).
      auto it = node.attrs().find("dtype");
      bool f32 = false;
      if (it != node.attrs().end()) {
        auto d = ParseDType(it->second.s());
        f32 = d.ok() && *d == v1::FLOAT32;
      } else {
        auto out = registry.Infer(node.name(), node.op(), {}, node.attrs());
        f32 = out.ok() && !out->empty() && (*out)[0].dtype == v1::FLOAT32;
      }
      if (f32) (*node.mutable_attrs())["dtype"].set_s(DTypeShortName(v1::BFLOAT16));
    }
    if (IsLossOp(node.op())) {
      for (int i = 0; i < node.inputs_size(); ++i) {
        const std::string in = node.inputs(i);
        if (in.empty() || !IsFloating(type.at(in).dtype()) || type.at(in).dtype() == v1::FLOAT32) continue;
        v1::Node cast;
        cast.set_name(FreshName(absl::StrCat(node.name(), ".to_f32.", i), taken));
        cast.set_op("to");
        cast.set_scope(node.scope());
        cast.add_inputs(in);
        const std::string out = FreshName(absl::StrCat(in, ".f32"), taken);
        cast.add_outputs(out);
        (*cast.mutable_attrs())["dtype"].set_s(DTypeShortName(v1::FLOAT32));
        if (auto st = infer(cast); !st.ok()) return st;
        v1::Value v;
        v.set_name(out);
        *v.mutable_type() = type.at(out);
        casts.push_back(std::move(v));
        node.set_inputs(i, out);
        nodes.push_back(std::move(cast));
      }
    }
    if (auto st = infer(node); !st.ok()) return st;
    nodes.push_back(std::move(node));
  }
  g.clear_nodes();
  for (v1::Node& n : nodes) *g.add_nodes() = std::move(n);
  for (auto& v : *g.mutable_values()) {
    auto it = type.find(v.name());
    if (it != type.end()) *v.mutable_type() = it->second;
  }
  for (v1::Value& v : casts) *g.add_values() = std::move(v);
  (*g.mutable_metadata())["precision"] = "bf16";
  return g;
}

}  // namespace mapd

#include "model/ops/registry.h"

#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace mapd {

const OpRegistry& OpRegistry::Global() {
  static const OpRegistry* registry = [] {
    auto* r = new OpRegistry();
    RegisterLinearOps(*r);
    RegisterNormOps(*r);
    RegisterElementwiseOps(*r);
    RegisterReduceOps(*r);
    RegisterShapeOps(*r);
    RegisterCreationOps(*r);
    RegisterConvOps(*r);
    RegisterLossOps(*r);
    RegisterCommOps(*r);
    RegisterIndexOps(*r);
    RegisterGenericOps(*r);
    return r;
  }();
  return *registry;
}

absl::Status OpRegistry::Register(OpDef def) {
  if (def.name.empty() || !def.infer) {
    return absl::InvalidArgumentError("an op definition needs a name and an infer function");
  }
  const std::string name = def.name;
  if (!ops_.emplace(name, std::move(def)).second) {
    return absl::AlreadyExistsError(absl::StrCat("op '", name, "' is registered twice"));
  }
  return absl::OkStatus();
}

void OpRegistry::Add(Op& op) {
  OpDef def = op.Take();
  const std::string name = def.name;
  if (auto st = Register(std::move(def)); !st.ok()) {
    std::fprintf(stderr, "mapd: the op registry cannot register '%s': %s\n", name.c_str(), std::string(st.message()).c_str());
    std::abort();
  }
}

bool IsViewNode(const OpDef& def, const CostContext& ctx) {
  if (def.is_view) return def.is_view(ctx);
  return def.traits.view && !(def.traits.copies_if_noncontiguous && !ctx.input_contiguous(0));
}

bool OutputNeedsGrad(const OpDef& def, const CostContext& ctx, int o, bool any_input_needs_grad) {
  if (!any_input_needs_grad || o >= static_cast<int>(ctx.outputs.size()) || !IsFloating(ctx.outputs[o].dtype)) return false;
  return def.output_grad ? def.output_grad(ctx, o) : true;
}

const OpDef* OpRegistry::Find(const std::string& name) const {
  auto it = ops_.find(name);
  return it == ops_.end() ? nullptr : &it->second;
}

std::vector<std::string> OpRegistry::Names() const {
  std::vector<std::string> out;
  for (const auto& kv : ops_) out.push_back(kv.first);
  return out;
}

namespace {

bool KindMatches(AttrKind kind, const v1::AttrValue& v) {
  switch (kind) {
    case AttrKind::kInt: return v.value_case() == v1::AttrValue::kI || v.value_case() == v1::AttrValue::kB;
    case AttrKind::kFloat:
    case AttrKind::kNumber:
      return v.value_case() == v1::AttrValue::kF || v.value_case() == v1::AttrValue::kI ||
             v.value_case() == v1::AttrValue::kB;
    case AttrKind::kString: return v.value_case() == v1::AttrValue::kS;
    case AttrKind::kBool: return v.value_case() == v1::AttrValue::kB || v.value_case() == v1::AttrValue::kI;
    case AttrKind::kInts: return v.value_case() == v1::AttrValue::kInts || v.value_case() == v1::AttrValue::kI;
    case AttrKind::kFloats: return v.value_case() == v1::AttrValue::kFloats;
    case AttrKind::kStrings: return v.value_case() == v1::AttrValue::kStrings;
  }
  return false;
}

const char* KindName(AttrKind kind) {
  switch (kind) {
    case AttrKind::kInt: return "int";
    case AttrKind::kFloat: return "float";
    case AttrKind::kNumber: return "number";
    case AttrKind::kString: return "string";
    case AttrKind::kBool: return "bool";
    case AttrKind::kInts: return "ints";
    case AttrKind::kFloats: return "floats";
    case AttrKind::kStrings: return "strings";
  }
  return "?";
}

}  // namespace

absl::StatusOr<std::vector<TensorType>> OpRegistry::Infer(
    const std::string& node_name, const std::string& op,
    const std::vector<const TensorType*>& inputs, const AttrMap& attrs) const {
  const OpDef* def = Find(op);
  if (def == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("node '", node_name, "': unknown op '", op, "' (not in the op registry)"));
  }
  OpContext ctx(node_name, op, inputs, attrs);
  const int n = static_cast<int>(inputs.size());
  const int declared = static_cast<int>(def->inputs.size());
  int required = 0;
  for (int i = 0; i < declared; ++i) {
    if (!def->inputs[i].optional) required = i + 1;
  }
  if (n < required || (!def->variadic && n > declared)) {
    std::vector<std::string> names;
    for (const auto& in : def->inputs) names.push_back(in.optional ? in.name + "?" : in.name);
    if (def->variadic) names.back() += "...";
    return ctx.Error("takes inputs (", absl::StrJoin(names, ", "), "), got ", n, " input(s)");
  }
  for (int i = 0; i < n; ++i) {
    const OpInputSpec& spec = def->inputs[std::min(i, declared - 1)];
    if (inputs[i] == nullptr && !spec.optional) {
      return ctx.Error("input ", i, " ('", spec.name, "') is required but absent");
    }
    if (inputs[i] != nullptr) {
      for (int64_t d : inputs[i]->shape) {
        if (d < 0) return ctx.Error("input ", i, " ('", spec.name, "') has a negative dimension: ", inputs[i]->ToString());
      }
    }
  }
  for (const auto& kv : attrs) {
    const AttrSpec* spec = nullptr;
    for (const auto& s : def->attrs) {
      if (s.name == kv.first) spec = &s;
    }
    if (spec == nullptr) {
      std::vector<std::string> known;
      for (const auto& s : def->attrs) known.push_back(s.name);
      return ctx.Error("unknown attribute '", kv.first, "' (known: ",
                       known.empty() ? "none" : absl::StrJoin(known, ", "), ")");
    }
    if (!KindMatches(spec->kind, kv.second)) {
      return ctx.Error("attribute '", kv.first, "' must be of kind ", KindName(spec->kind), ", got ",
                       AttrKindName(kv.second), " ", AttrValueToString(kv.second));
    }
  }
  for (const auto& s : def->attrs) {
    if (s.required && !attrs.count(s.name)) return ctx.Error("missing required attribute '", s.name, "'");
  }
  return def->infer(ctx);
}

}  // namespace mapd

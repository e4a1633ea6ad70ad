#include "model/ir/dump.h"

#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/ir/attrs.h"
#include "model/ir/tensor_type.h"

namespace mapd {

std::string InitRuleToString(const v1::InitRule& init) {
  switch (init.kind()) {
    case v1::InitRule::ZEROS: return "zeros";
    case v1::InitRule::ONES: return "ones";
    case v1::InitRule::NORMAL: return absl::StrCat("normal(", init.mean(), ", ", init.std(), ")");
    case v1::InitRule::UNIFORM: return absl::StrCat("uniform(", init.low(), ", ", init.high(), ")");
    case v1::InitRule::KAIMING_UNIFORM: return absl::StrCat("kaiming_uniform(fan_in=", init.fan_in(), ")");
    case v1::InitRule::ROPE_COS: return absl::StrCat("rope_cos(theta=", init.theta(), ")");
    case v1::InitRule::ROPE_SIN: return absl::StrCat("rope_sin(theta=", init.theta(), ")");
    case v1::InitRule::CAUSAL_MASK: return "causal_mask";
    default: return "unspecified";
  }
}

const char* ParameterKindName(v1::Parameter::Kind k) {
  switch (k) {
    case v1::Parameter::PARAMETER: return "parameter";
    case v1::Parameter::BUFFER: return "buffer";
    case v1::Parameter::CONSTANT: return "constant";
    default: return "unspecified";
  }
}

std::string DumpGraphText(const v1::Graph& g) {
  std::unordered_map<std::string, const v1::TensorType*> types;
  for (const auto& v : g.values()) types[v.name()] = &v.type();
  std::string out = absl::StrCat("graph ", g.name(), " {\n");
  for (const auto& in : g.inputs()) {
    absl::StrAppend(&out, "  input %", in.name(), ": ", TensorType::FromProto(in.type()).ToString());
    if (!in.role().empty()) absl::StrAppend(&out, "  # ", in.role());
    out += "\n";
  }
  for (const auto& p : g.parameters()) {
    absl::StrAppend(&out, "  param %", p.name(), ": ", TensorType::FromProto(p.type()).ToString(),
                    "  # ", ParameterKindName(p.kind()), p.trainable() ? ", trainable" : "");
    if (p.has_init()) absl::StrAppend(&out, ", init ", InitRuleToString(p.init()));
    if (p.has_data()) absl::StrAppend(&out, ", data ", p.data().key());
    if (p.aliases_size() > 0) absl::StrAppend(&out, ", aliases ", absl::StrJoin(p.aliases(), ","));
    out += "\n";
  }
  for (const auto& n : g.nodes()) {
    std::vector<std::string> outs, ins, out_types;
    for (const auto& o : n.outputs()) {
      outs.push_back(absl::StrCat("%", o));
      auto it = types.find(o);
      out_types.push_back(it == types.end() ? "?" : TensorType::FromProto(*it->second).ToString());
    }
    for (const auto& i : n.inputs()) ins.push_back(i.empty() ? "None" : absl::StrCat("%", i));
    absl::StrAppend(&out, "  ", absl::StrJoin(outs, ", "), " = ", n.op(), "(", absl::StrJoin(ins, ", "), ")");
    if (!n.attrs().empty()) absl::StrAppend(&out, " {", AttrMapToString(n.attrs()), "}");
    absl::StrAppend(&out, " : ", absl::StrJoin(out_types, ", "));
    if (!n.scope().empty()) absl::StrAppend(&out, "  @", n.scope());
    out += "\n";
  }
  for (const auto& u : g.buffer_updates()) {
    absl::StrAppend(&out, "  update %", u.buffer(), " <- %", u.value(), "\n");
  }
  std::vector<std::string> outs;
  for (const auto& o : g.outputs()) outs.push_back(absl::StrCat("%", o));
  absl::StrAppend(&out, "  return ", absl::StrJoin(outs, ", "), "\n}\n");
  return out;
}

}  // namespace mapd

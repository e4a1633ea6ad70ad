#include "model/ir/attrs.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace mapd {

Attrs& Attrs::Int(const std::string& name, int64_t v) {
  map_[name].set_i(v);
  return *this;
}
Attrs& Attrs::Float(const std::string& name, double v) {
  map_[name].set_f(v);
  return *this;
}
Attrs& Attrs::Str(const std::string& name, const std::string& v) {
  map_[name].set_s(v);
  return *this;
}
Attrs& Attrs::Bool(const std::string& name, bool v) {
  map_[name].set_b(v);
  return *this;
}
Attrs& Attrs::Ints(const std::string& name, const std::vector<int64_t>& v) {
  auto* list = map_[name].mutable_ints();
  list->clear_values();
  for (int64_t x : v) list->add_values(x);
  return *this;
}
Attrs& Attrs::Floats(const std::string& name, const std::vector<double>& v) {
  auto* list = map_[name].mutable_floats();
  list->clear_values();
  for (double x : v) list->add_values(x);
  return *this;
}
Attrs& Attrs::Strings(const std::string& name, const std::vector<std::string>& v) {
  auto* list = map_[name].mutable_strings();
  list->clear_values();
  for (const auto& x : v) list->add_values(x);
  return *this;
}
Attrs& Attrs::Set(const std::string& name, const v1::AttrValue& v) {
  map_[name] = v;
  return *this;
}

std::string AttrValueToString(const v1::AttrValue& v) {
  switch (v.value_case()) {
    case v1::AttrValue::kI: return absl::StrCat(v.i());
    case v1::AttrValue::kF: return absl::StrCat(v.f());
    case v1::AttrValue::kS: return absl::StrCat("'", v.s(), "'");
    case v1::AttrValue::kB: return v.b() ? "true" : "false";
    case v1::AttrValue::kInts: return absl::StrCat("[", absl::StrJoin(v.ints().values(), ","), "]");
    case v1::AttrValue::kFloats:
      return absl::StrCat("[", absl::StrJoin(v.floats().values(), ","), "]");
    case v1::AttrValue::kStrings:
      return absl::StrCat("['", absl::StrJoin(v.strings().values(), "','"), "']");
    default: return "<unset>";
  }
}

std::string AttrMapToString(const AttrMap& attrs) {
  std::vector<std::string> keys;
  for (const auto& kv : attrs) keys.push_back(kv.first);
  std::sort(keys.begin(), keys.end());
  std::vector<std::string> parts;
  for (const auto& k : keys) parts.push_back(absl::StrCat(k, "=", AttrValueToString(attrs.at(k))));
  return absl::StrJoin(parts, ", ");
}

const char* AttrKindName(const v1::AttrValue& v) {
  switch (v.value_case()) {
    case v1::AttrValue::kI: return "int";
    case v1::AttrValue::kF: return "float";
    case v1::AttrValue::kS: return "string";
    case v1::AttrValue::kB: return "bool";
    case v1::AttrValue::kInts: return "ints";
    case v1::AttrValue::kFloats: return "floats";
    case v1::AttrValue::kStrings: return "strings";
    default: return "unset";
  }
}

}  // namespace mapd

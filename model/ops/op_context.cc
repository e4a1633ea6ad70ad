#include "model/ops/op_context.h"

#include "model/ir/dtype.h"

namespace mapd {

const v1::AttrValue* OpContext::Attr(const std::string& name) const {
  auto it = attrs_.find(name);
  return it == attrs_.end() ? nullptr : &it->second;
}

#define MAPD_CTX_REQUIRE(name)                                              \
  const v1::AttrValue* a = Attr(name);                                      \
  if (a == nullptr) return Error("missing required attribute '", name, "'")

absl::StatusOr<int64_t> OpContext::Int(const std::string& name) const {
  MAPD_CTX_REQUIRE(name);
  if (a->value_case() == v1::AttrValue::kI) return a->i();
  if (a->value_case() == v1::AttrValue::kB) return a->b() ? 1 : 0;
  return Error("attribute '", name, "' must be an int, got ", AttrKindName(*a), " ",
               AttrValueToString(*a));
}

absl::StatusOr<double> OpContext::Float(const std::string& name) const {
  MAPD_CTX_REQUIRE(name);
  if (a->value_case() == v1::AttrValue::kF) return a->f();
  if (a->value_case() == v1::AttrValue::kI) return static_cast<double>(a->i());
  if (a->value_case() == v1::AttrValue::kB) return a->b() ? 1.0 : 0.0;
  return Error("attribute '", name, "' must be a number, got ", AttrKindName(*a), " ",
               AttrValueToString(*a));
}

absl::StatusOr<std::string> OpContext::Str(const std::string& name) const {
  MAPD_CTX_REQUIRE(name);
  if (a->value_case() == v1::AttrValue::kS) return a->s();
  return Error("attribute '", name, "' must be a string, got ", AttrKindName(*a), " ",
               AttrValueToString(*a));
}

absl::StatusOr<bool> OpContext::Bool(const std::string& name) const {
  MAPD_CTX_REQUIRE(name);
  if (a->value_case() == v1::AttrValue::kB) return a->b();
  if (a->value_case() == v1::AttrValue::kI && (a->i() == 0 || a->i() == 1)) return a->i() == 1;
  return Error("attribute '", name, "' must be a bool, got ", AttrKindName(*a), " ",
               AttrValueToString(*a));
}

absl::StatusOr<std::vector<int64_t>> OpContext::Ints(const std::string& name) const {
  MAPD_CTX_REQUIRE(name);
  if (a->value_case() == v1::AttrValue::kInts) {
    return std::vector<int64_t>(a->ints().values().begin(), a->ints().values().end());
  }
  if (a->value_case() == v1::AttrValue::kI) return std::vector<int64_t>{a->i()};
  return Error("attribute '", name, "' must be a list of ints, got ", AttrKindName(*a), " ",
               AttrValueToString(*a));
}

#undef MAPD_CTX_REQUIRE

absl::StatusOr<int64_t> OpContext::Int(const std::string& name, int64_t def) const {
  return has_attr(name) ? Int(name) : def;
}
absl::StatusOr<double> OpContext::Float(const std::string& name, double def) const {
  return has_attr(name) ? Float(name) : def;
}
absl::StatusOr<std::string> OpContext::Str(const std::string& name, const std::string& def) const {
  if (!has_attr(name)) return def;
  return Str(name);
}
absl::StatusOr<bool> OpContext::Bool(const std::string& name, bool def) const {
  return has_attr(name) ? Bool(name) : def;
}
absl::StatusOr<std::vector<int64_t>> OpContext::Ints(const std::string& name,
                                                     const std::vector<int64_t>& def) const {
  if (!has_attr(name)) return def;
  return Ints(name);
}

absl::StatusOr<DType> OpContext::DTypeAttr(const std::string& name, DType def) const {
  if (!has_attr(name)) return def;
  auto s = Str(name);
  if (!s.ok()) return s.status();
  auto d = ParseDType(*s);
  if (!d.ok()) return Error("attribute '", name, "': ", d.status().message());
  return *d;
}

}  // namespace mapd

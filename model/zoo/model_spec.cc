#include "model/zoo/model_spec.h"

#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace mapd {

absl::StatusOr<ModelSpec> ParseModelSpec(const std::string& spec) {
  ModelSpec out;
  const size_t colon = spec.find(':');
  out.name = std::string(absl::StripAsciiWhitespace(spec.substr(0, colon)));
  if (out.name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("zoo spec '", spec, "' has no model name"));
  }
  if (colon == std::string::npos) return out;
  for (absl::string_view part : absl::StrSplit(spec.substr(colon + 1), ',', absl::SkipWhitespace())) {
    part = absl::StripAsciiWhitespace(part);
    const size_t eq = part.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("zoo spec '", spec, "': '", part, "' is not of the form key=value"));
    }
    std::string key(absl::StripAsciiWhitespace(part.substr(0, eq)));
    std::string value(absl::StripAsciiWhitespace(part.substr(eq + 1)));
    if (key.empty() || value.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("zoo spec '", spec, "': '", part, "' needs both a key and a value"));
    }
    for (const auto& kv : out.overrides) {
      if (kv.first == key) {
        return absl::InvalidArgumentError(absl::StrCat("zoo spec '", spec, "' sets '", key, "' twice"));
      }
    }
    out.overrides.emplace_back(std::move(key), std::move(value));
  }
  return out;
}

absl::StatusOr<ModelOptions> ModelOptions::Make(
    const std::vector<ZooOption>& options, const std::vector<std::pair<std::string, std::string>>& overrides) {
  ModelOptions out;
  for (const auto& o : options) out.values_[o.key] = o.default_value;
  for (const auto& kv : overrides) {
    auto it = out.values_.find(kv.first);
    if (it == out.values_.end()) {
      std::vector<std::string> keys;
      for (const auto& o : options) keys.push_back(o.key);
      return absl::InvalidArgumentError(absl::StrCat("unknown option '", kv.first,
                                                     "'; this model's options are: ", absl::StrJoin(keys, ", ")));
    }
    it->second = kv.second;
  }
  return out;
}

void ModelOptions::Fail(const std::string& message) {
  if (status_.ok()) status_ = absl::InvalidArgumentError(message);
}

const std::string* ModelOptions::Find(const std::string& key) {
  auto it = values_.find(key);
  if (it != values_.end()) return &it->second;
  // A family reading a key its table entry lacks is a zoo bug, not a user error.
  if (status_.ok()) status_ = absl::InternalError(absl::StrCat("zoo model reads undeclared option '", key, "'"));
  return nullptr;
}

int64_t ModelOptions::Size(const std::string& key) {
  const std::string* v = Find(key);
  if (v == nullptr) return 1;
  int64_t n = 0;
  if (!absl::SimpleAtoi(*v, &n)) {
    Fail(absl::StrCat("option ", key, "=", *v, " is not an integer"));
    return 1;
  }
  if (n < 1 || n > kMaxSize) {
    Fail(absl::StrCat("option ", key, "=", *v, " must be between 1 and ", kMaxSize));
    return 1;
  }
  return n;
}

int64_t ModelOptions::Layers(const std::string& key) {
  const int64_t n = Size(key);
  if (n > kMaxLayers) {
    Fail(absl::StrCat("option ", key, "=", n, " must be between 1 and ", kMaxLayers, " layers"));
    return 1;
  }
  return n;
}

int64_t ModelOptions::SizeOr(const std::string& key, int64_t auto_value) {
  const std::string* v = Find(key);
  if (v != nullptr && *v == "auto") return auto_value;
  return Size(key);
}

double ModelOptions::PositiveFloat(const std::string& key) {
  const std::string* v = Find(key);
  if (v == nullptr) return 1;
  double x = 0;
  if (!absl::SimpleAtod(*v, &x) || !std::isfinite(x) || x <= 0) {
    Fail(absl::StrCat("option ", key, "=", *v, " is not a positive number"));
    return 1;
  }
  return x;
}

DType ModelOptions::FloatDType(const std::string& key) {
  const std::string* v = Find(key);
  if (v == nullptr) return v1::FLOAT32;
  auto d = ParseDType(*v);
  if (!d.ok() || !IsFloating(*d)) {
    Fail(absl::StrCat("option ", key, "=", *v, " is not a floating-point dtype (f32, bf16, f16)"));
    return v1::FLOAT32;
  }
  return *d;
}

}  // namespace mapd

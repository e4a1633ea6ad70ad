#include "model/import/input_spec.h"

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace mapd {

std::string InputSpec::ToString() const { return absl::StrCat(name, ":", type.ToString()); }

absl::StatusOr<InputSpec> ParseInputSpec(const std::string& text) {
  auto bad = [&text](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("bad input spec '", text, "': ", why,
                                                   "; expected NAME:DTYPE[D0,D1,...], e.g. idx:i64[8,1024]"));
  };
  const size_t colon = text.find(':');
  if (colon == std::string::npos || colon == 0) return bad("no 'name:' prefix");
  const size_t open = text.find('[', colon);
  if (open == std::string::npos || text.back() != ']') return bad("no [shape]");
  InputSpec spec;
  spec.name = text.substr(0, colon);
  auto dtype = ParseDType(text.substr(colon + 1, open - colon - 1));
  if (!dtype.ok()) return bad(std::string(dtype.status().message()));
  spec.type.dtype = *dtype;
  const std::string dims = text.substr(open + 1, text.size() - open - 2);
  if (!dims.empty()) {
    for (absl::string_view d : absl::StrSplit(dims, ',')) {
      int64_t v;
      if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(d), &v) || v < 0) {
        return bad(absl::StrCat("dimension '", std::string(d), "' is not a non-negative integer"));
      }
      spec.type.shape.push_back(v);
    }
  }
  return spec;
}

absl::StatusOr<std::vector<InputSpec>> ParseInputSpecsJson(const std::string& json) {
  auto doc = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  auto bad = [](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad mapd_inputs.json: ", why,
        "; expected {\"inputs\": [{\"name\": \"idx\", \"dtype\": \"int64\", \"shape\": [8, 1024]}]}"));
  };
  if (doc.is_discarded()) return bad("not valid JSON");
  if (!doc.is_object() || !doc.contains("inputs") || !doc["inputs"].is_array()) {
    return bad("no \"inputs\" array");
  }
  std::vector<InputSpec> specs;
  for (const auto& item : doc["inputs"]) {
    if (!item.is_object() || !item.contains("name") || !item["name"].is_string() || !item.contains("dtype") ||
        !item["dtype"].is_string() || !item.contains("shape") || !item["shape"].is_array()) {
      return bad(absl::StrCat("entry ", item.dump(), " needs string name, string dtype and array shape"));
    }
    InputSpec spec;
    spec.name = item["name"].get<std::string>();
    auto dtype = ParseDType(item["dtype"].get<std::string>());
    if (!dtype.ok()) return bad(std::string(dtype.status().message()));
    spec.type.dtype = *dtype;
    for (const auto& d : item["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0) {
        return bad(absl::StrCat("shape of '", spec.name, "' has a bad dimension ", d.dump()));
      }
      spec.type.shape.push_back(d.get<int64_t>());
    }
    specs.push_back(std::move(spec));
  }
  return specs;
}

std::string InputSpecsToJson(const std::vector<InputSpec>& specs) {
  nlohmann::json doc;
  doc["inputs"] = nlohmann::json::array();
  for (const auto& s : specs) {
    doc["inputs"].push_back({{"name", s.name}, {"dtype", DTypeShortName(s.type.dtype)}, {"shape", s.type.shape}});
  }
  return doc.dump();
}

}  // namespace mapd

#include "model/import/input_spec.h"

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace mapd {

std::string InputSpec::ToString() const {
  std::string s = absl::StrCat(name, ":", type.ToString());
  if (range) absl::StrAppend(&s, ":", range->first, "..", range->second);
  return s;
}

namespace {

absl::Status CheckRange(const InputSpec& spec) {
  if (!spec.range) return absl::OkStatus();
  if (!IsIntegral(spec.type.dtype) || spec.type.dtype == v1::BOOL) {
    return absl::InvalidArgumentError(absl::StrCat("input '", spec.name, "' is ", DTypeShortName(spec.type.dtype),
                                                   "; a value range is for integer inputs"));
  }
  if (spec.range->first > spec.range->second) {
    return absl::InvalidArgumentError(absl::StrCat("input '", spec.name, "': range ", spec.range->first, "..",
                                                   spec.range->second, " is empty (LOW..HIGH, both inclusive)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<InputSpec> ParseInputSpec(const std::string& text) {
  auto bad = [&text](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("bad input spec '", text, "': ", why,
                                                   "; expected NAME:DTYPE[D0,D1,...], e.g. idx:i64[8,1024]"));
  };
  const size_t colon = text.find(':');
  if (colon == std::string::npos || colon == 0) return bad("no 'name:' prefix");
  const size_t open = text.find('[', colon);
  const size_t close = text.find(']', colon);
  if (open == std::string::npos || close == std::string::npos || close < open) return bad("no [shape]");
  InputSpec spec;
  spec.name = text.substr(0, colon);
  auto dtype = ParseDType(text.substr(colon + 1, open - colon - 1));
  if (!dtype.ok()) return bad(std::string(dtype.status().message()));
  spec.type.dtype = *dtype;
  if (close + 1 != text.size()) {
    // ":LOW..HIGH" after the shape.
    const std::string range = text.substr(close + 1);
    const size_t dots = range.find("..");
    int64_t low = 0, high = 0;
    if (range[0] != ':' || dots == std::string::npos || !absl::SimpleAtoi(range.substr(1, dots - 1), &low) ||
        !absl::SimpleAtoi(range.substr(dots + 2), &high)) {
      return bad(absl::StrCat("'", range, "' after the shape is not a value range :LOW..HIGH (e.g. t:i64[8]:0..999)"));
    }
    spec.range = std::make_pair(low, high);
  }
  const std::string dims = text.substr(open + 1, close - open - 1);
  if (!dims.empty()) {
    for (absl::string_view d : absl::StrSplit(dims, ',')) {
      int64_t v;
      if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(d), &v) || v < 0) {
        return bad(absl::StrCat("dimension '", std::string(d), "' is not a non-negative integer"));
      }
      spec.type.shape.push_back(v);
    }
  }
  if (auto st = CheckRange(spec); !st.ok()) return bad(std::string(st.message()));
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
    if (item.contains("range")) {
      const auto& r = item["range"];
      if (!r.is_array() || r.size() != 2 || !r[0].is_number_integer() || !r[1].is_number_integer()) {
        return bad(absl::StrCat("range of '", spec.name, "' must be [low, high] (integers, inclusive)"));
      }
      spec.range = std::make_pair(r[0].get<int64_t>(), r[1].get<int64_t>());
    }
    if (auto st = CheckRange(spec); !st.ok()) return bad(std::string(st.message()));
    specs.push_back(std::move(spec));
  }
  return specs;
}

std::string InputSpecsToJson(const std::vector<InputSpec>& specs) {
  nlohmann::json doc;
  doc["inputs"] = nlohmann::json::array();
  for (const auto& s : specs) {
    nlohmann::json item = {{"name", s.name}, {"dtype", DTypeShortName(s.type.dtype)}, {"shape", s.type.shape}};
    if (s.range) item["range"] = {s.range->first, s.range->second};
    doc["inputs"].push_back(std::move(item));
  }
  return doc.dump();
}

}  // namespace mapd

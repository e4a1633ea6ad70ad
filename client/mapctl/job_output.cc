#include "client/mapctl/job_output.h"

#include <google/protobuf/util/json_util.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <regex>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "common/bytes.h"

namespace mapd::cli {

namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

bool IsInt64(const FieldDescriptor* f) {
  return f->cpp_type() == FieldDescriptor::CPPTYPE_INT64 || f->cpp_type() == FieldDescriptor::CPPTYPE_UINT64;
}

nlohmann::json Int64Value(const nlohmann::json& v, const FieldDescriptor* f) {
  if (!v.is_string()) return v;
  const std::string& s = v.get_ref<const std::string&>();
  if (f->cpp_type() == FieldDescriptor::CPPTYPE_UINT64) return static_cast<uint64_t>(std::stoull(s));
  return static_cast<int64_t>(std::stoll(s));
}

// Integers as numbers and times as RFC 3339, through the message's fields.
void Normalize(nlohmann::json& j, const Descriptor* d) {
  if (!j.is_object()) return;
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    auto it = j.find(f->name());
    if (it == j.end()) continue;
    nlohmann::json& v = *it;
    if (f->is_map()) {
      const FieldDescriptor* value = f->message_type()->map_value();
      for (auto& [key, element] : v.items()) {
        if (value->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) Normalize(element, value->message_type());
        else if (IsInt64(value)) element = Int64Value(element, value);
      }
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (f->is_repeated()) {
        for (auto& element : v) Normalize(element, f->message_type());
      } else {
        Normalize(v, f->message_type());
      }
    } else if (IsInt64(f)) {
      if (f->is_repeated()) {
        for (auto& element : v) element = Int64Value(element, f);
      } else {
        v = Int64Value(v, f);
      }
    } else if (absl::EndsWith(f->name(), "unix_seconds") && v.is_number()) {
      const std::string name = f->name().substr(0, f->name().size() - std::string("unix_seconds").size()) + "time";
      const double seconds = v.get<double>();
      j.erase(it);
      j[name] = Rfc3339(seconds);
    }
  }
}

// A plain scalar YAML would read as something other than this string.
bool NeedsQuotes(const std::string& s) {
  static const std::regex special(
      "|~|null|Null|NULL|true|True|TRUE|false|False|FALSE|yes|Yes|no|No|on|On|off|Off|[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?"
      "|[-+]?\\.(inf|Inf|INF)|\\.(nan|NaN|NAN)|0x[0-9a-fA-F]+|0o[0-7]+");
  return std::regex_match(s, special);
}

void Emit(YAML::Emitter& out, const nlohmann::json& v) {
  if (v.is_object()) {
    out << YAML::BeginMap;
    for (const auto& [key, element] : v.items()) {
      out << YAML::Key << key << YAML::Value;
      Emit(out, element);
    }
    out << YAML::EndMap;
  } else if (v.is_array()) {
    const bool scalars = std::all_of(v.begin(), v.end(), [](const nlohmann::json& e) { return e.is_primitive(); });
    out << (scalars && !v.empty() ? YAML::Flow : YAML::Block) << YAML::BeginSeq;
    for (const auto& element : v) Emit(out, element);
    out << YAML::EndSeq;
  } else if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    if (NeedsQuotes(s)) out << YAML::DoubleQuoted;
    out << s;
  } else if (v.is_boolean()) {
    out << v.get<bool>();
  } else if (v.is_number_integer()) {
    out << v.dump();
  } else if (v.is_number()) {
    out << v.dump();  // JSON's shortest text for the double
  } else {
    out << YAML::Null;
  }
}

}  // namespace

std::string Rfc3339(double unix_seconds) {
  if (unix_seconds <= 0) return "";
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  char buf[32];
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  // Milliseconds, as the coordinator records them: scripts time what happened between events.
  const int millis = std::clamp(static_cast<int>((unix_seconds - static_cast<double>(t)) * 1000), 0, 999);
  return absl::StrFormat("%s.%03dZ", buf, millis);
}

std::string When(double unix_seconds) {
  if (unix_seconds <= 0) return "-";
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", std::localtime(&t));
  return buf;
}

std::string Age(double unix_seconds, double now) {
  if (unix_seconds <= 0) return "-";
  const int64_t s = std::max<int64_t>(0, static_cast<int64_t>(now - unix_seconds));
  if (s < 120) return absl::StrFormat("%ds", s);
  if (s < 2 * 3600) return absl::StrFormat("%dm", s / 60);
  if (s < 2 * 86400) return absl::StrFormat("%dh", s / 3600);
  return absl::StrFormat("%dd", s / 86400);
}

double NowUnixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

nlohmann::json ToJson(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::util::JsonPrintOptions o;
  o.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(m, &out, o);
  nlohmann::json j = nlohmann::json::parse(out);
  Normalize(j, m.GetDescriptor());
  return j;
}

void PrintDocument(const std::string& format, const nlohmann::json& value) {
  if (format == "yaml") {
    std::cout << ToYaml(value);
  } else {
    std::cout << value.dump(2) << "\n";
  }
}

std::string ToYaml(const nlohmann::json& value) {
  YAML::Emitter out;
  Emit(out, value);
  return std::string(out.c_str()) + "\n";
}

std::string StateName(v1::JobState s) { return v1::JobState_Name(s); }

std::string EventLine(const v1::JobEvent& e, int64_t steps) {
  if (e.step() > 0) {
    return absl::StrFormat("%s  #%-3d step %lld/%lld  loss %.4f  lr %.3g  %.0f tokens/s  peak %s", When(e.unix_seconds()), e.seq(),
                           static_cast<long long>(e.step()), static_cast<long long>(steps), e.loss(), e.lr(), e.items_per_second(),
                           FormatBytes(e.peak_bytes()));
  }
  return absl::StrFormat("%s  #%-3d %-10s %s", When(e.unix_seconds()), e.seq(), StateName(e.state()), e.message());
}

}  // namespace mapd::cli

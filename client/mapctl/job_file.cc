#include "client/mapctl/job_file.h"

#include <google/protobuf/util/json_util.h>
#include <yaml-cpp/yaml.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/mapctl/suggest.h"
#include "common/bytes.h"
#include "nlohmann/json.hpp"
#include "planner/sharding/cluster.h"
#include "model/zoo/zoo.h"

namespace mapd::cli {

namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

// YAML's scalar as the JSON the field's type reads: strings for string, bytes and enum fields,
// booleans as such, numbers as their text (the JSON mapping reads "12" into an int64 and names
// the field when it cannot).
absl::StatusOr<nlohmann::json> Scalar(const YAML::Node& node, const FieldDescriptor* f, const std::string& path) {
  if (!node.IsScalar()) return absl::InvalidArgumentError(absl::StrCat(path, ": give one value, not a ", node.IsMap() ? "mapping" : "list"));
  const std::string text = node.Scalar();
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_BOOL:
      if (text == "true" || text == "false") return nlohmann::json(text == "true");
      return absl::InvalidArgumentError(absl::StrCat(path, ": '", text, "' is not true or false"));
    case FieldDescriptor::CPPTYPE_STRING:
    case FieldDescriptor::CPPTYPE_ENUM:
      return nlohmann::json(text);
    default:
      return nlohmann::json(text);  // a number's text: checked by the JSON mapping
  }
}

absl::StatusOr<nlohmann::json> Convert(const YAML::Node& node, const Descriptor* d, const std::string& path);

absl::StatusOr<nlohmann::json> Field(const YAML::Node& node, const FieldDescriptor* f, const std::string& path) {
  auto one = [&](const YAML::Node& n, const std::string& p) -> absl::StatusOr<nlohmann::json> {
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) return Convert(n, f->message_type(), p);
    return Scalar(n, f, p);
  };
  if (f->is_map()) {
    if (!node.IsMap()) return absl::InvalidArgumentError(absl::StrCat(path, ": give a mapping"));
    nlohmann::json out = nlohmann::json::object();
    for (const auto& kv : node) {
      const std::string key = kv.first.Scalar();
      const FieldDescriptor* value = f->message_type()->map_value();
      auto v = value->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE ? Convert(kv.second, value->message_type(), path + "." + key)
                                                                     : Scalar(kv.second, value, path + "." + key);
      if (!v.ok()) return v.status();
      out[key] = *std::move(v);
    }
    return out;
  }
  if (f->is_repeated()) {
    if (!node.IsSequence()) return absl::InvalidArgumentError(absl::StrCat(path, ": give a list"));
    nlohmann::json out = nlohmann::json::array();
    for (size_t i = 0; i < node.size(); ++i) {
      auto v = one(node[i], absl::StrCat(path, "[", i, "]"));
      if (!v.ok()) return v.status();
      out.push_back(*std::move(v));
    }
    return out;
  }
  return one(node, path);
}

// A mapping of `d`'s fields as the JSON mapping reads it; an unknown key is named with the known.
absl::StatusOr<nlohmann::json> Convert(const YAML::Node& node, const Descriptor* d, const std::string& path) {
  if (!node.IsMap()) return absl::InvalidArgumentError(absl::StrCat(path.empty() ? "the file" : path, ": give a mapping of fields"));
  nlohmann::json out = nlohmann::json::object();
  for (const auto& kv : node) {
    const std::string key = kv.first.Scalar();
    const std::string where = path.empty() ? key : path + "." + key;
    const FieldDescriptor* f = d->FindFieldByName(key);
    if (f == nullptr) {
      std::vector<std::string> names;
      for (int i = 0; i < d->field_count(); ++i) names.push_back(d->field(i)->name());
      if (path.empty()) {
        names.insert(names.end(), ClientJobFileKeys().begin(), ClientJobFileKeys().end());
        const Descriptor* t = v1::TrainingConfig::descriptor();
        for (int i = 0; i < t->field_count(); ++i) names.push_back(t->field(i)->name());
      }
      const std::string near = Closest(key, names);
      return absl::InvalidArgumentError(absl::StrCat(where, ": unknown field", near.empty() ? "" : absl::StrCat("; did you mean '", near, "'?"),
                                                     " (fields: ", absl::StrJoin(names, ", "), ")"));
    }
    auto v = Field(kv.second, f, where);
    if (!v.ok()) return v.status();
    out[key] = *std::move(v);
  }
  return out;
}

// A TrainingConfig field written at the top level of a job file, as the flags are.
bool IsTrainingKey(const std::string& key) {
  return v1::TrainingConfig::descriptor()->FindFieldByName(key) != nullptr && v1::JobSpec::descriptor()->FindFieldByName(key) == nullptr;
}

std::vector<std::string> Strings(const YAML::Node& node, const std::string& key) {
  if (node.IsSequence()) return node.as<std::vector<std::string>>();
  return {node.as<std::string>()};
}

}  // namespace

const std::set<std::string>& ClientJobFileKeys() {
  static const std::set<std::string> keys = {"inputs", "loss", "init_from"};
  return keys;
}

absl::StatusOr<JobFile> ReadJobFile(const std::string& path) {
  const std::string where = absl::StrCat("-f ", path);
  auto fail = [&](const absl::Status& st) { return absl::InvalidArgumentError(absl::StrCat(where, ": ", st.message())); };
  YAML::Node y;
  try {
    y = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    return absl::NotFoundError(absl::StrCat(where, ": cannot read the file"));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", e.what()));
  }
  if (!y.IsMap()) return absl::InvalidArgumentError(absl::StrCat(where, ": a job file is a mapping of fields (model, steps, ranks, ...)"));
  // `mapctl get -o yaml` printed a Job: its spec is the job file.
  if (y["spec"] && y["spec"].IsMap()) y = y["spec"];
  JobFile out;
  YAML::Node spec_fields(YAML::NodeType::Map);
  YAML::Node training(YAML::NodeType::Map);  // flat keys and `training:`'s, as one mapping
  try {
    for (const auto& kv : y) {
      const std::string key = kv.first.as<std::string>();
      const YAML::Node& v = kv.second;
      out.fields.insert(key);
      if (key == "training" && v.IsMap()) {
        for (const auto& t : v) {
          out.fields.insert(t.first.as<std::string>());
          training[t.first.as<std::string>()] = t.second;
        }
      } else if (IsTrainingKey(key)) {
        training[key] = v;
      } else if (key == "inputs") {
        out.inputs = Strings(v, key);
      } else if (key == "loss") {
        out.loss = v.as<std::string>();
      } else if (key == "init_from") {
        out.init_from = v.as<std::string>();
      } else if (key == "model") {
        out.model = v.as<std::string>();
        if (IsZooModelSpec(out.model)) spec_fields[key] = v;
      } else if (key == "memory_per_device" && v.IsScalar()) {
        auto bytes = ParseBytes(v.Scalar());
        if (!bytes.ok()) return fail(absl::InvalidArgumentError(absl::StrCat(key, ": ", bytes.status().message())));
        spec_fields[key] = std::to_string(*bytes);
      } else if (key == "mesh" && v.IsScalar()) {
        auto mesh = ParseMesh(v.Scalar());
        if (!mesh.ok()) return fail(absl::InvalidArgumentError(absl::StrCat(key, ": ", mesh.status().message())));
        YAML::Node list(YAML::NodeType::Sequence);
        for (int64_t d : *mesh) list.push_back(std::to_string(d));
        spec_fields[key] = list;
      } else {
        spec_fields[key] = v;
      }
    }
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", e.what()));
  }
  if (training.size() > 0) spec_fields["training"] = training;
  auto json = Convert(spec_fields, v1::JobSpec::descriptor(), "");
  if (!json.ok()) return fail(json.status());
  google::protobuf::util::JsonParseOptions o;
  o.ignore_unknown_fields = false;
  if (auto st = google::protobuf::util::JsonStringToMessage(json->dump(), &out.spec, o); !st.ok()) {
    // The JSON mapping names the field: "(steps): invalid value "ten" for type TYPE_INT64".
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", std::string(st.message())));
  }
  if (out.model.empty() && !out.spec.has_graph()) return absl::InvalidArgumentError(absl::StrCat(where, ": no model (give model: or a graph)"));
  return out;
}

}  // namespace mapd::cli

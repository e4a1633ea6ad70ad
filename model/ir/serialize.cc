#include "model/ir/serialize.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/file_io.h"
#include "google/protobuf/util/json_util.h"

namespace mapd {

absl::StatusOr<GraphFormat> GraphFormatFromPath(const std::string& path) {
  if (absl::EndsWith(path, ".json")) return GraphFormat::kJson;
  if (absl::EndsWith(path, ".pb") || absl::EndsWith(path, ".binpb")) return GraphFormat::kBinary;
  return absl::InvalidArgumentError(absl::StrCat(
      "cannot tell the graph format of '", path, "': use a .pb (binary) or .json file name"));
}

absl::StatusOr<std::string> GraphToJson(const v1::Graph& graph) {
  std::string out;
  google::protobuf::util::JsonPrintOptions opts;
  opts.add_whitespace = true;
  opts.preserve_proto_field_names = true;
  auto st = google::protobuf::util::MessageToJsonString(graph, &out, opts);
  if (!st.ok()) return absl::InternalError(absl::StrCat("graph to JSON: ", st.ToString()));
  return out;
}

absl::StatusOr<v1::Graph> GraphFromJson(const std::string& json) {
  v1::Graph g;
  google::protobuf::util::JsonParseOptions opts;
  auto st = google::protobuf::util::JsonStringToMessage(json, &g, opts);
  if (!st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("not a MAP graph in JSON: ", st.message().as_string()));
  }
  return g;
}

std::string GraphToBinary(const v1::Graph& graph) { return graph.SerializeAsString(); }

absl::StatusOr<v1::Graph> GraphFromBinary(const std::string& bytes) {
  v1::Graph g;
  if (!g.ParseFromString(bytes)) {
    return absl::InvalidArgumentError("not a MAP graph in binary protobuf form (parse failed)");
  }
  return g;
}

absl::Status WriteGraphFile(const v1::Graph& graph, const std::string& path) {
  auto format = GraphFormatFromPath(path);
  if (!format.ok()) return format.status();
  std::string data;
  if (*format == GraphFormat::kJson) {
    auto json = GraphToJson(graph);
    if (!json.ok()) return json.status();
    data = std::move(*json);
  } else {
    data = GraphToBinary(graph);
  }
  return WriteStringToFileAtomic(path, data);
}

absl::StatusOr<v1::Graph> ReadGraphFile(const std::string& path) {
  auto format = GraphFormatFromPath(path);
  if (!format.ok()) return format.status();
  auto data = ReadFileToString(path);
  if (!data.ok()) return data.status();
  absl::StatusOr<v1::Graph> g =
      *format == GraphFormat::kJson ? GraphFromJson(*data) : GraphFromBinary(*data);
  if (!g.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot read graph file '", path, "': ",
                                                   g.status().message()));
  }
  return g;
}

}  // namespace mapd

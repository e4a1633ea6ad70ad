#include "planner/ir/serialize.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
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

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat("no such file: '", path, "'"));
    return absl::PermissionDeniedError(absl::StrCat("cannot open '", path, "': ", std::strerror(err)));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return absl::InternalError(absl::StrCat("error reading '", path, "'"));
  return ss.str();
}

absl::Status WriteStringToFileAtomic(const std::string& path, const std::string& data) {
  const std::string tmp = absl::StrCat(path, ".tmp");
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      return absl::PermissionDeniedError(
          absl::StrCat("cannot write '", tmp, "': ", std::strerror(errno)));
    }
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    out.flush();
    if (!out) return absl::InternalError(absl::StrCat("error writing '", tmp, "'"));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    return absl::InternalError(
        absl::StrCat("cannot rename '", tmp, "' to '", path, "': ", std::strerror(err)));
  }
  return absl::OkStatus();
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

// Reading and writing graphs: binary protobuf (.pb) and JSON (.json).
#ifndef MAPD_MODEL_IR_SERIALIZE_H_
#define MAPD_MODEL_IR_SERIALIZE_H_

#include <string>

#include "absl/status/statusor.h"
#include "proto/mapd/v1/graph.pb.h"

namespace mapd {

enum class GraphFormat { kBinary, kJson };

// .json → kJson, .pb / .binpb → kBinary; anything else is INVALID_ARGUMENT.
absl::StatusOr<GraphFormat> GraphFormatFromPath(const std::string& path);

absl::StatusOr<std::string> GraphToJson(const v1::Graph& graph);
absl::StatusOr<v1::Graph> GraphFromJson(const std::string& json);
std::string GraphToBinary(const v1::Graph& graph);
absl::StatusOr<v1::Graph> GraphFromBinary(const std::string& bytes);

// Writes atomically (temp file + rename) in the format named by the extension.
absl::Status WriteGraphFile(const v1::Graph& graph, const std::string& path);
// Reads by extension; a file that does not parse is INVALID_ARGUMENT naming the file.
// Does not verify the graph (see model/graph/verifier.h).
absl::StatusOr<v1::Graph> ReadGraphFile(const std::string& path);

}  // namespace mapd

#endif  // MAPD_MODEL_IR_SERIALIZE_H_

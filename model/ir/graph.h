// Graph: a read-only C++ view over a v1::Graph with name lookups.
//
// The proto is the storage (and the wire and file format); the view adds what every pass
// needs: the type and definer of each value, the consumers of each value, and parameter
// statistics. A view is built by Graph::Create, which rejects structural faults (duplicate
// or dangling names); semantic checks (op attributes, shapes, cycles) are in
// model/graph/verifier.h.
#ifndef MAPD_MODEL_IR_GRAPH_H_
#define MAPD_MODEL_IR_GRAPH_H_

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "model/ir/tensor_type.h"
#include "proto/mapd/v1/graph.pb.h"

namespace mapd {

// What defines a value.
enum class ValueDef { kInput, kParameter, kNode };

struct ValueInfo {
  TensorType type;
  ValueDef def = ValueDef::kNode;
  int index = -1;  // index into inputs, parameters or nodes, by `def`
  int output_index = 0;  // for kNode: which output of the node
  std::vector<int> consumers;  // indices of nodes reading the value (once per node)
};

class Graph {
 public:
  // Builds the view; fails on duplicate names, values read before they are defined, nodes
  // whose outputs have no recorded type, and outputs that name nothing.
  static absl::StatusOr<Graph> Create(v1::Graph proto);

  const v1::Graph& proto() const { return *proto_; }
  const std::string& name() const { return proto_->name(); }
  int num_nodes() const { return proto_->nodes_size(); }
  const v1::Node& node(int i) const { return proto_->nodes(i); }

  // nullptr when no value has that name.
  const ValueInfo* FindValue(const std::string& name) const;
  const TensorType& TypeOf(const std::string& name) const;  // the value must exist
  // nullptr when `name` is not a parameter/buffer/constant (aliases are resolved).
  const v1::Parameter* FindParameter(const std::string& name) const;

  // Sum of elements of trainable parameters (tied weights counted once).
  int64_t NumTrainableParameters() const;
  // Sum of elements of all parameters, buffers and constants.
  int64_t NumParameterElements() const;
  // Node count per op name.
  std::vector<std::pair<std::string, int>> OpCounts() const;

 private:
  Graph() = default;
  std::shared_ptr<const v1::Graph> proto_;
  std::unordered_map<std::string, ValueInfo> values_;
  std::unordered_map<std::string, int> param_by_name_;  // includes aliases
};

}  // namespace mapd

#endif  // MAPD_MODEL_IR_GRAPH_H_

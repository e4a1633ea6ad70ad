// GraphBuilder: makes a graph node by node, inferring every output type from the registry.
//
// Errors are sticky: the first failing call records its status, later calls do nothing and
// return an empty name, and Build() returns that status. This keeps model builders (zoo,
// importer) free of per-call error plumbing while still failing with the first fault.
#ifndef MAPD_MODEL_GRAPH_BUILDER_H_
#define MAPD_MODEL_GRAPH_BUILDER_H_

#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/status/statusor.h"
#include "model/ir/attrs.h"
#include "model/ir/graph.h"
#include "model/ir/tensor_type.h"
#include "model/ops/registry.h"
#include "proto/mapd/v1/graph.pb.h"

namespace mapd {

class GraphBuilder {
 public:
  explicit GraphBuilder(std::string name, const OpRegistry& registry = OpRegistry::Global());
  // Continues an existing (verified) graph: new nodes may read its values.
  static GraphBuilder Extend(v1::Graph graph, const OpRegistry& registry = OpRegistry::Global());

  // Drops the graph's outputs (before declaring new ones).
  void ClearOutputs() { graph_.clear_outputs(); }
  const v1::Graph& graph() const { return graph_; }

  // Defines a graph input; returns its value name (== name).
  std::string Input(const std::string& name, const TensorType& type, const std::string& role = "");
  // Defines a trainable parameter with an init rule.
  std::string Param(const std::string& name, const TensorType& type, const v1::InitRule& init);
  // Defines any parameter/buffer/constant from a filled-in proto (name and type must be set).
  std::string AddParameter(v1::Parameter param);

  // Records `alias` as another module path of parameter `param` (tied weights).
  void AddParameterAlias(const std::string& param, const std::string& alias);

  // Adds a node; returns its output value names. Absent optional inputs are "".
  std::vector<std::string> Node(const std::string& op, const std::vector<std::string>& inputs,
                                const Attrs& attrs = Attrs());
  // As Node, for ops with exactly one output.
  std::string Op(const std::string& op, const std::vector<std::string>& inputs,
                 const Attrs& attrs = Attrs());

  void Output(const std::string& value);
  void BufferUpdate(const std::string& buffer, const std::string& value);
  void SetMetadata(const std::string& key, const std::string& value);

  // Module scope recorded on new nodes: PushScope("h.0") then PushScope("attn") → "h.0.attn".
  void PushScope(const std::string& part);
  void PopScope();
  const std::string& scope() const { return scope_; }

  // nullptr if the value is unknown.
  const TensorType* TypeOf(const std::string& value) const;
  const absl::Status& status() const { return status_; }
  // Records an error from the caller (first one wins).
  void Fail(absl::Status status);

  // Finishes: returns the first recorded error, or the graph.
  absl::StatusOr<v1::Graph> Build();

 private:
  std::string UniqueNodeName(const std::string& op);

  const OpRegistry& registry_;
  v1::Graph graph_;
  absl::Status status_;
  std::unordered_map<std::string, TensorType> types_;
  std::unordered_map<std::string, int> name_counts_;
  std::unordered_set<std::string> node_names_;
  std::vector<size_t> scope_lengths_;
  std::string scope_;
};

// RAII scope: { ScopeGuard s(b, "attn"); ... }
class ScopeGuard {
 public:
  ScopeGuard(GraphBuilder& b, const std::string& part) : b_(b) { b_.PushScope(part); }
  ~ScopeGuard() { b_.PopScope(); }
  ScopeGuard(const ScopeGuard&) = delete;
  ScopeGuard& operator=(const ScopeGuard&) = delete;

 private:
  GraphBuilder& b_;
};

}  // namespace mapd

#endif  // MAPD_MODEL_GRAPH_BUILDER_H_

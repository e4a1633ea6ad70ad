#include "model/graph/builder.h"

#include "absl/strings/str_cat.h"

namespace mapd {

GraphBuilder::GraphBuilder(std::string name, const OpRegistry& registry) : registry_(registry) {
  graph_.set_name(std::move(name));
}

GraphBuilder GraphBuilder::Extend(v1::Graph graph, const OpRegistry& registry) {
  GraphBuilder b(graph.name(), registry);
  for (const auto& in : graph.inputs()) b.types_[in.name()] = TensorType::FromProto(in.type());
  for (const auto& p : graph.parameters()) b.types_[p.name()] = TensorType::FromProto(p.type());
  for (const auto& v : graph.values()) b.types_[v.name()] = TensorType::FromProto(v.type());
  for (const auto& n : graph.nodes()) b.node_names_.insert(n.name());
  b.graph_ = std::move(graph);
  return b;
}

void GraphBuilder::Fail(absl::Status status) {
  if (status_.ok() && !status.ok()) status_ = std::move(status);
}

std::string GraphBuilder::Input(const std::string& name, const TensorType& type, const std::string& role) {
  if (!status_.ok()) return "";
  if (!types_.emplace(name, type).second) {
    Fail(absl::InvalidArgumentError(absl::StrCat("graph input '", name, "' is defined twice")));
    return "";
  }
  auto* in = graph_.add_inputs();
  in->set_name(name);
  *in->mutable_type() = type.ToProto();
  in->set_role(role);
  return name;
}

std::string GraphBuilder::Param(const std::string& name, const TensorType& type, const v1::InitRule& init) {
  v1::Parameter p;
  p.set_name(name);
  *p.mutable_type() = type.ToProto();
  p.set_kind(v1::Parameter::PARAMETER);
  p.set_trainable(true);
  *p.mutable_init() = init;
  return AddParameter(std::move(p));
}

std::string GraphBuilder::AddParameter(v1::Parameter param) {
  if (!status_.ok()) return "";
  const std::string name = param.name();
  if (name.empty()) {
    Fail(absl::InvalidArgumentError("a parameter needs a name"));
    return "";
  }
  if (!types_.emplace(name, TensorType::FromProto(param.type())).second) {
    Fail(absl::InvalidArgumentError(absl::StrCat("parameter '", name, "' is defined twice")));
    return "";
  }
  *graph_.add_parameters() = std::move(param);
  return name;
}

void GraphBuilder::AddParameterAlias(const std::string& param, const std::string& alias) {
  if (!status_.ok()) return;
  for (auto& p : *graph_.mutable_parameters()) {
    if (p.name() == param) {
      p.add_aliases(alias);
      return;
    }
  }
  Fail(absl::InvalidArgumentError(absl::StrCat("alias '", alias, "' names unknown parameter '", param, "'")));
}

std::string GraphBuilder::UniqueNodeName(const std::string& op) {
  const std::string base = scope_.empty() ? op : absl::StrCat(scope_, "/", op);
  int& count = name_counts_[base];
  std::string name = count == 0 ? base : absl::StrCat(base, "_", count);
  ++count;
  // A value of the same name may already exist (an input called like an op): skip it.
  while (types_.count(name) || node_names_.count(name)) name = absl::StrCat(base, "_", count++);
  node_names_.insert(name);
  return name;
}

std::vector<std::string> GraphBuilder::Node(const std::string& op, const std::vector<std::string>& inputs,
                                            const Attrs& attrs) {
  if (!status_.ok()) return {};
  const std::string name = UniqueNodeName(op);
  std::vector<const TensorType*> in_types;
  for (const auto& in : inputs) {
    if (in.empty()) {
      in_types.push_back(nullptr);
      continue;
    }
    auto it = types_.find(in);
    if (it == types_.end()) {
      Fail(absl::InvalidArgumentError(
          absl::StrCat("node '", name, "' (", op, ") reads undefined value '", in, "'")));
      return {};
    }
    in_types.push_back(&it->second);
  }
  // Trailing absent inputs are dropped so that optional arguments can simply be omitted.
  std::vector<std::string> kept = inputs;
  while (!kept.empty() && kept.back().empty()) {
    kept.pop_back();
    in_types.pop_back();
  }
  auto out_types = registry_.Infer(name, op, in_types, attrs.map());
  if (!out_types.ok()) {
    Fail(out_types.status());
    return {};
  }
  v1::Node* node = graph_.add_nodes();
  node->set_name(name);
  node->set_op(op);
  node->set_scope(scope_);
  for (const auto& in : kept) node->add_inputs(in);
  *node->mutable_attrs() = attrs.map();
  std::vector<std::string> outs;
  for (size_t i = 0; i < out_types->size(); ++i) {
    std::string out = out_types->size() == 1 ? name : absl::StrCat(name, ".", i);
    node->add_outputs(out);
    auto* v = graph_.add_values();
    v->set_name(out);
    *v->mutable_type() = (*out_types)[i].ToProto();
    types_[out] = (*out_types)[i];
    outs.push_back(std::move(out));
  }
  return outs;
}

std::string GraphBuilder::Op(const std::string& op, const std::vector<std::string>& inputs, const Attrs& attrs) {
  auto outs = Node(op, inputs, attrs);
  if (!status_.ok()) return "";
  if (outs.size() != 1) {
    Fail(absl::InternalError(absl::StrCat("op '", op, "' defined ", outs.size(),
                                          " values where one was expected")));
    return "";
  }
  return outs[0];
}

void GraphBuilder::Output(const std::string& value) {
  if (!status_.ok()) return;
  if (!types_.count(value)) {
    Fail(absl::InvalidArgumentError(absl::StrCat("graph output '", value, "' is not a defined value")));
    return;
  }
  graph_.add_outputs(value);
}

void GraphBuilder::BufferUpdate(const std::string& buffer, const std::string& value) {
  if (!status_.ok()) return;
  const v1::Parameter* buf = nullptr;
  for (const auto& p : graph_.parameters()) {
    if (p.name() == buffer) buf = &p;
  }
  if (buf == nullptr || buf->kind() != v1::Parameter::BUFFER) {
    Fail(absl::InvalidArgumentError(absl::StrCat("buffer update names '", buffer, "', which is not a buffer")));
    return;
  }
  const TensorType* t = TypeOf(value);
  if (t == nullptr || t->shape != TensorType::FromProto(buf->type()).shape) {
    Fail(absl::InvalidArgumentError(absl::StrCat("buffer update of '", buffer, "' with value '", value,
                                                 t == nullptr ? "', which is undefined" : "' of another shape")));
    return;
  }
  auto* u = graph_.add_buffer_updates();
  u->set_buffer(buffer);
  u->set_value(value);
}

void GraphBuilder::SetMetadata(const std::string& key, const std::string& value) {
  (*graph_.mutable_metadata())[key] = value;
}

void GraphBuilder::PushScope(const std::string& part) {
  scope_lengths_.push_back(scope_.size());
  if (!part.empty()) scope_ = scope_.empty() ? part : absl::StrCat(scope_, ".", part);
}

void GraphBuilder::PopScope() {
  if (scope_lengths_.empty()) return;
  scope_.resize(scope_lengths_.back());
  scope_lengths_.pop_back();
}

const TensorType* GraphBuilder::TypeOf(const std::string& value) const {
  auto it = types_.find(value);
  return it == types_.end() ? nullptr : &it->second;
}

absl::StatusOr<v1::Graph> GraphBuilder::Build() {
  if (!status_.ok()) return status_;
  if (graph_.outputs_size() == 0) {
    return absl::InvalidArgumentError(absl::StrCat("graph '", graph_.name(), "' has no outputs"));
  }
  return std::move(graph_);
}

}  // namespace mapd

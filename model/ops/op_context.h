// OpContext: what an op's inference sees — input types (some absent) and attributes — with
// readers whose errors name the node, the op and the attribute.
#ifndef MAPD_MODEL_OPS_OP_CONTEXT_H_
#define MAPD_MODEL_OPS_OP_CONTEXT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "model/ir/attrs.h"
#include "model/ir/tensor_type.h"

namespace mapd {

class OpContext {
 public:
  OpContext(const std::string& node_name, const std::string& op,
            const std::vector<const TensorType*>& inputs, const AttrMap& attrs)
      : node_(node_name), op_(op), inputs_(inputs), attrs_(attrs) {}

  const std::string& node_name() const { return node_; }
  const std::string& op() const { return op_; }
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  bool has_input(int i) const { return i < num_inputs() && inputs_[i] != nullptr; }
  const TensorType& input(int i) const { return *inputs_[i]; }

  bool has_attr(const std::string& name) const { return attrs_.count(name) > 0; }
  // Required readers: INVALID_ARGUMENT when missing or of another kind.
  absl::StatusOr<int64_t> Int(const std::string& name) const;
  absl::StatusOr<double> Float(const std::string& name) const;  // accepts an int too
  absl::StatusOr<std::string> Str(const std::string& name) const;
  absl::StatusOr<bool> Bool(const std::string& name) const;
  absl::StatusOr<std::vector<int64_t>> Ints(const std::string& name) const;
  // Readers with a default for an absent attribute (a present one of the wrong kind is
  // still an error).
  absl::StatusOr<int64_t> Int(const std::string& name, int64_t def) const;
  absl::StatusOr<double> Float(const std::string& name, double def) const;
  absl::StatusOr<std::string> Str(const std::string& name, const std::string& def) const;
  absl::StatusOr<bool> Bool(const std::string& name, bool def) const;
  absl::StatusOr<std::vector<int64_t>> Ints(const std::string& name,
                                            const std::vector<int64_t>& def) const;
  // A dtype attribute given by short or long name ("f32", "int64").
  absl::StatusOr<DType> DTypeAttr(const std::string& name, DType def) const;
  // The attribute, if present.
  const v1::AttrValue* Attr(const std::string& name) const;
  const AttrMap& attrs() const { return attrs_; }

  // INVALID_ARGUMENT "node 'n' (op): <message>".
  template <typename... Args>
  absl::Status Error(const Args&... args) const {
    return absl::InvalidArgumentError(absl::StrCat("node '", node_, "' (", op_, "): ", args...));
  }

 private:
  const std::string& node_;
  const std::string& op_;
  const std::vector<const TensorType*>& inputs_;
  const AttrMap& attrs_;
};

}  // namespace mapd

#endif  // MAPD_MODEL_OPS_OP_CONTEXT_H_

// Internals of the TorchScript importer shared by its two translation units:
// torchscript_importer.cc (loading, parameters, the abstract interpreter) and
// aten_handlers.cc (one handler per aten op, mapping it to registry ops).
// Includes LibTorch: include it from those two files only.
#ifndef MAPD_PLANNER_IMPORT_IMPORTER_INTERNAL_H_
#define MAPD_PLANNER_IMPORT_IMPORTER_INTERNAL_H_

#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/ir.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "planner/graph/builder.h"
#include "planner/import/input_spec.h"
#include "planner/import/torch_dtype.h"
#include "planner/ir/attrs.h"
#include "planner/ir/tensor_type.h"

namespace mapd {
namespace import_internal {

// What the interpreter knows about a TorchScript value.
struct AValue {
  enum class Kind {
    kNone,    // None / uninitialised
    kTensor,  // an IR value
    kConst,   // a known non-tensor IValue (int, float, bool, str, device, dtype, lists of them)
    kList,    // a list whose items are known abstractly (may hold tensors)
    kTuple,
    kModule,  // a module object reached through prim::GetAttr
  };
  Kind kind = Kind::kNone;
  std::string tensor;        // kTensor: IR value name
  c10::IValue constant;      // kConst
  bool scalar_tensor = false;  // kConst that stands for a 0-d tensor (prim::NumToTensor, 0-d constants)
  std::vector<AValue> items;   // kList / kTuple
  c10::intrusive_ptr<c10::ivalue::Object> module;  // kModule
  std::string path;            // kModule: module path; kTensor from a parameter: its name

  static AValue None() { return AValue(); }
  static AValue Tensor(std::string name) {
    AValue v;
    v.kind = Kind::kTensor;
    v.tensor = std::move(name);
    return v;
  }
  static AValue Const(c10::IValue iv) {
    AValue v;
    v.kind = Kind::kConst;
    v.constant = std::move(iv);
    return v;
  }
  bool is_tensor() const { return kind == Kind::kTensor; }
  bool is_none() const { return kind == Kind::kNone || (kind == Kind::kConst && constant.isNone()); }
  bool is_number() const {
    return kind == Kind::kConst && (constant.isInt() || constant.isDouble() || constant.isBool());
  }
};

class Importer;
using Handler = std::function<absl::StatusOr<std::vector<AValue>>(Importer&, torch::jit::Node*,
                                                                  const std::vector<AValue>&)>;

// aten op name ("aten::linear") → handler; defined in aten_handlers.cc.
const std::map<std::string, Handler>& AtenHandlers();

// The MAP dtype of a LibTorch scalar type; INVALID_ARGUMENT for types MAP lacks.
absl::StatusOr<DType> CheckedDType(c10::ScalarType t);

// The abstract interpreter; handlers call back into it to add nodes and read arguments.
class Importer {
 public:
  Importer(std::string graph_name, std::string source_path);

  absl::StatusOr<v1::Graph> Run(torch::jit::Module& module, const std::vector<InputSpec>& specs);

  // ---- used by handlers ----
  GraphBuilder& builder() { return builder_; }
  // Adds a node through the builder and wraps its outputs; errors name the aten node.
  absl::StatusOr<std::vector<AValue>> Emit(torch::jit::Node* n, const std::string& op,
                                           const std::vector<std::string>& inputs, const Attrs& attrs);
  absl::StatusOr<AValue> Emit1(torch::jit::Node* n, const std::string& op, const std::vector<std::string>& inputs,
                               const Attrs& attrs);
  const TensorType& TypeOf(const AValue& v) const;

  // Argument readers (errors name the aten node and argument index).
  absl::StatusOr<std::string> TensorArg(torch::jit::Node* n, const std::vector<AValue>& args, int i);
  // "" for None.
  absl::StatusOr<std::string> OptionalTensorArg(torch::jit::Node* n, const std::vector<AValue>& args, int i);
  absl::StatusOr<int64_t> IntArg(torch::jit::Node* n, const std::vector<AValue>& args, int i);
  absl::StatusOr<std::optional<int64_t>> OptionalIntArg(torch::jit::Node* n, const std::vector<AValue>& args, int i);
  absl::StatusOr<double> DoubleArg(torch::jit::Node* n, const std::vector<AValue>& args, int i);
  absl::StatusOr<bool> BoolArg(torch::jit::Node* n, const std::vector<AValue>& args, int i);
  absl::StatusOr<std::string> StringArg(torch::jit::Node* n, const std::vector<AValue>& args, int i);
  absl::StatusOr<std::vector<int64_t>> IntListArg(torch::jit::Node* n, const std::vector<AValue>& args, int i);
  absl::StatusOr<std::vector<std::string>> TensorListArg(torch::jit::Node* n, const std::vector<AValue>& args, int i);
  // A dtype argument (ScalarType as int) → MAP dtype; nullopt for None.
  absl::StatusOr<std::optional<DType>> DTypeArg(torch::jit::Node* n, const std::vector<AValue>& args, int i);
  // Tensor or number argument: fills either `tensor` or `scalar`.
  absl::Status TensorOrScalarArg(torch::jit::Node* n, const std::vector<AValue>& args, int i, std::string* tensor,
                                 v1::AttrValue* scalar);
  // Materialises a number as a 0-d tensor node (for ops that need a tensor operand).
  absl::StatusOr<std::string> ScalarTensor(torch::jit::Node* n, const AValue& v);

  // The value a name reaches, for in-place ops: rebinds the jit value and records a buffer
  // update when the target is a buffer.
  void RebindInPlace(torch::jit::Value* target, const AValue& new_value);

  absl::Status Error(torch::jit::Node* n, const std::string& msg) const;

 private:
  friend struct InterpreterAccess;
  // (defined in torchscript_importer.cc)
  absl::Status CollectParameters(torch::jit::Module& module);
  absl::Status BindInputs(torch::jit::Graph& g, torch::jit::Module& module, const std::vector<InputSpec>& specs);
  absl::Status RunBlock(torch::jit::Block* block);
  absl::Status RunNode(torch::jit::Node* n);
  absl::Status RunIf(torch::jit::Node* n);
  absl::Status RunLoop(torch::jit::Node* n);
  absl::Status RunCall(torch::jit::Node* n, const std::vector<AValue>& args);
  absl::Status FoldConstant(torch::jit::Node* n, const std::vector<AValue>& args);
  absl::StatusOr<AValue> GetAttr(torch::jit::Node* n, const AValue& obj);
  absl::StatusOr<AValue> ConstantValue(torch::jit::Node* n);
  std::string ScopeOf(torch::jit::Node* n) const;
  const AValue& Lookup(torch::jit::Value* v) const;
  void Bind(torch::jit::Value* v, AValue a) { env_[v] = std::move(a); }

  GraphBuilder builder_;
  std::string source_path_;
  std::unordered_map<torch::jit::Value*, AValue> env_;
  // TensorImpl → parameter name (first name; others are aliases).
  std::unordered_map<const c10::TensorImpl*, std::string> param_by_impl_;
  std::unordered_map<std::string, v1::Parameter::Kind> param_kind_;
  int num_constants_ = 0;
  std::vector<std::string> scope_stack_;  // module path of each method being interpreted
  int call_depth_ = 0;
  int64_t loop_budget_ = 1 << 20;  // total unrolled loop iterations allowed
};

}  // namespace import_internal
}  // namespace mapd

#endif  // MAPD_PLANNER_IMPORT_IMPORTER_INTERNAL_H_

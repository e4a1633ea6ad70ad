// Internals of the TorchScript importer shared by its translation units:
// torchscript_importer.cc (loading, parameters, the abstract interpreter), aten_handlers.cc (the
// handler table, linear algebra, norms, losses, reductions) and the family files that add their
// handlers to it (elementwise_, shape_, rnn_, spatial_ and index_handlers.cc).
// Includes LibTorch: include it from the importer's own files only.
#ifndef MAPD_MODEL_IMPORT_IMPORTER_INTERNAL_H_
#define MAPD_MODEL_IMPORT_IMPORTER_INTERNAL_H_

#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/ir.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "model/graph/builder.h"
#include "model/import/input_spec.h"
#include "model/import/torch_dtype.h"
#include "model/ir/attrs.h"
#include "model/ir/tensor_type.h"

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
    // A tensor known at import time (`constant` holds it): a trace's tensor constant, a plain
    // tensor attribute, or the result of folding ops that depend on no input, parameter or
    // random draw (constant_folding.cc). It becomes a CONSTANT parameter only when an op that
    // is emitted into the graph reads it (Importer::Materialise).
    kConstTensor,
  };
  Kind kind = Kind::kNone;
  std::string tensor;        // kTensor: IR value name
  c10::IValue constant;      // kConst; kConstTensor: the tensor
  bool scalar_tensor = false;  // kConst that stands for a 0-d tensor (prim::NumToTensor, 0-d constants)
  std::vector<AValue> items;   // kList / kTuple
  c10::intrusive_ptr<c10::ivalue::Object> module;  // kModule
  // kModule: module path; kTensor from a parameter: its name; kConstTensor read from a plain
  // tensor attribute: its path (a materialised unmodified attribute is read from the archive).
  std::string path;

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
  static AValue ConstTensor(at::Tensor t, std::string attribute_path = "") {
    AValue v;
    v.kind = Kind::kConstTensor;
    v.constant = c10::IValue(std::move(t));
    v.path = std::move(attribute_path);
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
// The handlers' vocabulary: a node's folded arguments and what a handler returns.
using Args = std::vector<AValue>;
using Node = torch::jit::Node;
using Result = absl::StatusOr<std::vector<AValue>>;

// aten op name ("aten::linear") → handler; defined in aten_handlers.cc.
const std::map<std::string, Handler>& AtenHandlers();
// Adds activations, arithmetic, comparisons, and the ops that make or convert tensors
// (elementwise_handlers.cc).
void AddElementwiseHandlers(std::map<std::string, Handler>& m);
// Adds views, reshapes, slicing, split/cat/stack, padding, index_select and index
// (shape_handlers.cc).
void AddShapeHandlers(std::map<std::string, Handler>& m);
// Adds aten::lstm and aten::gru (rnn_handlers.cc).
void AddRnnHandlers(std::map<std::string, Handler>& m);
// Adds convolutions (1-D, 2-D, transposed), pooling, resizing, group and instance norms
// (spatial_handlers.cc).
void AddSpatialHandlers(std::map<std::string, Handler>& m);
// The generic path (generic_handler.cc): `n` as one "aten" node of its schema, measured through
// LibTorch (model/ops/generic_op.h); its refusal says why.
Result EmitGeneric(Importer& im, torch::jit::Node* n, const std::vector<AValue>& args);
// Adds selections and scatters: max/min/argmax/argmin over a dim, topk, sort, cumsum, flip,
// gather, scatter(_add), index_add, one_hot, unbind (index_handlers.cc).
void AddIndexHandlers(std::map<std::string, Handler>& m);
// Handler builders (aten_handlers.cc): op(tensors...) → op with the first `num_tensor_args`
// tensor arguments; op(self, <int>) → op {attr=k} (unsqueeze, triu, tril).
Handler SameArgs(const std::string& op, int num_tensor_args);
Handler WithInt(const std::string& op, const std::string& attr);
// A handler's result: the one value emitted, or the error.
absl::StatusOr<std::vector<AValue>> One(absl::StatusOr<AValue> v);
// A list of values (split's pieces).
AValue ListOf(std::vector<AValue> items);
// Emits one op with one output and returns its name (handlers that chain several ops).
absl::StatusOr<std::string> EmitTensor(Importer& im, torch::jit::Node* n, const std::string& op,
                                       const std::vector<std::string>& inputs, const Attrs& attrs = {});

// The MAP dtype of a LibTorch scalar type; INVALID_ARGUMENT for types MAP lacks.
absl::StatusOr<DType> CheckedDType(c10::ScalarType t);

// Constant folding (constant_folding.cc).
// Whether an op draws random numbers (dropout, bernoulli, rand*, normal, ...): never folded,
// since every step draws again.
bool IsRandomOp(const std::string& kind);
// Ops that read only the dtype (and shape) of their argument 0 (new_zeros, empty_like, ...):
// a graph tensor there does not make the result depend on the graph.
bool IsTypeOnlyOp(const std::string& kind);
// Structural and shape-query node kinds the interpreter handles itself (torchscript_importer.cc).
bool IsInterpreterKind(const std::string& kind);
// The ops of an inlined forward graph that need an aten handler but have none, with counts:
// nodes with a tensor output that depend on a graph input, a parameter or buffer (a tensor in
// `state`), or a random draw. Everything else folds at import and needs no handler.
std::map<std::string, int> UnsupportedOps(torch::jit::Graph& inlined, const c10::IValue& self,
                                          const std::unordered_map<const c10::TensorImpl*, std::string>& state);
// Abstract value ↔ IValue for evaluating a node with LibTorch; nullopt when `v` is not known
// at import time (a graph tensor, a module).
std::optional<c10::IValue> ToIValue(const AValue& v);
// Back from an evaluated IValue: 0-d tensors become numbers standing for 0-d tensors, other
// tensors kConstTensor.
std::optional<AValue> FromIValue(const c10::IValue& iv);

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
  // The type of a tensor argument, graph or constant, without making a constant a graph value
  // (ops that read only their argument's shape and dtype).
  absl::StatusOr<TensorType> TensorTypeArg(torch::jit::Node* n, const std::vector<AValue>& args, int i);
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
  // A tensor known at import (kConstTensor) as a graph value (a CONSTANT parameter).
  absl::StatusOr<std::string> ConstantTensor(torch::jit::Node* n, const AValue& v) {
    auto m = Materialise(n, v);
    if (!m.ok()) return m.status();
    return m->tensor;
  }
  // Materialises a number as a 0-d tensor node (for ops that need a tensor operand).
  absl::StatusOr<std::string> ScalarTensor(torch::jit::Node* n, const AValue& v);

  // The value a name reaches, for in-place ops: rebinds the jit value (and every other holding
  // the same tensor), records a buffer update when the target is a buffer, and when the target
  // is a slice of another value writes the new slice back into it (slice_scatter), so that
  // x[a:b].zero_() changes x.
  absl::Status RebindInPlace(torch::jit::Node* n, torch::jit::Value* target, const AValue& new_value);
  // Records that graph value `view` is `base` sliced by `slice` (dim, start, end, step).
  void RecordSliceView(const std::string& view, const std::string& base, const Attrs& slice);

  absl::Status Error(torch::jit::Node* n, const std::string& msg) const;

  // Whether a graph value needs a gradient in training, as the profiler will decide it: a
  // trainable parameter does, and so does a floating output of a node reading one that does
  // (a generic node's outputs as measured: detach's does not).
  bool RequiresGrad(const std::string& value) const { return grad_values_.count(value) > 0; }
  // The model's batch: dimension 0 of its first input (0 when it has none).
  int64_t batch() const { return batch_; }

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
  // Evaluates `n` on its known arguments with LibTorch and binds its outputs. Returns false
  // (nothing bound) when a tensor result is larger than the folding limit and an aten handler
  // can emit the op instead; errors name the node.
  // For a type-only op's argument 0: an uninitialised constant of the graph tensor's type, so
  // that the op folds (`v` itself when larger than the folding limit).
  absl::StatusOr<AValue> TypePlaceholder(torch::jit::Node* n, const AValue& v) const;
  absl::StatusOr<bool> TryFold(torch::jit::Node* n, const std::vector<AValue>& args);
  absl::Status FoldConstant(torch::jit::Node* n, const std::vector<AValue>& args);
  // A kConstTensor as a graph tensor (a CONSTANT parameter, once per tensor version); lists and
  // tuples item by item; other values as they are.
  absl::StatusOr<AValue> Materialise(torch::jit::Node* n, const AValue& v);
  // Adds a CONSTANT parameter holding `t` (inline data, or the archive key `attribute_path`).
  absl::StatusOr<std::string> AddConstantParameter(torch::jit::Node* n, const at::Tensor& t,
                                                   const std::string& attribute_path);
  absl::StatusOr<AValue> GetAttr(torch::jit::Node* n, const AValue& obj);
  absl::StatusOr<AValue> ConstantValue(torch::jit::Node* n);
  std::string ScopeOf(torch::jit::Node* n) const;
  const AValue& Lookup(torch::jit::Value* v) const;
  void Bind(torch::jit::Value* v, AValue a) { env_[v] = std::move(a); }

  GraphBuilder builder_;
  std::string source_path_;
  std::unordered_set<std::string> grad_values_;
  int64_t batch_ = 0;
  // MAPD_IMPORT_GENERIC_ONLY=1 (a test switch): every aten op goes by the generic path.
  bool generic_only_ = false;
  std::unordered_map<torch::jit::Value*, AValue> env_;
  // TensorImpl → parameter name (first name; others are aliases).
  std::unordered_map<const c10::TensorImpl*, std::string> param_by_impl_;
  std::unordered_map<std::string, v1::Parameter::Kind> param_kind_;
  int num_constants_ = 0;
  // Graph values that are slices of others, for writes through them (RebindInPlace).
  struct SliceView {
    std::string base;
    Attrs slice;
  };
  std::unordered_map<std::string, SliceView> views_;
  absl::Status WriteBack(torch::jit::Node* n, const std::string& old_name, const AValue& new_value);
  // Materialised constants: tensor → (version when materialised, parameter name); the tensors
  // are kept so that their addresses stay unique.
  std::unordered_map<const c10::TensorImpl*, std::pair<uint32_t, std::string>> materialised_;
  std::vector<at::Tensor> materialised_tensors_;
  int64_t inline_constant_bytes_ = 0;
  // Plain tensor attributes (neither parameter nor buffer) as the copies folding works on.
  std::unordered_map<const c10::TensorImpl*, AValue> attribute_copies_;  // total inline data of materialised constants
  std::vector<std::string> scope_stack_;  // module path of each method being interpreted
  int call_depth_ = 0;
  int64_t loop_budget_ = 1 << 20;  // total unrolled loop iterations allowed
};

}  // namespace import_internal
}  // namespace mapd

#endif  // MAPD_MODEL_IMPORT_IMPORTER_INTERNAL_H_

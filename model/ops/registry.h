// The op registry: one entry per IR op, each in one place.
//
// An entry (OpDef) says what the op reads (inputs, some optional), which attributes it takes
// (unknown ones are rejected, so typos surface), how many values it defines, and how to infer
// and validate output types. It has room for what later stages attach to the same entry:
// FLOPs/bytes and saved tensors (profiler), sharding labels (planner); the LibTorch call that
// executes an op lives in a parallel table in worker/runtime, keyed by the same name.
#ifndef MAPD_MODEL_OPS_REGISTRY_H_
#define MAPD_MODEL_OPS_REGISTRY_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/ir/attrs.h"
#include "model/ir/tensor_type.h"
#include "model/ops/cost.h"
#include "model/ops/op_context.h"
#include "model/ops/sharding_rule.h"

namespace mapd {

enum class AttrKind { kInt, kFloat, kString, kBool, kInts, kFloats, kStrings, kNumber };

struct AttrSpec {
  std::string name;
  AttrKind kind;
  bool required = false;
  std::string doc;
};

struct OpInputSpec {
  std::string name;
  bool optional = false;  // may be absent ("" in Node.inputs) or omitted when trailing
};

// Coarse traits that passes consult without knowing every op.
struct OpTraits {
  bool elementwise = false;  // output[i] depends on input[i] only (after broadcasting)
  bool view = false;         // output may alias the first input's storage (no new memory)
  bool copies_if_noncontiguous = false;  // a view that copies a non-contiguous input (reshape, contiguous)
  bool random = false;       // draws random numbers (dropout, bernoulli, rand, randn)
  bool creation = false;     // makes a tensor from attributes only
  // The input's gradient is the output's gradient itself or a view of it (no new memory): most
  // views, and sum (its backward expands the output's gradient). Not slice/select/split/chunk
  // (their backward fills a new tensor of the input's size) nor expand (it sums).
  bool grad_aliases_output_grad = false;
};

using InferFn = std::function<absl::StatusOr<std::vector<TensorType>>(const OpContext&)>;
// Per node, where an op's traits cannot say it for every node (the generic ATen op): whether
// its outputs are views of input 0, and whether output `o` carries a gradient when an input does.
using IsViewFn = std::function<bool(const CostContext&)>;
using OutputGradFn = std::function<bool(const CostContext&, int output)>;

struct OpDef {
  std::string name;
  std::string summary;  // one line for docs and `mapctl ops`
  std::vector<OpInputSpec> inputs;
  bool variadic = false;  // the last input spec repeats (cat, stack); at least one
  std::vector<AttrSpec> attrs;
  OpTraits traits;
  // Output types from input types and attributes; errors name the fault (OpContext::Error).
  InferFn infer;
  // FLOPs, bytes and gradient FLOPs (model/ops/cost.h); unset = one FLOP per output element.
  CostFn cost;
  // What autograd keeps for the backward; unset = nothing.
  SavedFn saved;
  // For views: whether outputs are contiguous; unset = as contiguous as the input.
  LayoutFn layout;
  // Which dimensions may be split across devices, einsum style (model/ops/sharding_rule.h,
  // docs/sharding.md); the planner generates the node's strategies from it.
  ShardingFn sharding;
  // Unset: traits.view for every node.
  IsViewFn is_view;
  // Unset: every floating-point output carries a gradient when an input does.
  OutputGradFn output_grad;
};

// Whether the node's outputs share input 0's storage (views; a reshape of a non-contiguous
// input copies).
bool IsViewNode(const OpDef& def, const CostContext& ctx);
// Whether output `o` of the node needs a gradient, given whether any input does.
bool OutputNeedsGrad(const OpDef& def, const CostContext& ctx, int o, bool any_input_needs_grad);

// An OpDef built by field name (ops_*.cc):
//   r.Add(Op("linear", "y = x @ w^T + b").Inputs({{"x"}, {"weight"}, {"bias", true}})
//             .Infer(InferLinear).Cost(LinearCost).Saved(LinearSaved).Sharding(LinearSharding));
class Op {
 public:
  Op(std::string name, std::string summary) {
    def_.name = std::move(name);
    def_.summary = std::move(summary);
  }
  Op& Inputs(std::vector<OpInputSpec> inputs) { return Set(def_.inputs, std::move(inputs)); }
  Op& Variadic(bool variadic = true) { return Set(def_.variadic, variadic); }
  Op& Attrs(std::vector<AttrSpec> attrs) { return Set(def_.attrs, std::move(attrs)); }
  Op& Traits(OpTraits traits) { return Set(def_.traits, traits); }
  Op& Infer(InferFn f) { return Set(def_.infer, std::move(f)); }
  Op& Cost(CostFn f) { return Set(def_.cost, std::move(f)); }
  Op& Saved(SavedFn f) { return Set(def_.saved, std::move(f)); }
  Op& Layout(LayoutFn f) { return Set(def_.layout, std::move(f)); }
  Op& Sharding(ShardingFn f) { return Set(def_.sharding, std::move(f)); }
  Op& IsView(IsViewFn f) { return Set(def_.is_view, std::move(f)); }
  Op& OutputGrad(OutputGradFn f) { return Set(def_.output_grad, std::move(f)); }
  OpDef Take() { return std::move(def_); }

 private:
  template <typename T, typename V>
  Op& Set(T& field, V&& value) {
    field = std::forward<V>(value);
    return *this;
  }
  OpDef def_;
};

class OpRegistry {
 public:
  // The registry holding every built-in op.
  static const OpRegistry& Global();

  // INVALID_ARGUMENT without a name or an infer function; ALREADY_EXISTS for a second entry.
  absl::Status Register(OpDef def);
  // Register for the built-in ops: a failure is a bug in MAP, fatal at start-up naming the op.
  void Add(Op& op);  // the builder's chain (an lvalue); `op` is emptied
  void Add(Op&& op) { Add(op); }
  // nullptr when unknown.
  const OpDef* Find(const std::string& name) const;
  std::vector<std::string> Names() const;

  // Validates inputs/attributes against the entry and runs inference. `node_name` is used
  // in error messages. Fails with INVALID_ARGUMENT naming the node for every fault.
  absl::StatusOr<std::vector<TensorType>> Infer(const std::string& node_name, const std::string& op,
                                                const std::vector<const TensorType*>& inputs,
                                                const AttrMap& attrs) const;

 private:
  std::map<std::string, OpDef> ops_;
};

// Per-family registration (ops_*.cc).
void RegisterLinearOps(OpRegistry& r);
void RegisterNormOps(OpRegistry& r);
void RegisterElementwiseOps(OpRegistry& r);
void RegisterReduceOps(OpRegistry& r);
void RegisterShapeOps(OpRegistry& r);
void RegisterCreationOps(OpRegistry& r);
void RegisterConvOps(OpRegistry& r);
void RegisterLossOps(OpRegistry& r);
void RegisterCommOps(OpRegistry& r);
void RegisterIndexOps(OpRegistry& r);
void RegisterGenericOps(OpRegistry& r);

}  // namespace mapd

#endif  // MAPD_MODEL_OPS_REGISTRY_H_

// The op registry: one entry per IR op, each in one place.
//
// An entry (OpDef) says what the op reads (inputs, some optional), which attributes it takes
// (unknown ones are rejected, so typos surface), how many values it defines, and how to infer
// and validate output types. It has room for what later stages attach to the same entry:
// FLOPs/bytes and saved tensors (profiler), sharding labels (planner); the LibTorch call that
// executes an op lives in a parallel table in worker/runtime, keyed by the same name.
#ifndef MAPD_PLANNER_OPS_REGISTRY_H_
#define MAPD_PLANNER_OPS_REGISTRY_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "planner/ir/attrs.h"
#include "planner/ir/tensor_type.h"
#include "planner/ops/cost.h"
#include "planner/ops/op_context.h"
#include "planner/ops/sharding_rule.h"

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
};

using InferFn = std::function<absl::StatusOr<std::vector<TensorType>>(const OpContext&)>;

struct OpDef {
  std::string name;
  std::string summary;  // one line for docs and `mapctl ops`
  std::vector<OpInputSpec> inputs;
  bool variadic = false;  // the last input spec repeats (cat, stack); at least one
  std::vector<AttrSpec> attrs;
  OpTraits traits;
  // Output types from input types and attributes; errors name the fault (OpContext::Error).
  InferFn infer;
  // FLOPs, bytes and gradient FLOPs (planner/ops/cost.h); unset = one FLOP per output element.
  CostFn cost;
  // What autograd keeps for the backward; unset = nothing.
  SavedFn saved;
  // For views: whether outputs are contiguous; unset = as contiguous as the input.
  LayoutFn layout;
  // Which dimensions may be split across devices, einsum style (planner/ops/sharding_rule.h,
  // docs/sharding.md); the planner generates the node's strategies from it.
  ShardingFn sharding;
};

class OpRegistry {
 public:
  // The registry holding every built-in op.
  static const OpRegistry& Global();

  absl::Status Register(OpDef def);
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

}  // namespace mapd

#endif  // MAPD_PLANNER_OPS_REGISTRY_H_

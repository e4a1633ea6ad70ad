// The generic ATen node (op "aten", DESIGN §4a): the floor under the registry's hand-written
// entries. A traced aten op without an entry of its own imports as one node that names its
// schema ("aten::cdist", "aten::logsumexp") and carries its non-tensor arguments; the importer
// measures, through LibTorch, what the rest of MAP needs to know about it — output types, which
// outputs alias an input, which carry a gradient, what its backward saves, its workspace, and
// whether it treats the samples of a batch independently — and records it in the node's
// attributes. So the planner, the profiler and the lowering read it like any other node and
// link no LibTorch; the runtime executes it by its schema through c10::Dispatcher.
//
// This header is the one reader and writer of those attributes (torch-free).
#ifndef MAPD_MODEL_OPS_GENERIC_OP_H_
#define MAPD_MODEL_OPS_GENERIC_OP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/ir/attrs.h"
#include "model/ir/tensor_type.h"

namespace mapd {

inline constexpr char kGenericOp[] = "aten";

// One argument of the schema, in order. Tensors refer to the node's inputs by index.
struct GenericArg {
  enum class Kind {
    kTensor,              // "t:3"      node input 3
    kTensorList,          // "tl:3,4"   Tensor[] of node inputs 3 and 4 ("tl:" empty)
    kOptionalTensorList,  // "otl:3,_"  Tensor?[] (index): input 3, then None
    kNone,                // "none"
    kInt,                 // "i:5"      int, SymInt, ScalarType, Layout, MemoryFormat, an int Scalar
    kFloat,               // "f:0.5"    float, a float Scalar
    kBool,                // "b:1"
    kInts,                // "il:1,2"
    kFloats,              // "fl:0.5,1"
    kBools,               // "bl:1,0"
    kString,              // "s:mean"   (the rest of the string, as it is)
    kDevice,              // "dev"      the device the node runs on
    kGenerator,           // "gen"      the run's generator (random ops)
  };
  Kind kind = Kind::kNone;
  std::vector<int64_t> ints;    // kTensor (one), kTensorList, kOptionalTensorList (-1: None), kInt, kInts, kBool, kBools
  std::vector<double> floats;   // kFloat, kFloats
  std::string text;             // kString

  std::string Encode() const;
  static absl::StatusOr<GenericArg> Decode(const std::string& s);
};

// How a generic node's memory and sizes follow its batch: what the importer proved by
// evaluating the op on split and whole inputs.
struct GenericBatchRule {
  int64_t batch = 0;            // the batch at import (0: the op is not per-sample)
  std::vector<int64_t> inputs;  // per input: its batch dimension, or -1 (the same for every sample)
  std::vector<int64_t> outputs; // per output: its batch dimension
};

// A size measured at two batch sizes: fixed + per_sample * batch.
struct LinearBytes {
  int64_t fixed = 0;
  int64_t per_sample = 0;
  int64_t At(int64_t batch) const { return fixed + per_sample * batch; }
};

struct GenericNode {
  std::string schema;  // "aten::cdist" or "aten::add.Tensor" (name, then overload)
  std::vector<GenericArg> args;
  std::vector<TensorType> input_types;   // at import
  std::vector<TensorType> output_types;  // at import
  GenericBatchRule batch;
  std::vector<int64_t> alias;      // per output: the input it is a view of, or -1
  std::vector<bool> grad;          // per output: carries a gradient when the inputs do
  std::vector<int64_t> saved_inputs;   // inputs whose storage backward keeps
  std::vector<int64_t> saved_outputs;  // outputs whose storage backward keeps
  LinearBytes saved_extra;         // tensors made inside the op that backward keeps
  LinearBytes workspace;           // forward temporaries
  LinearBytes grad_workspace;      // backward temporaries beside the input gradients
  bool random = false;             // draws random numbers
  std::string measured_on = "meta";  // "meta" (meta tensors) or "cpu" (real tensors: no meta kernel)

  // The schema's name without the overload ("aten::add").
  std::string Name() const;
  // Written to and read from a node's attributes (Parse validates every field against the
  // node's inputs; errors name the attribute).
  Attrs ToAttrs() const;
  static absl::StatusOr<GenericNode> Parse(const AttrMap& attrs, int num_inputs);
  // Output types for inputs of these types: the recorded ones, with the batch dimension of the
  // per-sample rule following the inputs'. INVALID_ARGUMENT (the message says what differs)
  // when the inputs differ from the import's anywhere else, or the op is not per-sample.
  absl::StatusOr<std::vector<TensorType>> OutputTypes(const std::vector<const TensorType*>& inputs) const;
  // The batch the inputs carry (the import's batch when the op is not per-sample).
  int64_t BatchOf(const std::vector<const TensorType*>& inputs) const;
};

// The attribute names of a generic node (for the registry's attribute specs).
std::vector<std::string> GenericAttrNames();

// FLOPs of the generic ops whose formula is known, by schema name (forward; -1 when unknown,
// and the op is then costed as memory-bound, its FLOPs marked estimated).
double GenericFormulaFlops(const std::string& name, const std::vector<const TensorType*>& inputs,
                           const std::vector<TensorType>& outputs, const std::vector<GenericArg>& args);

}  // namespace mapd

#endif  // MAPD_MODEL_OPS_GENERIC_OP_H_

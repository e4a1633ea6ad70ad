// What an op costs and what autograd keeps for its backward — the registry's input to the
// symbolic profiler. Each op's entry sets these next to its shape inference (ops_*.cc); they
// describe the LibTorch implementation in worker/runtime/exec_table.cc, which is what the
// profiler's predictions are measured against.
#ifndef MAPD_MODEL_OPS_COST_H_
#define MAPD_MODEL_OPS_COST_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "model/ir/tensor_type.h"
#include "model/ops/op_context.h"

namespace mapd {

// What a cost or saved-tensor function sees about one node.
struct CostContext {
  const OpContext& op;                   // input types and attributes
  const std::vector<TensorType>& outputs;
  std::vector<bool> requires_grad;       // per input: does autograd need its gradient?
  std::vector<bool> contiguous;          // per input: dense row-major layout?

  bool any_requires_grad() const {
    for (bool b : requires_grad) {
      if (b) return true;
    }
    return false;
  }
  bool input_requires_grad(int i) const { return i < static_cast<int>(requires_grad.size()) && requires_grad[i]; }
  bool input_contiguous(int i) const { return i >= static_cast<int>(contiguous.size()) || contiguous[i]; }
};

// Gloo (LibTorch 1.13) has no bf16: the CPU runtime sums a 16-bit tensor through an fp32 copy
// (worker/transport/gloo_communicator.cc) — its bytes, 0 for other dtypes. The collective op's cost
// and the profiler's ZeRO reduce-scatter count it.
inline int64_t Fp32ReductionCopyBytes(const TensorType& t) { return Is16BitFloat(t.dtype) ? t.NumElements() * 4 : 0; }

struct OpCost {
  double flops = 0;                // forward floating-point operations
  std::vector<double> grad_flops;  // per input: FLOPs of computing that input's gradient
  int64_t bytes = 0;               // forward bytes read + written (roofline)
  int64_t workspace_bytes = 0;     // forward temporaries allocated and freed inside the op
  int64_t grad_workspace_bytes = 0;  // backward temporaries beside the input gradients
  int kernels = 1;                 // kernel launches in the forward (per-kernel overhead)
  // > 0: a matrix product, of this many FLOPs a product (one matrix of a batch): small products
  // run far below the peak rate (a calibrated profile's matmul_rates say how far).
  double flops_per_product = 0;
  // Elementwise arithmetic (ElementwiseCost: activations, norms, softmax): its FLOPs run at the
  // device's vector rate where a calibrated profile measured one (vector_flops) — erf GELU takes
  // ~2 ns an element on one thread here, ~15x its FLOPs at the matrix-product peak.
  bool vector_arithmetic = false;
  // The FLOPs are a guess, not a formula: a generic ATen op (model/ops/generic_op.h) of no known
  // formula, costed as memory-bound at one FLOP per output element. mapctl profile reports the
  // share of FLOPs so estimated.
  bool flops_estimated = false;
};

// Storage autograd keeps from the forward until this node's backward runs.
struct SavedSpec {
  std::vector<int> inputs;   // inputs whose storage is kept (a view keeps its base)
  std::vector<int> outputs;  // outputs whose storage is kept
  int64_t extra_bytes = 0;   // tensors made inside the op and kept (masks, statistics, copies)
};

using CostFn = std::function<OpCost(const CostContext&)>;
using SavedFn = std::function<SavedSpec(const CostContext&)>;
// Whether the outputs of a view op are contiguous (dense row-major), given its input's layout.
using LayoutFn = std::function<bool(const CostContext&)>;

// ---- helpers shared by op entries ----

// Every input and output read/written once.
int64_t IoBytes(const CostContext& c);
// An elementwise op: `per_elem` FLOPs per output element forward, `grad_per_elem` per input
// element for each input that needs a gradient.
CostFn ElementwiseCost(double per_elem, double grad_per_elem);
// No arithmetic, no memory traffic (views).
CostFn FreeCost();
// Memory traffic only (cat, pad, roll, copies): every input and output moved once, no FLOPs and
// no gradient FLOPs.
OpCost CopyCost(const CostContext& c);
// Saves the listed inputs/outputs unconditionally (when any input needs a gradient).
SavedFn Saves(std::vector<int> inputs, std::vector<int> outputs);
// Saves nothing.
SavedFn SavesNothing();
// A reduction: one FLOP per input element, forward and backward.
CostFn ReduceCost();

}  // namespace mapd

#endif  // MAPD_MODEL_OPS_COST_H_

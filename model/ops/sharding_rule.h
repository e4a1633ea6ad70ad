// Sharding rules: the registry's einsum-style description of which dimensions of an op can be
// split across devices (DESIGN §3). Each op's entry (ops_*.cc) computes its rule from the
// node's input types and attributes; planner/sharding/strategies.h turns a rule into the
// node's strategies on a device mesh. See docs/sharding.md.
//
// Notation: every dimension of every input and output gets a label (one char). A label that
// appears in several tensors names one index space: splitting it splits all those dimensions
// together, so each device computes its slice of the outputs from its slices of the inputs.
//   linear   x "abk", w "nk", b "n" -> y "abn"   linear_reduced "k"
// A label in the inputs but not in an output is reduced by the op. If the reduction is linear
// (sum, mean, matmul contraction) the label is in `linear_reduced`: it may be split, and then
// every device holds a summand of the outputs (Partial). Otherwise (softmax, norms, max,
// windows, gathers) it is in `unsplittable`, as is every label whose split the op cannot
// compute locally.
//
// Labels whose dimensions differ in size: only where dimensions are merged or split — views
// (view/reshape/flatten), repeat_interleave, and the heads of grouped-query attention — does
// one label name dimensions of different sizes. A merged dimension keeps the label of its
// outermost factor (its inner factors are unsplittable): splitting the outermost factor in n
// equal parts is splitting the merged dimension in the same n contiguous parts (n must divide
// both, which strategy generation checks in every tensor). Everywhere else the same label
// means the same size, and a broadcast size-1 dimension has a label of its own that is
// unsplittable.
#ifndef MAPD_MODEL_OPS_SHARDING_RULE_H_
#define MAPD_MODEL_OPS_SHARDING_RULE_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/ir/tensor_type.h"
#include "model/ops/cost.h"

namespace mapd {

struct ShardingRule {
  std::vector<std::string> inputs;   // one label string per input (one char per dimension; "" for an absent input)
  std::vector<std::string> outputs;  // one per output
  std::string linear_reduced;        // labels summed over (linear): splitting them leaves outputs Partial
  std::string unsplittable;          // labels that must not be split (softmax dim, normalised, windowed, ...)
  // Inputs added to the result of the linear reduction (the bias of linear/addmm/conv2d): when a
  // linear_reduced label is split they are Partial too, so the bias is counted once (a
  // replicated bias becomes Partial locally: one device keeps it, the others use zeros).
  std::vector<int> addends;
  // The linear_reduced labels that are averaged (mean, and losses with reduction "mean"): when
  // they are split each device's mean must be scaled by its share of the elements (local count
  // / global count) for the Partial summands to add up to the global mean (DESIGN §7).
  std::string averaged;

  bool IsLinearReduced(char label) const { return linear_reduced.find(label) != std::string::npos; }
  bool IsUnsplittable(char label) const { return unsplittable.find(label) != std::string::npos; }
  bool IsAveraged(char label) const { return averaged.find(label) != std::string::npos; }
  bool IsAddend(int input) const;
  // "abk,nk,n->abn; sum k; keep -" (absent inputs print as "_", 0-d tensors as "").
  std::string ToString() const;
};

using ShardingFn = std::function<absl::StatusOr<ShardingRule>(const CostContext&)>;

// Checks a rule against the node it was computed for: one label string per input and output,
// of the tensor's rank ("" for absent inputs); no label twice in one tensor; linear_reduced and
// unsplittable labels are disjoint and used; linear_reduced labels appear in no output; every
// input label missing from an output is reduced (linear_reduced or unsplittable). INTERNAL
// naming the node otherwise (a rule that does not fit its node is a bug in the registry).
// Sizes are not compared: views legitimately give one label to dimensions of different sizes
// (tests check that all other rules give one label one size).
absl::Status ValidateShardingRule(const ShardingRule& rule, const CostContext& ctx);

// ---- helpers for op entries (ops_*.cc) ----

// Hands out labels not yet used by a rule: letters, then digits, then punctuation.
// `reserved` are labels the rule spells out itself ("kn" for linear).
class LabelPool {
 public:
  explicit LabelPool(const std::string& reserved = "");
  char Fresh();
  std::string Fresh(int n);
  // RESOURCE_EXHAUSTED when a rule needed more labels than there are.
  absl::Status status() const;

 private:
  std::string used_;
  size_t next_ = 0;
  bool exhausted_ = false;
};

// Labels for `shape` right-aligned against `target` (labelled `target_labels`): a dimension of
// the same size as the target's shares its label; any other (a broadcast size-1 dimension, or
// a leading dimension beyond the target's rank) gets a fresh label appended to `unsplittable`.
std::string AlignLabels(const Shape& shape, const Shape& target, const std::string& target_labels, LabelPool& pool,
                        std::string* unsplittable);

// Labels through a view from `in` to `out` (same number of elements). Dimensions are grouped
// into the smallest runs whose products match; in each group the outermost input dimension
// and the outermost output dimension share a label (splitting either in n parts is the same
// contiguous partition); every other dimension of the group, and every size-1 dimension, gets
// a fresh unsplittable label.
void ReshapeLabels(const Shape& in, const Shape& out, LabelPool& pool, std::string* in_labels, std::string* out_labels,
                   std::string* unsplittable);

// A rule with one empty label string per input and per output of the node.
ShardingRule EmptyRule(const CostContext& ctx);

// Elementwise ops: every present input is aligned to output 0 by broadcasting (AlignLabels);
// every output has output 0's labels.
ShardingFn BroadcastRule();
// Ops whose single output is a view of input 0 with another shape (view, reshape, flatten,
// squeeze, unsqueeze): ReshapeLabels from input 0 to output 0.
ShardingFn ReshapeRule();
// Input 0 and every output share labels except on input 0's `dims`, which are unsplittable
// (their elements move across the dimension: flip, cumsum, sort, pad, roll); an output whose
// dimension there differs in size (topk, pad) gets a fresh unsplittable label.
ShardingRule SameLabelsExcept(const CostContext& c, const std::vector<int>& dims, LabelPool& pool);
// Output 0 has input 0's labels (contiguous).
ShardingFn IdentityRule();
// Creation ops: every output dimension gets its own splittable label (each device makes its
// slice).
ShardingFn CreationRule();

}  // namespace mapd

#endif  // MAPD_MODEL_OPS_SHARDING_RULE_H_

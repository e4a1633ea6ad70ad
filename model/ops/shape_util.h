// Shape arithmetic shared by op entries: dims, broadcasting, promotion, reshape.
#ifndef MAPD_MODEL_OPS_SHAPE_UTIL_H_
#define MAPD_MODEL_OPS_SHAPE_UTIL_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "model/ir/tensor_type.h"
#include "model/ops/cost.h"
#include "model/ops/op_context.h"

namespace mapd {

// Maps a possibly negative dim into [0, rank); `rank_for_insert` allows dim == rank
// (unsqueeze, stack).
absl::StatusOr<int> NormalizeDim(const OpContext& ctx, int64_t dim, int rank,
                                 bool allow_end = false);
// A possibly negative dim wrapped into [0, rank) without checks (0 for a 0-d tensor): for
// cost, saved-tensor and sharding functions, which run on nodes that inference accepted.
int WrapDim(int64_t dim, int rank);
// Integer attribute `name` (default `def`) of the node as a dim of input 0, wrapped.
int AttrDim(const CostContext& c, const char* name, int64_t def);
// Normalises and checks for duplicates.
absl::StatusOr<std::vector<int>> NormalizeDims(const OpContext& ctx, const std::vector<int64_t>& dims,
                                               int rank);
// NumPy/PyTorch broadcasting of two shapes.
absl::StatusOr<Shape> BroadcastShapes(const OpContext& ctx, const Shape& a, const Shape& b);
// Result dtype of an arithmetic op on two tensors: a 0-d tensor does not raise the type of
// a dimensioned tensor of the same category (int vs float), as in PyTorch.
DType PromoteOperands(const TensorType& a, const TensorType& b);
// Type of a tensor combined with a Python scalar (int or float attribute).
DType PromoteWithScalar(DType tensor, bool scalar_is_float);
// Resolves one -1 in `target` so that it has `numel` elements; checks the count.
absl::StatusOr<Shape> ResolveReshape(const OpContext& ctx, const Shape& input, const Shape& target);
// Output size of a sliding window (conv, pooling) along one dimension.
absl::StatusOr<int64_t> WindowOutputSize(const OpContext& ctx, int64_t in, int64_t kernel,
                                         int64_t stride, int64_t pad, int64_t dilation,
                                         bool ceil_mode);
// Expands a 1- or 2-element list attribute to 2 values (kernel_size=3 → {3,3}).
absl::StatusOr<std::vector<int64_t>> Pair(const OpContext& ctx, const std::string& name,
                                          const std::vector<int64_t>& def);

absl::Status ExpectFloating(const OpContext& ctx, int input, const char* what);
absl::Status ExpectRank(const OpContext& ctx, int input, int min_rank, int max_rank, const char* what);

}  // namespace mapd

#endif  // MAPD_MODEL_OPS_SHAPE_UTIL_H_

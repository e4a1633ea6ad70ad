#include "model/ops/shape_util.h"

#include <algorithm>

#include "model/ir/dtype.h"

namespace mapd {

absl::StatusOr<int> NormalizeDim(const OpContext& ctx, int64_t dim, int rank, bool allow_end) {
  const int64_t hi = allow_end ? rank + 1 : rank;
  if (hi == 0) return ctx.Error("dimension ", dim, " given for a 0-d tensor");
  if (dim < -hi || dim >= hi) {
    return ctx.Error("dimension ", dim, " is out of range for a tensor of rank ", rank,
                     " (expected ", -hi, " to ", hi - 1, ")");
  }
  return static_cast<int>(dim < 0 ? dim + hi : dim);
}

int WrapDim(int64_t dim, int rank) {
  if (rank <= 0) return 0;
  return static_cast<int>((dim % rank + rank) % rank);
}

int AttrDim(const CostContext& c, const char* name, int64_t def) {
  auto v = c.op.Int(name, def);
  return v.ok() ? WrapDim(*v, c.op.input(0).rank()) : 0;
}

absl::StatusOr<std::vector<int>> NormalizeDims(const OpContext& ctx,
                                               const std::vector<int64_t>& dims, int rank) {
  std::vector<int> out;
  for (int64_t d : dims) {
    // A 0-d tensor accepts dim 0/-1 for reductions, as in PyTorch.
    if (rank == 0 && (d == 0 || d == -1)) continue;
    auto n = NormalizeDim(ctx, d, rank);
    if (!n.ok()) return n.status();
    if (std::find(out.begin(), out.end(), *n) != out.end()) {
      return ctx.Error("dimension ", d, " appears more than once");
    }
    out.push_back(*n);
  }
  return out;
}

absl::StatusOr<Shape> BroadcastShapes(const OpContext& ctx, const Shape& a, const Shape& b) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) {
      return ctx.Error("shapes ", ShapeToString(a), " and ", ShapeToString(b),
                       " do not broadcast (dimension ", i, ": ", da, " vs ", db, ")");
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

namespace {
int Category(DType d) { return IsFloating(d) ? 2 : (IsIntegral(d) ? 1 : 0); }
}  // namespace

DType PromoteOperands(const TensorType& a, const TensorType& b) {
  const bool a0 = a.rank() == 0, b0 = b.rank() == 0;
  if (a0 != b0) {
    const TensorType& dim = a0 ? b : a;
    const TensorType& zero = a0 ? a : b;
    if (Category(zero.dtype) <= Category(dim.dtype)) return dim.dtype;
    // A float 0-d tensor with an int tensor gives the default float type.
    if (Category(zero.dtype) == 2) return v1::FLOAT32;
    return zero.dtype;
  }
  return PromoteDTypes(a.dtype, b.dtype);
}

DType PromoteWithScalar(DType tensor, bool scalar_is_float) {
  if (scalar_is_float && !IsFloating(tensor)) return v1::FLOAT32;
  if (!scalar_is_float && tensor == v1::BOOL) return v1::INT64;
  return tensor;
}

absl::StatusOr<Shape> ResolveReshape(const OpContext& ctx, const Shape& input, const Shape& target) {
  const int64_t numel = NumElements(input);
  Shape out = target;
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      if (infer >= 0) return ctx.Error("shape ", ShapeToString(target), " has more than one -1");
      infer = static_cast<int>(i);
    } else if (out[i] < 0) {
      return ctx.Error("shape ", ShapeToString(target), " has a negative dimension");
    } else if (__builtin_mul_overflow(known, out[i], &known)) {
      // A client's graph may ask for any shape: its product must not overflow (found by fuzz_job_spec).
      return ctx.Error("shape ", ShapeToString(target), " has more elements than an int64 counts");
    }
  }
  if (infer >= 0) {
    if (known == 0 || numel % known != 0) {
      return ctx.Error("cannot reshape ", ShapeToString(input), " (", numel, " elements) to ",
                       ShapeToString(target));
    }
    out[infer] = numel / known;
  } else if (known != numel) {
    return ctx.Error("cannot reshape ", ShapeToString(input), " (", numel, " elements) to ",
                     ShapeToString(target), " (", known, " elements)");
  }
  return out;
}

absl::StatusOr<int64_t> WindowOutputSize(const OpContext& ctx, int64_t in, int64_t kernel,
                                         int64_t stride, int64_t pad, int64_t dilation,
                                         bool ceil_mode) {
  if (kernel <= 0 || stride <= 0 || dilation <= 0 || pad < 0) {
    return ctx.Error("kernel, stride and dilation must be positive and padding non-negative (kernel=",
                     kernel, ", stride=", stride, ", padding=", pad, ", dilation=", dilation, ")");
  }
  const int64_t span = dilation * (kernel - 1) + 1;
  const int64_t avail = in + 2 * pad - span;
  if (avail < 0) {
    return ctx.Error("window of size ", span, " does not fit an input of size ", in,
                     " with padding ", pad);
  }
  int64_t out = (ceil_mode ? (avail + stride - 1) / stride : avail / stride) + 1;
  // With ceil_mode the last window must start inside the input or the left padding.
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

absl::StatusOr<std::vector<int64_t>> Pair(const OpContext& ctx, const std::string& name,
                                          const std::vector<int64_t>& def) {
  auto v = ctx.Ints(name, def);
  if (!v.ok()) return v.status();
  if (v->size() == 1) return std::vector<int64_t>{(*v)[0], (*v)[0]};
  if (v->size() != 2) return ctx.Error("attribute '", name, "' must have 1 or 2 values, got ", v->size());
  return *v;
}

absl::Status ExpectFloating(const OpContext& ctx, int input, const char* what) {
  if (!IsFloating(ctx.input(input).dtype)) {
    return ctx.Error(what, " must be a floating-point tensor, got ", ctx.input(input).ToString());
  }
  return absl::OkStatus();
}

absl::Status ExpectRank(const OpContext& ctx, int input, int min_rank, int max_rank,
                        const char* what) {
  const int r = ctx.input(input).rank();
  if (r < min_rank || r > max_rank) {
    if (min_rank == max_rank) {
      return ctx.Error(what, " must have rank ", min_rank, ", got ", ctx.input(input).ToString());
    }
    return ctx.Error(what, " must have rank ", min_rank, " to ", max_rank, ", got ",
                     ctx.input(input).ToString());
  }
  return absl::OkStatus();
}

}  // namespace mapd

// Small helpers shared by the runtime's LibTorch code: IR dtype <-> ATen scalar type, type
// checks of tensors against IR types, and LibTorch exception text. Header-only.
#ifndef MAPD_WORKER_RUNTIME_TORCH_TYPES_H_
#define MAPD_WORKER_RUNTIME_TORCH_TYPES_H_

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <cstdint>
#include <exception>
#include <string>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/import/torch_dtype.h"
#include "model/ir/dtype.h"
#include "model/ir/tensor_type.h"

namespace mapd {

// Tensors by value name (graph inputs, parameters, node outputs).
using TensorMap = std::unordered_map<std::string, at::Tensor>;

// "f32[2,3]" of a tensor, in the IR's notation.
inline std::string DescribeTensor(const at::Tensor& t) {
  if (!t.defined()) return "(undefined)";
  const DType d = FromScalarType(t.scalar_type());
  const std::string dtype = d == v1::DTYPE_UNSPECIFIED ? std::string(c10::toString(t.scalar_type()))
                                                       : std::string(DTypeShortName(d));
  return absl::StrCat(dtype, "[", absl::StrJoin(t.sizes(), ","), "]");
}

// A bf16 or f16 tensor (model/ir/dtype.h's Is16BitFloat).
inline bool Is16BitFloat(const at::Tensor& t) { return Is16BitFloat(FromScalarType(t.scalar_type())); }

inline bool MatchesType(const at::Tensor& t, const TensorType& type) {
  if (!t.defined() || FromScalarType(t.scalar_type()) != type.dtype) return false;
  if (t.dim() != type.rank()) return false;
  for (int i = 0; i < type.rank(); ++i) {
    if (t.size(i) != type.shape[i]) return false;
  }
  return true;
}

// The message of a LibTorch exception without its C++ backtrace.
inline std::string ExceptionText(const std::exception& e) {
  if (const auto* c10e = dynamic_cast<const c10::Error*>(&e)) return c10e->what_without_backtrace();
  return e.what();
}

// A LibTorch exception as a status with `context` in front: RESOURCE_EXHAUSTED for
// c10::OutOfMemoryError (a device's, or the counting allocator's cap), `otherwise` for the rest.
inline absl::Status TorchError(absl::StatusCode otherwise, const std::string& context, const std::exception& e) {
  const bool oom = dynamic_cast<const c10::OutOfMemoryError*>(&e) != nullptr;
  std::string text = ExceptionText(e);
  if (text.size() > 600) text = text.substr(0, 600) + "...";
  return absl::Status(oom ? absl::StatusCode::kResourceExhausted : otherwise, absl::StrCat(context, ": ", text));
}

// Runs fn (which may throw LibTorch exceptions) and turns an exception into INTERNAL (or
// RESOURCE_EXHAUSTED when out of memory) with `context` in front.
template <typename Fn>
absl::Status CatchTorch(const std::string& context, Fn&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return TorchError(absl::StatusCode::kInternal, context, e);
  }
  return absl::OkStatus();
}

}  // namespace mapd

#endif  // MAPD_WORKER_RUNTIME_TORCH_TYPES_H_

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
#include "planner/ir/dtype.h"
#include "planner/ir/tensor_type.h"

namespace mapd {

// Tensors by value name (graph inputs, parameters, node outputs).
using TensorMap = std::unordered_map<std::string, at::Tensor>;

inline c10::ScalarType ToScalarType(DType d) {
  switch (d) {
    case v1::FLOAT16: return c10::ScalarType::Half;
    case v1::BFLOAT16: return c10::ScalarType::BFloat16;
    case v1::FLOAT64: return c10::ScalarType::Double;
    case v1::INT64: return c10::ScalarType::Long;
    case v1::INT32: return c10::ScalarType::Int;
    case v1::INT16: return c10::ScalarType::Short;
    case v1::INT8: return c10::ScalarType::Char;
    case v1::UINT8: return c10::ScalarType::Byte;
    case v1::BOOL: return c10::ScalarType::Bool;
    default: return c10::ScalarType::Float;
  }
}

// DTYPE_UNSPECIFIED for types MAP does not have (complex, quantized, ...).
inline DType FromScalarType(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Float: return v1::FLOAT32;
    case c10::ScalarType::Half: return v1::FLOAT16;
    case c10::ScalarType::BFloat16: return v1::BFLOAT16;
    case c10::ScalarType::Double: return v1::FLOAT64;
    case c10::ScalarType::Long: return v1::INT64;
    case c10::ScalarType::Int: return v1::INT32;
    case c10::ScalarType::Short: return v1::INT16;
    case c10::ScalarType::Char: return v1::INT8;
    case c10::ScalarType::Byte: return v1::UINT8;
    case c10::ScalarType::Bool: return v1::BOOL;
    default: return v1::DTYPE_UNSPECIFIED;
  }
}

// "f32[2,3]" of a tensor, in the IR's notation.
inline std::string DescribeTensor(const at::Tensor& t) {
  if (!t.defined()) return "(undefined)";
  const DType d = FromScalarType(t.scalar_type());
  const std::string dtype = d == v1::DTYPE_UNSPECIFIED ? std::string(c10::toString(t.scalar_type()))
                                                       : std::string(DTypeShortName(d));
  return absl::StrCat(dtype, "[", absl::StrJoin(t.sizes(), ","), "]");
}

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

// Runs fn (which may throw LibTorch exceptions) and turns an exception into INTERNAL with
// `context` in front.
template <typename Fn>
absl::Status CatchTorch(const std::string& context, Fn&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(context, ": ", ExceptionText(e)));
  }
  return absl::OkStatus();
}

}  // namespace mapd

#endif  // MAPD_WORKER_RUNTIME_TORCH_TYPES_H_

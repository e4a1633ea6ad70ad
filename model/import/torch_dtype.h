// DType <-> LibTorch scalar type, shared by the importer and the runtime (header-only; include
// it only from LibTorch-including translation units).
#ifndef MAPD_MODEL_IMPORT_TORCH_DTYPE_H_
#define MAPD_MODEL_IMPORT_TORCH_DTYPE_H_

#include <c10/core/ScalarType.h>

#include "model/ir/dtype.h"

namespace mapd {

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

}  // namespace mapd

#endif  // MAPD_MODEL_IMPORT_TORCH_DTYPE_H_

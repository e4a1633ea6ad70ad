// Element types: names, sizes and promotion rules.
#ifndef MAPD_MODEL_IR_DTYPE_H_
#define MAPD_MODEL_IR_DTYPE_H_

#include <cstdint>
#include <string>


#include "absl/status/statusor.h"
#include "proto/mapd/v1/graph.pb.h"

namespace mapd {

using DType = v1::DType;

// Short name used in dumps and input specs: "f32", "bf16", "i64", "bool", ...
const char* DTypeShortName(DType dtype);
// Parses a short name ("f32") or a long one ("float32", "float", "int64", "long", "bfloat16").
absl::StatusOr<DType> ParseDType(const std::string& text);
// Bytes per element (bool and uint8 are 1).
int64_t DTypeSize(DType dtype);
bool IsFloating(DType dtype);
bool Is16BitFloat(DType dtype);  // bf16, f16
bool IsIntegral(DType dtype);  // integer types, not bool
// Type of `a op b` for two tensors of the given types (PyTorch's promotion, without the
// 0-d special case, which PromoteTypes in shape_util handles).
DType PromoteDTypes(DType a, DType b);

}  // namespace mapd

#endif  // MAPD_MODEL_IR_DTYPE_H_

#include "model/ir/dtype.h"

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace mapd {

const char* DTypeShortName(DType dtype) {
  switch (dtype) {
    case v1::FLOAT32: return "f32";
    case v1::FLOAT16: return "f16";
    case v1::BFLOAT16: return "bf16";
    case v1::FLOAT64: return "f64";
    case v1::INT64: return "i64";
    case v1::INT32: return "i32";
    case v1::INT16: return "i16";
    case v1::INT8: return "i8";
    case v1::UINT8: return "u8";
    case v1::BOOL: return "bool";
    default: return "unspecified";
  }
}

absl::StatusOr<DType> ParseDType(const std::string& text) {
  const std::string t = absl::AsciiStrToLower(text);
  if (t == "f32" || t == "float32" || t == "float") return v1::FLOAT32;
  if (t == "f16" || t == "float16" || t == "half") return v1::FLOAT16;
  if (t == "bf16" || t == "bfloat16") return v1::BFLOAT16;
  if (t == "f64" || t == "float64" || t == "double") return v1::FLOAT64;
  if (t == "i64" || t == "int64" || t == "long") return v1::INT64;
  if (t == "i32" || t == "int32" || t == "int") return v1::INT32;
  if (t == "i16" || t == "int16" || t == "short") return v1::INT16;
  if (t == "i8" || t == "int8") return v1::INT8;
  if (t == "u8" || t == "uint8") return v1::UINT8;
  if (t == "bool") return v1::BOOL;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown dtype '", text,
      "': use one of f32, f16, bf16, f64, i64, i32, i16, i8, u8, bool (or float32, int64, ...)"));
}

int64_t DTypeSize(DType dtype) {
  switch (dtype) {
    case v1::FLOAT64:
    case v1::INT64: return 8;
    case v1::FLOAT32:
    case v1::INT32: return 4;
    case v1::FLOAT16:
    case v1::BFLOAT16:
    case v1::INT16: return 2;
    case v1::INT8:
    case v1::UINT8:
    case v1::BOOL: return 1;
    default: return 0;
  }
}

bool IsFloating(DType d) {
  return d == v1::FLOAT32 || d == v1::FLOAT16 || d == v1::BFLOAT16 || d == v1::FLOAT64;
}

bool Is16BitFloat(DType d) { return d == v1::FLOAT16 || d == v1::BFLOAT16; }

bool IsIntegral(DType d) {
  return d == v1::INT64 || d == v1::INT32 || d == v1::INT16 || d == v1::INT8 || d == v1::UINT8;
}

namespace {
// Rank inside a category: higher wins.
int FloatRank(DType d) {
  switch (d) {
    case v1::FLOAT16: return 1;
    case v1::BFLOAT16: return 1;
    case v1::FLOAT32: return 2;
    case v1::FLOAT64: return 3;
    default: return 0;
  }
}
int IntRank(DType d) {
  switch (d) {
    case v1::UINT8: return 1;
    case v1::INT8: return 1;
    case v1::INT16: return 2;
    case v1::INT32: return 3;
    case v1::INT64: return 4;
    default: return 0;
  }
}
}  // namespace

DType PromoteDTypes(DType a, DType b) {
  if (a == b) return a;
  if (IsFloating(a) || IsFloating(b)) {
    if (!IsFloating(a)) return b;
    if (!IsFloating(b)) return a;
    // f16 with bf16 promotes to f32, as in PyTorch.
    if (FloatRank(a) == FloatRank(b)) return v1::FLOAT32;
    return FloatRank(a) > FloatRank(b) ? a : b;
  }
  if (IsIntegral(a) || IsIntegral(b)) {
    if (!IsIntegral(a)) return b;
    if (!IsIntegral(b)) return a;
    if (IntRank(a) == IntRank(b)) return v1::INT16;  // u8 with i8
    return IntRank(a) > IntRank(b) ? a : b;
  }
  return a;
}

}  // namespace mapd

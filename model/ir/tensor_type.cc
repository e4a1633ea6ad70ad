#include "model/ir/tensor_type.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace mapd {

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeToString(const Shape& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

int64_t TensorType::NumElements() const { return mapd::NumElements(shape); }

std::string TensorType::ToString() const {
  return absl::StrCat(DTypeShortName(dtype), ShapeToString(shape));
}

v1::TensorType TensorType::ToProto() const {
  v1::TensorType p;
  p.set_dtype(dtype);
  for (int64_t d : shape) p.add_shape(d);
  return p;
}

TensorType TensorType::FromProto(const v1::TensorType& p) {
  TensorType t;
  t.dtype = p.dtype();
  t.shape.assign(p.shape().begin(), p.shape().end());
  return t;
}

}  // namespace mapd

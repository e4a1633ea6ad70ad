// TensorType: dtype plus static shape, the type of every value in the IR.
#ifndef MAPD_MODEL_IR_TENSOR_TYPE_H_
#define MAPD_MODEL_IR_TENSOR_TYPE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "model/ir/dtype.h"
#include "proto/mapd/v1/graph.pb.h"

namespace mapd {

using Shape = std::vector<int64_t>;

struct TensorType {
  DType dtype = v1::DTYPE_UNSPECIFIED;
  Shape shape;

  int rank() const { return static_cast<int>(shape.size()); }
  int64_t NumElements() const;
  int64_t NumBytes() const { return NumElements() * DTypeSize(dtype); }
  bool operator==(const TensorType& o) const { return dtype == o.dtype && shape == o.shape; }
  bool operator!=(const TensorType& o) const { return !(*this == o); }

  // "f32[2,3]"; a scalar is "f32[]".
  std::string ToString() const;
  v1::TensorType ToProto() const;
  static TensorType FromProto(const v1::TensorType& p);
};

// "[2,3]".
std::string ShapeToString(const Shape& shape);
int64_t NumElements(const Shape& shape);

}  // namespace mapd

#endif  // MAPD_MODEL_IR_TENSOR_TYPE_H_

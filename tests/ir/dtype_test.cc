#include "model/ir/dtype.h"

#include <gtest/gtest.h>

#include "model/ir/tensor_type.h"

namespace mapd {
namespace {

TEST(DType, ParsesShortAndLongNames) {
  EXPECT_EQ(*ParseDType("f32"), v1::FLOAT32);
  EXPECT_EQ(*ParseDType("float32"), v1::FLOAT32);
  EXPECT_EQ(*ParseDType("Int64"), v1::INT64);
  EXPECT_EQ(*ParseDType("bf16"), v1::BFLOAT16);
  EXPECT_EQ(*ParseDType("bool"), v1::BOOL);
  auto bad = ParseDType("f33");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("f33"), std::string::npos);
}

TEST(DType, SizesAndPromotion) {
  EXPECT_EQ(DTypeSize(v1::FLOAT32), 4);
  EXPECT_EQ(DTypeSize(v1::BFLOAT16), 2);
  EXPECT_EQ(DTypeSize(v1::BOOL), 1);
  EXPECT_EQ(PromoteDTypes(v1::INT64, v1::FLOAT16), v1::FLOAT16);
  EXPECT_EQ(PromoteDTypes(v1::FLOAT16, v1::BFLOAT16), v1::FLOAT32);
  EXPECT_EQ(PromoteDTypes(v1::INT32, v1::INT64), v1::INT64);
  EXPECT_EQ(PromoteDTypes(v1::BOOL, v1::INT8), v1::INT8);
}

TEST(TensorType, StringsAndBytes) {
  TensorType t{v1::FLOAT32, {2, 3}};
  EXPECT_EQ(t.ToString(), "f32[2,3]");
  EXPECT_EQ(t.NumBytes(), 24);
  EXPECT_EQ(TensorType::FromProto(t.ToProto()), t);
  EXPECT_EQ((TensorType{v1::INT64, {}}).ToString(), "i64[]");
}

}  // namespace
}  // namespace mapd

#include "model/import/input_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace mapd {
namespace {

using ::testing::HasSubstr;

TEST(InputSpec, Parses) {
  auto s = ParseInputSpec("idx:i64[8,1024]");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->name, "idx");
  EXPECT_EQ(s->type.ToString(), "i64[8,1024]");
  EXPECT_EQ(s->ToString(), "idx:i64[8,1024]");
  EXPECT_EQ(ParseInputSpec("x:float32[2, 3, 32, 32]")->type.ToString(), "f32[2,3,32,32]");
  EXPECT_EQ(ParseInputSpec("t:f32[]")->type.rank(), 0);
}

TEST(InputSpec, RejectsBadSpecs) {
  for (const char* bad : {"idx", "idx:i64", ":i64[2]", "idx:i65[2]", "idx:i64[2,x]", "idx:i64[-1]", "idx:i64[2"}) {
    auto s = ParseInputSpec(bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.status().message()), HasSubstr(std::string("'") + bad + "'"));
  }
}

TEST(InputSpec, AnIntegerInputTakesAValueRange) {
  auto s = ParseInputSpec("t:i64[8]:0..999");
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE(s->range.has_value());
  EXPECT_EQ(s->range->first, 0);
  EXPECT_EQ(s->range->second, 999);
  EXPECT_EQ(s->ToString(), "t:i64[8]:0..999");
  EXPECT_EQ(ParseInputSpec("d:i32[2,3]:-5..5")->range->first, -5);
  EXPECT_THAT(std::string(ParseInputSpec("x:f32[8]:0..1").status().message()), HasSubstr("for integer inputs"));
  EXPECT_THAT(std::string(ParseInputSpec("t:i64[8]:9..1").status().message()), HasSubstr("is empty"));
  EXPECT_THAT(std::string(ParseInputSpec("t:i64[8]:0-9").status().message()), HasSubstr("not a value range :LOW..HIGH"));
  auto json = ParseInputSpecsJson(R"({"inputs": [{"name": "t", "dtype": "int64", "shape": [8], "range": [1, 7]}]})");
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ((*json)[0].ToString(), "t:i64[8]:1..7");
  EXPECT_EQ((*ParseInputSpecsJson(InputSpecsToJson(*json)))[0].ToString(), "t:i64[8]:1..7");
  EXPECT_THAT(std::string(ParseInputSpecsJson(R"({"inputs": [{"name": "t", "dtype": "int64", "shape": [8], "range": [1]}]})")
                              .status()
                              .message()),
              HasSubstr("must be [low, high]"));
}

TEST(InputSpec, Json) {
  auto specs = ParseInputSpecsJson(R"({"inputs": [{"name": "x", "dtype": "float32", "shape": [4, 8]}]})");
  ASSERT_TRUE(specs.ok()) << specs.status();
  ASSERT_EQ(specs->size(), 1u);
  EXPECT_EQ((*specs)[0].ToString(), "x:f32[4,8]");
  auto back = ParseInputSpecsJson(InputSpecsToJson(*specs));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ((*back)[0].ToString(), "x:f32[4,8]");
  EXPECT_THAT(std::string(ParseInputSpecsJson("{").status().message()), HasSubstr("not valid JSON"));
  EXPECT_THAT(std::string(ParseInputSpecsJson(R"({"inputs": [{"name": "x"}]})").status().message()),
              HasSubstr("needs string name"));
  EXPECT_THAT(std::string(ParseInputSpecsJson(R"({"inputs": [{"name": "x", "dtype": "f32", "shape": [-2]}]})")
                              .status()
                              .message()),
              HasSubstr("bad dimension -2"));
}

}  // namespace
}  // namespace mapd

// Shape/dtype inference and validation of contraction, norm, elementwise, reduction,
// creation, conv and loss ops.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/ops/op_test_util.h"

namespace mapd {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using namespace mapd::testing;

TEST(Registry, HasEveryRequiredOp) {
  const char* required[] = {
      "linear", "matmul", "bmm", "addmm", "baddbmm", "embedding", "layer_norm", "rms_norm", "softmax",
      "log_softmax", "cross_entropy", "nll_loss", "mse_loss", "gelu", "silu", "relu", "tanh", "sigmoid",
      "dropout", "add", "sub", "mul", "div", "neg", "pow", "rsqrt", "sqrt", "exp", "log", "mean", "sum",
      "amax", "masked_fill", "where", "triu", "tril", "eq", "ne", "lt", "gt", "view", "reshape", "flatten",
      "transpose", "permute", "contiguous", "unsqueeze", "squeeze", "expand", "repeat_interleave", "slice",
      "select", "split", "chunk", "cat", "stack", "arange", "zeros", "ones", "full", "to", "type_as",
      "conv2d", "batch_norm", "batch_norm_stats", "batch_norm_apply", "batch_norm_running_stats", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d",
      "scaled_dot_product_attention"};
  for (const char* op : required) EXPECT_NE(OpRegistry::Global().Find(op), nullptr) << op;
}

TEST(Registry, UnknownOpAndAttributeErrorsNameTheNode) {
  auto r = Infer("frobnicate", {F32({2})});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("unknown op 'frobnicate'"));
  EXPECT_THAT(Out("softmax", {F32({2, 3})}, Attrs().Int("dim", 1).Int("dimm", 0)),
              HasSubstr("node 'n' (softmax): unknown attribute 'dimm' (known: dim, dtype)"));
  EXPECT_THAT(Out("softmax", {F32({2, 3})}), HasSubstr("missing required attribute 'dim'"));
  EXPECT_THAT(Out("softmax", {F32({2, 3})}, Attrs().Str("dim", "x")), HasSubstr("attribute 'dim' must be of kind int"));
  EXPECT_THAT(Out("relu", {}), HasSubstr("takes inputs (x), got 0 input(s)"));
  EXPECT_THAT(Out("relu", {F32({2}), F32({2})}), HasSubstr("got 2 input(s)"));
}

TEST(Contractions, Linear) {
  EXPECT_EQ(Out("linear", {F32({4, 16, 8}), F32({32, 8}), F32({32})}), "f32[4,16,32]");
  EXPECT_EQ(Out("linear", {F32({4, 8}), F32({32, 8})}), "f32[4,32]");
  EXPECT_EQ(Out("linear", {F32({4, 8}), F32({32, 8}), std::nullopt}), "f32[4,32]");
  EXPECT_THAT(Out("linear", {F32({4, 7}), F32({32, 8})}), HasSubstr("has 7 features but weight f32[32,8] expects 8"));
  EXPECT_THAT(Out("linear", {F32({4, 8}), F32({32, 8}), F32({31})}), HasSubstr("bias f32[31]"));
  EXPECT_THAT(Out("linear", {I64({4, 8}), F32({32, 8})}), HasSubstr("floating-point"));
}

TEST(Contractions, MatmulFamily) {
  EXPECT_EQ(Out("matmul", {F32({2, 4, 3, 5}), F32({5, 6})}), "f32[2,4,3,6]");
  EXPECT_EQ(Out("matmul", {F32({2, 1, 3, 5}), F32({4, 5, 6})}), "f32[2,4,3,6]");
  EXPECT_EQ(Out("matmul", {F32({5}), F32({5})}), "f32[]");
  EXPECT_EQ(Out("matmul", {F32({3, 5}), F32({5})}), "f32[3]");
  EXPECT_THAT(Out("matmul", {F32({3, 5}), F32({4, 6})}), HasSubstr("inner dimensions differ"));
  EXPECT_EQ(Out("bmm", {F32({2, 3, 4}), F32({2, 4, 5})}), "f32[2,3,5]");
  EXPECT_THAT(Out("bmm", {F32({2, 3, 4}), F32({3, 4, 5})}), HasSubstr("do not multiply"));
  EXPECT_EQ(Out("addmm", {F32({5}), F32({3, 4}), F32({4, 5})}, Attrs().Float("beta", 1).Float("alpha", 1)), "f32[3,5]");
  EXPECT_EQ(Out("baddbmm", {F32({2, 3, 5}), F32({2, 3, 4}), F32({2, 4, 5})}), "f32[2,3,5]");
  EXPECT_THAT(Out("addmm", {F32({6}), F32({3, 4}), F32({4, 5})}), HasSubstr("do not broadcast"));
}

TEST(Contractions, EmbeddingAndAttention) {
  EXPECT_EQ(Out("embedding", {I64({2, 16}), F32({100, 32})}), "f32[2,16,32]");
  EXPECT_THAT(Out("embedding", {F32({2, 16}), F32({100, 32})}), HasSubstr("indices must be an integer tensor"));
  EXPECT_THAT(Out("embedding", {I64({2}), F32({100, 32})}, Attrs().Int("padding_idx", 100)), HasSubstr("padding_idx 100"));
  // Grouped-query attention: 8 query heads share 2 key/value heads.
  EXPECT_EQ(Out("scaled_dot_product_attention", {F32({2, 8, 16, 64}), F32({2, 2, 16, 64}), F32({2, 2, 16, 32})},
                Attrs().Bool("is_causal", true)),
            "f32[2,8,16,32]");
  EXPECT_THAT(Out("scaled_dot_product_attention", {F32({2, 8, 16, 64}), F32({2, 3, 16, 64}), F32({2, 3, 16, 64})}),
              HasSubstr("multiple of key/value heads"));
  EXPECT_EQ(Out("scaled_dot_product_attention",
                {F32({2, 4, 16, 8}), F32({2, 4, 16, 8}), F32({2, 4, 16, 8}), Bool({16, 16})}),
            "f32[2,4,16,8]");
  EXPECT_THAT(Out("scaled_dot_product_attention",
                  {F32({2, 4, 16, 8}), F32({2, 4, 16, 8}), F32({2, 4, 16, 8}), Bool({16, 16})},
                  Attrs().Bool("is_causal", true)),
              HasSubstr("not both"));
}

// aten::embedding: -1 means "no padding row"; other negatives are not rows (F.embedding turns
// -2 into rows-2 before calling aten).
TEST(Contractions, EmbeddingPaddingIdx) {
  EXPECT_EQ(Out("embedding", {I64({2}), F32({100, 32})}, Attrs().Int("padding_idx", -1)), "f32[2,32]");
  EXPECT_EQ(Out("embedding", {I64({2}), F32({100, 32})}, Attrs().Int("padding_idx", 0)), "f32[2,32]");
  EXPECT_EQ(Out("embedding", {I64({2}), F32({100, 32})}, Attrs().Int("padding_idx", 99)), "f32[2,32]");
  EXPECT_EQ(Out("embedding", {I64({2}), F32({100, 32})}, Attrs().Int("padding_idx", -2)),
            "error: node 'n' (embedding): padding_idx -2 must be -1 (none) or a row in [0, 100)");
  EXPECT_THAT(Out("embedding", {I64({2}), F32({100, 32})}, Attrs().Int("padding_idx", -100)), HasSubstr("padding_idx -100"));
  EXPECT_THAT(Out("embedding", {I64({2}), F32({100, 32})}, Attrs().Int("padding_idx", 100)),
              HasSubstr("padding_idx 100 must be -1 (none) or a row in [0, 100)"));
}

TEST(Norms, LayerRmsBatchSoftmax) {
  EXPECT_EQ(Out("layer_norm", {F32({2, 16, 32}), F32({32}), F32({32})}, Attrs().Ints("normalized_shape", {32})),
            "f32[2,16,32]");
  EXPECT_THAT(Out("layer_norm", {F32({2, 16, 32}), F32({16})}, Attrs().Ints("normalized_shape", {32})),
              HasSubstr("weight f32[16] must have shape normalized_shape [32]"));
  EXPECT_THAT(Out("layer_norm", {F32({2, 16, 32})}, Attrs().Ints("normalized_shape", {16})),
              HasSubstr("does not end in normalized_shape"));
  EXPECT_EQ(Out("rms_norm", {F32({2, 16, 32}), F32({32})}, Attrs().Ints("normalized_shape", {32}).Float("eps", 1e-6)),
            "f32[2,16,32]");
  // Training mode defines the new running statistics too.
  EXPECT_EQ(Out("batch_norm", {F32({4, 8, 5, 5}), F32({8}), F32({8}), F32({8}), F32({8})}, Attrs().Bool("training", true)),
            "f32[4,8,5,5] f32[8] f32[8]");
  EXPECT_EQ(Out("batch_norm", {F32({4, 8, 5, 5}), F32({8}), F32({8}), F32({8}), F32({8})}, Attrs().Bool("training", false)),
            "f32[4,8,5,5]");
  EXPECT_THAT(Out("batch_norm", {F32({4, 8, 5, 5}), F32({7})}, Attrs().Bool("training", true)),
              HasSubstr("weight f32[7] must have shape [8]"));
  EXPECT_THAT(Out("batch_norm", {F32({1, 8})}, Attrs().Bool("training", true)), HasSubstr("more than one value per channel"));
  // Synchronised batch norm: f64 per-channel sums, then the normalisation by `count` values.
  const TensorType stats{v1::FLOAT64, {2, 8}};
  EXPECT_EQ(Out("batch_norm_stats", {F32({4, 8, 5, 5})}, {}), "f64[2,8]");
  EXPECT_EQ(Out("batch_norm_apply", {F32({4, 8, 5, 5}), stats, F32({8}), F32({8})}, Attrs().Int("count", 100)),
            "f32[4,8,5,5]");
  EXPECT_EQ(Out("batch_norm_apply", {F32({4, 8}), stats}, Attrs().Int("count", 4)), "f32[4,8]");
  EXPECT_THAT(Out("batch_norm_apply", {F32({4, 8, 5, 5}), stats}, Attrs().Int("count", 4)),
              HasSubstr("count 4 must be the values per channel of input f32[4,8,5,5] (100)"));
  EXPECT_THAT(Out("batch_norm_apply", {F32({4, 8}), F32({2, 8})}, Attrs().Int("count", 4)), HasSubstr("must be f64[2, 8]"));
  EXPECT_THAT(Out("batch_norm_apply", {F32({1, 8}), stats}, Attrs().Int("count", 1)), HasSubstr("more than one value per channel"));
  EXPECT_THAT(Out("batch_norm_apply", {F32({4, 8}), stats, F32({7})}, Attrs().Int("count", 4)),
              HasSubstr("weight f32[7] must have shape [8]"));
  EXPECT_EQ(Out("batch_norm_running_stats", {stats, F32({8}), F32({8})}, Attrs().Int("count", 4).Float("momentum", 0.1)),
            "f32[8] f32[8]");
  EXPECT_THAT(Out("batch_norm_running_stats", {stats, F32({8}), F32({7})}, Attrs().Int("count", 4)),
              HasSubstr("running_var f32[7] must have shape [8]"));
  // Over groups of samples: [groups, 2, C] sums, each group normalised by its own count.
  const TensorType grouped{v1::FLOAT64, {2, 2, 8}};
  EXPECT_EQ(Out("batch_norm_stats", {F32({4, 8, 5, 5})}, Attrs().Int("group_size", 2)), "f64[2,2,8]");
  EXPECT_THAT(Out("batch_norm_stats", {F32({4, 8, 5, 5})}, Attrs().Int("group_size", 3)),
              HasSubstr("group_size 3 must divide the batch of input f32[4,8,5,5]"));
  EXPECT_EQ(Out("batch_norm_apply", {F32({4, 8, 5, 5}), grouped}, Attrs().Int("count", 50)), "f32[4,8,5,5]");
  EXPECT_THAT(Out("batch_norm_apply", {F32({4, 8, 5, 5}), grouped}, Attrs().Int("count", 100)),
              HasSubstr("count 100 must be the values per channel of a group of input f32[4,8,5,5] (50)"));
  EXPECT_THAT(Out("batch_norm_apply", {F32({3, 8}), grouped}, Attrs().Int("count", 2)), HasSubstr("2 groups, which must divide"));
  EXPECT_EQ(Out("batch_norm_running_stats", {grouped, F32({8}), F32({8})}, Attrs().Int("count", 100)), "f32[8] f32[8]");
  EXPECT_EQ(Out("softmax", {F32({2, 3})}, Attrs().Int("dim", -1)), "f32[2,3]");
  EXPECT_EQ(Out("log_softmax", {F32({2, 3})}, Attrs().Int("dim", 1).Str("dtype", "f64")), "f64[2,3]");
  EXPECT_THAT(Out("softmax", {F32({2, 3})}, Attrs().Int("dim", 2)), HasSubstr("dimension 2 is out of range"));
}

TEST(Elementwise, UnaryAndBinary) {
  for (const char* op : {"silu", "relu", "tanh", "sigmoid", "neg", "rsqrt", "sqrt", "exp", "log"}) {
    EXPECT_EQ(Out(op, {F32({2, 3})}), "f32[2,3]") << op;
  }
  EXPECT_EQ(Out("gelu", {F32({2})}, Attrs().Str("approximate", "tanh")), "f32[2]");
  EXPECT_THAT(Out("gelu", {F32({2})}, Attrs().Str("approximate", "fast")), HasSubstr("'none' or 'tanh'"));
  EXPECT_EQ(Out("dropout", {F32({2})}, Attrs().Float("p", 0.1).Bool("train", true)), "f32[2]");
  EXPECT_THAT(Out("dropout", {F32({2})}, Attrs().Float("p", 1.5)), HasSubstr("p must be in [0, 1]"));
  EXPECT_EQ(Out("add", {F32({4, 1, 3}), F32({5, 1})}), "f32[4,5,3]");
  EXPECT_THAT(Out("add", {F32({4, 3}), F32({5})}), HasSubstr("do not broadcast"));
  EXPECT_EQ(Out("mul", {I64({4})}, Attrs().Float("scalar", 0.5)), "f32[4]");
  EXPECT_EQ(Out("sub", {I64({4})}, Attrs().Int("scalar", 1)), "i64[4]");
  EXPECT_EQ(Out("div", {I64({4}), I64({4})}), "f32[4]");
  EXPECT_EQ(Out("div", {I64({4}), I64({4})}, Attrs().Str("rounding_mode", "floor")), "i64[4]");
  EXPECT_EQ(Out("pow", {F32({4})}, Attrs().Float("scalar", 2)), "f32[4]");
  EXPECT_EQ(Out("add", {TensorType{v1::BFLOAT16, {4}}, F32({})}), "bf16[4]");  // 0-d does not promote
  EXPECT_THAT(Out("add", {F32({4})}), HasSubstr("needs a second input or attribute 'scalar'"));
  EXPECT_EQ(Out("abs", {I64({3})}), "i64[3]");
}

// Bool operands follow PyTorch 1.13 (checked with torch): add and mul keep bool, sub with any
// bool operand is an error, true division gives f32, floor/trunc division and pow of bools have
// no kernel; an int number promotes a bool tensor to i64, a float number to f32.
TEST(Elementwise, BoolArithmeticFollowsPyTorch) {
  EXPECT_EQ(Out("add", {Bool({4}), Bool({4})}), "bool[4]");
  EXPECT_EQ(Out("add", {Bool({4}), Bool({})}), "bool[4]");
  EXPECT_EQ(Out("add", {Bool({4}), Bool({4})}, Attrs().Int("alpha", 2)), "bool[4]");
  EXPECT_EQ(Out("add", {Bool({4})}, Attrs().Bool("scalar", true)), "bool[4]");  // b + True
  EXPECT_EQ(Out("add", {Bool({4})}, Attrs().Int("scalar", 1)), "i64[4]");       // b + 1
  EXPECT_EQ(Out("add", {Bool({4})}, Attrs().Float("scalar", 1.5)), "f32[4]");   // b + 1.5
  EXPECT_EQ(Out("add", {Bool({4}), I64({})}), "i64[4]");
  EXPECT_EQ(Out("add", {I64({4})}, Attrs().Bool("scalar", true)), "i64[4]");
  EXPECT_EQ(Out("mul", {Bool({4}), Bool({4})}), "bool[4]");
  EXPECT_EQ(Out("mul", {Bool({4})}, Attrs().Int("scalar", 2)), "i64[4]");
  EXPECT_EQ(Out("sub", {Bool({4}), Bool({4})}),
            "error: node 'n' (sub): subtraction of two bool tensors is not supported (use logical_xor)");
  EXPECT_EQ(Out("sub", {Bool({4})}, Attrs().Bool("scalar", true)),
            "error: node 'n' (sub): subtraction of two bool tensors is not supported (use logical_xor)");
  for (const auto& attrs : {Attrs().Int("scalar", 1), Attrs().Int("scalar", 1).Bool("reverse", true),
                            Attrs().Float("scalar", 1.5)}) {
    EXPECT_THAT(Out("sub", {Bool({4})}, attrs), HasSubstr("(sub): subtraction with a bool tensor is not supported"));
  }
  EXPECT_THAT(Out("sub", {Bool({4}), I64({4})}), HasSubstr("subtraction with a bool tensor is not supported"));
  EXPECT_THAT(Out("sub", {F32({4}), Bool({4})}), HasSubstr("subtraction with a bool tensor is not supported"));
  EXPECT_THAT(Out("sub", {F32({4})}, Attrs().Bool("scalar", true)), HasSubstr("subtraction with a bool tensor"));
  EXPECT_EQ(Out("div", {Bool({4}), Bool({4})}), "f32[4]");
  EXPECT_EQ(Out("div", {Bool({4})}, Attrs().Bool("scalar", true)), "f32[4]");
  EXPECT_EQ(Out("div", {Bool({4}), Bool({4})}, Attrs().Str("rounding_mode", "floor")),
            "error: node 'n' (div): division with rounding_mode 'floor' is not supported for bool operands");
  EXPECT_EQ(Out("div", {Bool({4})}, Attrs().Int("scalar", 2).Str("rounding_mode", "floor")), "i64[4]");
  EXPECT_EQ(Out("div", {Bool({4})}, Attrs().Float("scalar", 2).Str("rounding_mode", "trunc")), "f32[4]");
  EXPECT_EQ(Out("pow", {Bool({4}), Bool({4})}), "error: node 'n' (pow): pow is not supported for bool operands");
  EXPECT_EQ(Out("pow", {Bool({4})}, Attrs().Int("scalar", 2)), "i64[4]");
  EXPECT_EQ(Out("pow", {Bool({4})}, Attrs().Int("scalar", 2).Bool("reverse", true)), "i64[4]");  // 2 ** b
  EXPECT_EQ(Out("pow", {Bool({4}), I64({})}), "i64[4]");
}

TEST(Elementwise, CompareMaskWhereTriangleCast) {
  EXPECT_EQ(Out("eq", {F32({1, 1, 4, 4})}, Attrs().Int("scalar", 0)), "bool[1,1,4,4]");
  for (const char* op : {"ne", "lt", "gt", "le", "ge"}) EXPECT_EQ(Out(op, {F32({3}), F32({2, 1})}), "bool[2,3]") << op;
  EXPECT_EQ(Out("masked_fill", {F32({2, 4, 4}), Bool({4, 4})}, Attrs().Float("value", -1e9)), "f32[2,4,4]");
  EXPECT_THAT(Out("masked_fill", {F32({2, 4, 4}), F32({4, 4})}, Attrs().Float("value", 0)), HasSubstr("mask must be bool"));
  EXPECT_THAT(Out("masked_fill", {F32({4, 4}), Bool({2, 4, 4})}, Attrs().Float("value", 0)), HasSubstr("does not broadcast to input"));
  EXPECT_EQ(Out("where", {Bool({4, 1}), F32({4}), F32({1})}), "f32[4,4]");
  EXPECT_EQ(Out("where", {Bool({4}), F32({4}), std::nullopt}, Attrs().Float("y_scalar", 0)), "f32[4]");
  EXPECT_THAT(Out("where", {Bool({4}), F32({4})}), HasSubstr("attribute 'y_scalar' is not set"));
  EXPECT_EQ(Out("triu", {F32({4, 4})}, Attrs().Int("diagonal", 1)), "f32[4,4]");
  EXPECT_THAT(Out("tril", {F32({4})}), HasSubstr("rank 2 to 64"));
  EXPECT_EQ(Out("to", {F32({4})}, Attrs().Str("dtype", "bf16")), "bf16[4]");
  EXPECT_THAT(Out("to", {F32({4})}, Attrs().Str("dtype", "f8")), HasSubstr("unknown dtype 'f8'"));
  EXPECT_EQ(Out("type_as", {F32({4}), TensorType{v1::FLOAT16, {1}}}), "f16[4]");
}

TEST(Reductions, MeanSumAmax) {
  EXPECT_EQ(Out("mean", {F32({2, 3, 4})}, Attrs().Ints("dims", {-1}).Bool("keepdim", true)), "f32[2,3,1]");
  EXPECT_EQ(Out("sum", {F32({2, 3, 4})}), "f32[]");
  EXPECT_EQ(Out("sum", {Bool({2, 3})}, Attrs().Ints("dims", {0})), "i64[3]");
  EXPECT_EQ(Out("amax", {F32({2, 3, 4})}, Attrs().Ints("dims", {0, 2})), "f32[3]");
  EXPECT_THAT(Out("mean", {F32({2, 3})}, Attrs().Ints("dims", {1, -1})), HasSubstr("appears more than once"));
  EXPECT_THAT(Out("mean", {I64({2, 3})}), HasSubstr("needs a float dtype"));
}

TEST(Creation, ArangeZerosOnesFull) {
  EXPECT_EQ(Out("arange", {}, Attrs().Int("end", 16)), "i64[16]");
  EXPECT_EQ(Out("arange", {}, Attrs().Int("start", 2).Int("end", 10).Int("step", 3)), "i64[3]");
  EXPECT_EQ(Out("arange", {}, Attrs().Float("end", 2.5)), "f32[3]");
  EXPECT_THAT(Out("arange", {}, Attrs().Int("end", 4).Int("step", 0)), HasSubstr("step must not be 0"));
  EXPECT_EQ(Out("zeros", {}, Attrs().Ints("shape", {2, 3})), "f32[2,3]");
  EXPECT_EQ(Out("ones", {}, Attrs().Ints("shape", {2}).Str("dtype", "bool")), "bool[2]");
  EXPECT_EQ(Out("full", {}, Attrs().Ints("shape", {4, 4}).Float("value", -1e30)), "f32[4,4]");
  EXPECT_EQ(Out("full", {}, Attrs().Ints("shape", {}).Int("value", 3)), "i64[]");
  EXPECT_THAT(Out("zeros", {}, Attrs().Ints("shape", {-2})), HasSubstr("negative dimension"));
}

TEST(Conv, ConvAndPools) {
  EXPECT_EQ(Out("conv2d", {F32({2, 3, 224, 224}), F32({64, 3, 7, 7})},
                Attrs().Ints("stride", {2, 2}).Ints("padding", {3, 3})),
            "f32[2,64,112,112]");
  EXPECT_EQ(Out("conv2d", {F32({2, 32, 8, 8}), F32({32, 1, 3, 3}), F32({32})},
                Attrs().Ints("padding", {1}).Int("groups", 32)),
            "f32[2,32,8,8]");
  EXPECT_THAT(Out("conv2d", {F32({2, 4, 8, 8}), F32({8, 3, 3, 3})}), HasSubstr("expects 3 input channels"));
  EXPECT_EQ(Out("max_pool2d", {F32({2, 64, 112, 112})},
                Attrs().Ints("kernel_size", {3}).Ints("stride", {2}).Ints("padding", {1})),
            "f32[2,64,56,56]");
  EXPECT_EQ(Out("max_pool2d", {F32({1, 1, 5, 5})}, Attrs().Ints("kernel_size", {2}).Bool("ceil_mode", true)),
            "f32[1,1,3,3]");
  EXPECT_EQ(Out("avg_pool2d", {F32({1, 8, 6, 6})}, Attrs().Ints("kernel_size", {2, 2})), "f32[1,8,3,3]");
  EXPECT_THAT(Out("avg_pool2d", {F32({1, 8, 6, 6})}, Attrs().Ints("kernel_size", {2}).Ints("padding", {2})),
              HasSubstr("at most half the kernel size"));
  EXPECT_EQ(Out("adaptive_avg_pool2d", {F32({2, 2048, 7, 7})}, Attrs().Ints("output_size", {1, 1})), "f32[2,2048,1,1]");
}

// stride=[] (what F.max_pool2d(x, k) traces to) means stride = kernel size, as in PyTorch:
// aten::max_pool2d(zeros(1,1,6,7), [2,3], []) is [1,1,3,2].
TEST(Conv, PoolEmptyStrideIsKernelSize) {
  EXPECT_EQ(Out("max_pool2d", {F32({1, 1, 6, 7})}, Attrs().Ints("kernel_size", {2, 3}).Ints("stride", {})),
            "f32[1,1,3,2]");
  EXPECT_EQ(Out("avg_pool2d", {F32({1, 1, 6, 7})}, Attrs().Ints("kernel_size", {3}).Ints("stride", {})),
            "f32[1,1,2,2]");
  EXPECT_EQ(Out("max_pool2d", {F32({1, 1, 6, 7})}, Attrs().Ints("kernel_size", {2, 3})), "f32[1,1,3,2]");
  EXPECT_EQ(Out("max_pool2d", {F32({1, 1, 6, 7})}, Attrs().Ints("kernel_size", {2, 3}).Ints("stride", {1})),
            "f32[1,1,5,5]");
  EXPECT_THAT(Out("max_pool2d", {F32({1, 1, 6, 7})}, Attrs().Ints("kernel_size", {2}).Ints("stride", {1, 1, 1})),
              HasSubstr("attribute 'stride' must have 1 or 2 values, got 3"));
}

TEST(Losses, CrossEntropyNllMse) {
  EXPECT_EQ(Out("cross_entropy", {F32({32, 100}), I64({32})}), "f32[]");
  EXPECT_EQ(Out("cross_entropy", {F32({4, 10, 8}), I64({4, 8})}, Attrs().Str("reduction", "none")), "f32[4,8]");
  EXPECT_EQ(Out("cross_entropy", {F32({4, 10}), F32({4, 10})}, Attrs().Float("label_smoothing", 0.1)), "f32[]");
  EXPECT_THAT(Out("cross_entropy", {F32({32, 100}), I64({31})}), HasSubstr("must have shape [32]"));
  EXPECT_THAT(Out("cross_entropy", {F32({32, 100}), I64({32})}, Attrs().Str("reduction", "avg")),
              HasSubstr("'mean', 'sum' or 'none'"));
  EXPECT_EQ(Out("nll_loss", {F32({8, 5}), I64({8})}, Attrs().Int("ignore_index", -1)), "f32[]");
  EXPECT_THAT(Out("nll_loss", {F32({8, 5}), F32({8, 5})}), HasSubstr("integer class indices"));
  EXPECT_EQ(Out("mse_loss", {F32({8, 5}), F32({8, 5})}), "f32[]");
  EXPECT_EQ(Out("mse_loss", {F32({8, 5}), F32({8, 5})}, Attrs().Str("reduction", "none")), "f32[8,5]");
}

}  // namespace
}  // namespace mapd

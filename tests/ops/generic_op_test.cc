// The generic ATen op's attributes (model/ops/generic_op.h) and its registry entry: inference
// that follows the batch only where the import proved the op per-sample, costs and saved tensors
// read from what the import measured, and the sharding rule that follows.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "model/ops/generic_op.h"
#include "tests/ops/op_test_util.h"

namespace mapd {
namespace {

using ::testing::HasSubstr;
using namespace mapd::testing;

GenericArg Arg(const std::string& s) {
  auto a = GenericArg::Decode(s);
  EXPECT_TRUE(a.ok()) << s << ": " << a.status();
  return *a;
}

// cdist of x [B,6,3] and y [B,5,3], as the importer records it, per-sample on dimension 0.
GenericNode Cdist(int64_t batch, bool per_sample) {
  GenericNode g;
  g.schema = "aten::cdist";
  g.args = {Arg("t:0"), Arg("t:1"), Arg("f:2"), Arg("none")};
  g.input_types = {F32({batch, 6, 3}), F32({batch, 5, 3})};
  g.output_types = {F32({batch, 6, 5})};
  if (per_sample) g.batch = {batch, {0, 0}, {0}};
  g.alias = {-1};
  g.grad = {true};
  g.saved_inputs = {0, 1};
  g.saved_outputs = {0};
  g.saved_extra = {16, 8};
  g.workspace = {0, 100};
  g.grad_workspace = {64, 0};
  return g;
}

TEST(GenericOp, ArgumentsRoundTrip) {
  for (const char* s : {"t:3", "tl:1,2", "tl:", "otl:_,4", "none", "i:-5", "f:0.5", "b:1", "il:1,-2", "fl:0.25,1",
                        "bl:1,0", "s:mean", "s:", "dev", "gen"}) {
    EXPECT_EQ(Arg(s).Encode(), s);
  }
  EXPECT_FALSE(GenericArg::Decode("x:1").ok());
  EXPECT_FALSE(GenericArg::Decode("i:one").ok());
  EXPECT_FALSE(GenericArg::Decode("t:1,2").ok());
  EXPECT_EQ(Arg("f:0.1").floats[0], 0.1);  // exact through %.17g
}

TEST(GenericOp, InfersTheMeasuredTypesAndFollowsAProvenBatch) {
  const GenericNode g = Cdist(4, /*per_sample=*/true);
  EXPECT_EQ(Out("aten", {F32({4, 6, 3}), F32({4, 5, 3})}, g.ToAttrs()), "f32[4,6,5]");
  EXPECT_EQ(Out("aten", {F32({2, 6, 3}), F32({2, 5, 3})}, g.ToAttrs()), "f32[2,6,5]");  // a micro-batch
  EXPECT_THAT(Out("aten", {F32({2, 6, 3}), F32({4, 5, 3})}, g.ToAttrs()), HasSubstr("the same in every input"));
  EXPECT_THAT(Out("aten", {F32({4, 7, 3}), F32({4, 5, 3})}, g.ToAttrs()), HasSubstr("may change only its batch"));
  const GenericNode whole = Cdist(4, /*per_sample=*/false);
  EXPECT_THAT(Out("aten", {F32({2, 6, 3}), F32({2, 5, 3})}, whole.ToAttrs()), HasSubstr("was not proven per-sample"));
}

TEST(GenericOp, BadAttributesNameTheField) {
  GenericNode g = Cdist(4, true);
  g.saved_inputs = {7};
  EXPECT_THAT(Out("aten", {F32({4, 6, 3}), F32({4, 5, 3})}, g.ToAttrs()), HasSubstr("saved_in 7 is out of range"));
  g = Cdist(4, true);
  g.batch.outputs = {1};
  EXPECT_THAT(Out("aten", {F32({4, 6, 3}), F32({4, 5, 3})}, g.ToAttrs()), HasSubstr("batch_out names dimension 1"));
  EXPECT_THAT(Out("aten", {F32({4, 6, 3})}, Attrs().Str("schema", "aten::cdist")), HasSubstr("in_dtypes names 0 inputs"));
}

TEST(GenericOp, CostAndSavedFollowTheBatch) {
  const OpDef* def = OpRegistry::Global().Find("aten");
  ASSERT_NE(def, nullptr);
  const GenericNode g = Cdist(4, true);
  const Attrs attrs = g.ToAttrs();
  for (int64_t b : {4, 2}) {
    const TensorType x = F32({b, 6, 3}), y = F32({b, 5, 3});
    const std::vector<const TensorType*> in = {&x, &y};
    OpContext octx("n", "aten", in, attrs.map());
    const std::vector<TensorType> out = {F32({b, 6, 5})};
    CostContext ctx{octx, out, {true, false}, {true, true}};
    const OpCost cost = def->cost(ctx);
    EXPECT_EQ(cost.flops, 3.0 * b * 6 * 5 * 3);  // cdist's formula
    EXPECT_FALSE(cost.flops_estimated);
    EXPECT_EQ(cost.workspace_bytes, 100 * b);
    EXPECT_EQ(cost.grad_workspace_bytes, 64);
    const SavedSpec saved = def->saved(ctx);
    EXPECT_EQ(saved.inputs, (std::vector<int>{0, 1}));
    EXPECT_EQ(saved.outputs, (std::vector<int>{0}));
    EXPECT_EQ(saved.extra_bytes, 16 + 8 * b);
    auto rule = def->sharding(ctx);
    ASSERT_TRUE(rule.ok());
    EXPECT_EQ(rule->inputs[0][0], rule->outputs[0][0]);  // the batch label, splittable
    EXPECT_FALSE(rule->IsUnsplittable(rule->inputs[0][0]));
    EXPECT_TRUE(rule->IsUnsplittable(rule->inputs[0][1]));
    EXPECT_TRUE(def->output_grad(ctx, 0));
    EXPECT_FALSE(def->is_view(ctx));
  }
}

TEST(GenericOp, AnOpOfNoKnownFormulaIsEstimatedAsMemoryBound) {
  GenericNode g = Cdist(4, false);
  g.schema = "aten::special_zeta";
  const Attrs attrs = g.ToAttrs();
  const TensorType x = F32({4, 6, 3}), y = F32({4, 5, 3});
  const std::vector<const TensorType*> in = {&x, &y};
  OpContext octx("n", "aten", in, attrs.map());
  const std::vector<TensorType> out = {F32({4, 6, 5})};
  CostContext ctx{octx, out, {false, false}, {true, true}};
  const OpCost cost = OpRegistry::Global().Find("aten")->cost(ctx);
  EXPECT_TRUE(cost.flops_estimated);
  EXPECT_EQ(cost.flops, 4 * 6 * 5);
  auto rule = OpRegistry::Global().Find("aten")->sharding(ctx);
  ASSERT_TRUE(rule.ok());
  for (char l : rule->inputs[0]) EXPECT_TRUE(rule->IsUnsplittable(l));  // not per-sample: replicated
}

TEST(GenericOp, DetachsOutputIsAViewWithoutAGradient) {
  GenericNode g;
  g.schema = "aten::detach";
  g.args = {Arg("t:0")};
  g.input_types = {F32({4, 3})};
  g.output_types = {F32({4, 3})};
  g.alias = {0};
  g.grad = {false};
  const Attrs attrs = g.ToAttrs();
  const TensorType x = F32({4, 3});
  const std::vector<const TensorType*> in = {&x};
  OpContext octx("n", "aten", in, attrs.map());
  const std::vector<TensorType> out = {x};
  CostContext ctx{octx, out, {true}, {true}};
  const OpDef* def = OpRegistry::Global().Find("aten");
  EXPECT_TRUE(IsViewNode(*def, ctx));
  EXPECT_FALSE(OutputNeedsGrad(*def, ctx, 0, /*any_input_needs_grad=*/true));
  EXPECT_EQ(GenericFormulaFlops("aten::detach", in, out, g.args), 0);
}

}  // namespace
}  // namespace mapd

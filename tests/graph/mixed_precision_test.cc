// The bf16 mixed-precision graph (model/graph/mixed_precision.h): what it casts, what it
// keeps in fp32, and that converting twice changes nothing.
#include "model/graph/mixed_precision.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "model/graph/builder.h"
#include "model/graph/loss.h"
#include "model/graph/verifier.h"
#include "model/zoo/zoo.h"

namespace mapd {
namespace {

v1::Graph Training(const std::string& spec, LossKind loss = LossKind::kAuto) {
  auto built = BuildZooModel(spec);
  EXPECT_TRUE(built.ok()) << built.status();
  auto g = WithTrainingLoss(*std::move(built), loss);
  EXPECT_TRUE(g.ok()) << g.status();
  return *g;
}

const v1::Node* Producer(const v1::Graph& g, const std::string& value) {
  for (const auto& n : g.nodes()) {
    for (const auto& o : n.outputs()) {
      if (o == value) return &n;
    }
  }
  return nullptr;
}

TEST(MixedPrecision, WeightsAndActivationsBf16LossFp32) {
  const v1::Graph fp32 = Training("gpt2:layers=2,hidden=32,heads=4,vocab=64,seq=8,batch=4");
  ASSERT_FALSE(IsBf16Mixed(fp32));
  auto mixed = ToBf16Mixed(fp32);
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  auto g = MakeVerifiedGraph(*mixed);  // every type inferred again agrees
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(IsBf16Mixed(*mixed));
  EXPECT_EQ(mixed->metadata().at("precision"), "bf16");
  for (const auto& p : mixed->parameters()) {
    if (IsFloating(p.type().dtype())) EXPECT_EQ(p.type().dtype(), v1::BFLOAT16) << p.name();
  }
  EXPECT_EQ(g->TypeOf("tokens").ToString(), "i64[4,8]");  // token ids are not floats
  // The loss reads fp32 logits through one inserted cast of the bf16 ones; it is fp32.
  const v1::Node* loss = Producer(*mixed, mixed->outputs(0));
  ASSERT_NE(loss, nullptr);
  EXPECT_EQ(loss->op(), "cross_entropy");
  EXPECT_EQ(g->TypeOf(mixed->outputs(0)).ToString(), "f32[]");
  const v1::Node* cast = Producer(*mixed, loss->inputs(0));
  ASSERT_NE(cast, nullptr);
  EXPECT_EQ(cast->op(), "to");
  EXPECT_EQ(g->TypeOf(loss->inputs(0)).dtype, v1::FLOAT32);
  EXPECT_EQ(g->TypeOf(cast->inputs(0)).dtype, v1::BFLOAT16);
  EXPECT_EQ(mixed->nodes_size(), fp32.nodes_size() + 1);
  // The layers in between run in bf16.
  int bf16_values = 0;
  for (const auto& v : mixed->values()) bf16_values += v.type().dtype() == v1::BFLOAT16;
  EXPECT_GT(bf16_values, mixed->values_size() / 2);
  // Converting again changes nothing.
  auto again = ToBf16Mixed(*mixed);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*again, *mixed));
}

TEST(MixedPrecision, MseCastsPredictionAndFloatTargets) {
  GraphBuilder b("regression");
  auto x = b.Input("x", {v1::FLOAT32, {4, 8}}, "features");
  auto target = b.Input("target", {v1::FLOAT32, {4, 2}}, "targets");
  v1::InitRule init;
  init.set_kind(v1::InitRule::ZEROS);
  auto w = b.Param("fc.weight", {v1::FLOAT32, {2, 8}}, init);
  b.Output(b.Op("mse_loss", {b.Op("linear", {x, w}), target}));
  auto built = b.Build();
  ASSERT_TRUE(built.ok()) << built.status();
  auto mixed = ToBf16Mixed(*built);
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  auto g = MakeVerifiedGraph(*mixed);
  ASSERT_TRUE(g.ok()) << g.status();
  const v1::Node* loss = Producer(*mixed, mixed->outputs(0));
  ASSERT_NE(loss, nullptr);
  EXPECT_EQ(loss->op(), "mse_loss");
  for (const auto& in : loss->inputs()) {
    EXPECT_EQ(g->TypeOf(in).dtype, v1::FLOAT32) << in;
    EXPECT_EQ(Producer(*mixed, in)->op(), "to") << in;
  }
  for (const auto& in : mixed->inputs()) EXPECT_EQ(in.type().dtype(), v1::BFLOAT16) << in.name();
  EXPECT_EQ(g->TypeOf(mixed->outputs(0)).ToString(), "f32[]");
}

}  // namespace
}  // namespace mapd

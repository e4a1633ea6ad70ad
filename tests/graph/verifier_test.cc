// Builder and verifier: every fault is INVALID_ARGUMENT naming the node or value.
#include "model/graph/verifier.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "model/graph/builder.h"
#include "model/graph/loss.h"

namespace mapd {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

v1::Graph Mlp() {
  GraphBuilder b("mlp");
  auto x = b.Input("x", {v1::FLOAT32, {4, 8}});
  auto labels = b.Input("labels", {v1::INT64, {4}}, "labels");
  v1::InitRule init;
  init.set_kind(v1::InitRule::ZEROS);
  auto w = b.Param("fc.weight", {v1::FLOAT32, {3, 8}}, init);
  auto h = b.Op("linear", {x, w});
  auto a = b.Op("relu", {h});
  auto loss = b.Op("cross_entropy", {a, labels});
  b.Output(loss);
  auto g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status();
  return *g;
}

std::string VerifyMessage(const v1::Graph& g) {
  auto st = VerifyGraph(g);
  if (st.ok()) return "ok";
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  return std::string(st.message());
}

TEST(Builder, InfersTypesAndScopes) {
  GraphBuilder b("t");
  auto x = b.Input("x", {v1::FLOAT32, {2, 3}});
  std::string y;
  {
    ScopeGuard outer(b, "blocks.0");
    ScopeGuard inner(b, "mlp");
    y = b.Op("gelu", {x});
    EXPECT_EQ(b.scope(), "blocks.0.mlp");
  }
  EXPECT_EQ(b.scope(), "");
  EXPECT_EQ(y, "blocks.0.mlp/gelu");
  EXPECT_EQ(b.TypeOf(y)->ToString(), "f32[2,3]");
  auto y2 = b.Op("gelu", {x});
  EXPECT_EQ(y2, "gelu");
  auto y3 = b.Op("gelu", {x});
  EXPECT_EQ(y3, "gelu_1");
  b.Output(y3);
  auto g = b.Build();
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->nodes(0).scope(), "blocks.0.mlp");
  EXPECT_EQ(VerifyMessage(*g), "ok");
}

TEST(Builder, FirstErrorSticks) {
  GraphBuilder b("t");
  auto x = b.Input("x", {v1::FLOAT32, {2, 3}});
  auto bad = b.Op("view", {x}, Attrs().Ints("shape", {7}));
  EXPECT_EQ(bad, "");
  b.Op("relu", {x});  // ignored after the error
  auto g = b.Build();
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(std::string(g.status().message()), HasSubstr("node 'view' (view): cannot reshape"));
  GraphBuilder b2("t2");
  b2.Op("relu", {"ghost"});
  EXPECT_THAT(std::string(b2.Build().status().message()), HasSubstr("reads undefined value 'ghost'"));
}

TEST(Verifier, AcceptsAWellFormedGraph) { EXPECT_EQ(VerifyMessage(Mlp()), "ok"); }

TEST(Verifier, DanglingValue) {
  v1::Graph g = Mlp();
  g.mutable_nodes(1)->set_inputs(0, "missing_value");
  EXPECT_THAT(VerifyMessage(g), HasSubstr("node 'relu' (relu) input 0 reads value 'missing_value', which no input, "
                                          "parameter or node defines (dangling value)"));
}

TEST(Verifier, CycleIsReportedWithItsNodes) {
  v1::Graph g = Mlp();
  // linear reads relu's output, relu reads linear's: a cycle.
  g.mutable_nodes(0)->set_inputs(0, "relu");
  EXPECT_THAT(VerifyMessage(g), HasSubstr("the graph has a cycle: linear -> relu -> linear"));
}

// A chain of 100,000 relus: a client's graph may be as deep as it likes, and the order and cycle
// checks must not recurse once per node (a stack overflow took the coordinator down).
v1::Graph DeepChain(int nodes) {
  GraphBuilder b("deep");
  std::string h = b.Input("x", {v1::FLOAT32, {4}});
  for (int i = 0; i < nodes; ++i) h = b.Op("relu", {h});
  b.Output(h);
  auto g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status();
  return *g;
}

TEST(Verifier, AHundredThousandNodesInReverseOrderAreRefusedNotRecursedInto) {
  v1::Graph g = DeepChain(100000);
  EXPECT_EQ(VerifyMessage(g), "ok");
  std::reverse(g.mutable_nodes()->begin(), g.mutable_nodes()->end());
  EXPECT_THAT(VerifyMessage(g), HasSubstr("nodes must be in topological order"));
}

TEST(Verifier, TensorsBeyondAnyDeviceAreRefusedBeforeTheirSizesOverflow) {
  // Probe of issue 18: an input of 2^40 x 2^40 (2^80 elements: its byte count wraps 64 bits)
  // was admitted as fitting in 0-8 bytes.
  v1::Graph g = Mlp();
  auto* shape = g.mutable_inputs(0)->mutable_type()->mutable_shape();
  shape->Set(0, int64_t{1} << 40);
  shape->Set(1, int64_t{1} << 40);
  EXPECT_THAT(VerifyMessage(g), HasSubstr("has more than 2^48 elements"));
  v1::Graph deep = Mlp();
  for (int i = 0; i < 20; ++i) deep.mutable_inputs(0)->mutable_type()->add_shape(1);
  EXPECT_THAT(VerifyMessage(deep), HasSubstr("dimensions; a tensor has at most 16"));
  // Sizes whose product is exactly the bound's neighbourhood but no more are fine to verify.
  v1::Graph big = Mlp();
  big.mutable_inputs(0)->mutable_type()->mutable_shape()->Set(0, int64_t{1} << 30);
  EXPECT_THAT(VerifyMessage(big), Not(HasSubstr("2^48")));
}

TEST(Verifier, ALongCycleIsNamedByItsEnds) {
  v1::Graph g = DeepChain(100000);
  g.mutable_nodes(0)->set_inputs(0, g.nodes(g.nodes_size() - 1).outputs(0));  // the first reads the last
  const std::string message = VerifyMessage(g);
  EXPECT_THAT(message, HasSubstr("the graph has a cycle: "));
  EXPECT_THAT(message, HasSubstr(" more) -> "));
  EXPECT_LT(message.size(), 2000u) << message.size();
}

TEST(Verifier, OutOfOrderWithoutCycle) {
  v1::Graph g = Mlp();
  g.mutable_nodes()->SwapElements(0, 1);
  EXPECT_THAT(VerifyMessage(g), HasSubstr("defined by the later node 'linear'; nodes must be in topological order"));
}

TEST(Verifier, WrongRecordedTypeAndBadAttributes) {
  v1::Graph g = Mlp();
  g.mutable_values(0)->mutable_type()->set_shape(1, 5);
  EXPECT_THAT(VerifyMessage(g), HasSubstr("node 'linear' (linear) output 'linear' is recorded as f32[4,5] but its "
                                          "inputs and attributes give f32[4,3]"));
  v1::Graph g2 = Mlp();
  (*g2.mutable_nodes(2)->mutable_attrs())["reduction"].set_s("average");
  EXPECT_THAT(VerifyMessage(g2), HasSubstr("node 'cross_entropy' (cross_entropy): reduction must be"));
  v1::Graph g3 = Mlp();
  g3.mutable_nodes(1)->set_op("not_an_op");
  EXPECT_THAT(VerifyMessage(g3), HasSubstr("node 'relu' (not_an_op): unknown op 'not_an_op'"));
}

TEST(Verifier, TypesNamesAndOutputs) {
  v1::Graph g = Mlp();
  g.mutable_inputs(0)->mutable_type()->set_dtype(v1::DTYPE_UNSPECIFIED);
  EXPECT_THAT(VerifyMessage(g), HasSubstr("graph input 'x' has no valid dtype"));
  v1::Graph g2 = Mlp();
  g2.mutable_parameters(0)->set_name("x");
  EXPECT_THAT(VerifyMessage(g2), HasSubstr("defines value 'x', which is already defined"));
  v1::Graph g3 = Mlp();
  g3.set_outputs(0, "nothing");
  EXPECT_THAT(VerifyMessage(g3), HasSubstr("graph output 'nothing' is not a defined value"));
  v1::Graph g4 = Mlp();
  g4.mutable_inputs(0)->mutable_type()->set_shape(0, -4);
  EXPECT_THAT(VerifyMessage(g4), HasSubstr("negative dimension"));
}

TEST(Verifier, BufferUpdates) {
  v1::Graph g = Mlp();
  auto* u = g.add_buffer_updates();
  u->set_buffer("fc.weight");
  u->set_value("linear");
  EXPECT_THAT(VerifyMessage(g), HasSubstr("buffer update names 'fc.weight', which is not a buffer"));
}

TEST(Verifier, MakeVerifiedGraph) {
  auto g = MakeVerifiedGraph(Mlp());
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->NumTrainableParameters(), 24);
  v1::Graph bad = Mlp();
  bad.mutable_nodes(1)->set_inputs(0, "zzz");
  EXPECT_FALSE(MakeVerifiedGraph(bad).ok());
}

}  // namespace
}  // namespace mapd

namespace mapd {
namespace {

TEST(Builder, BufferUpdatesAreChecked) {
  GraphBuilder b("bn");
  auto x = b.Input("x", {v1::FLOAT32, {4, 3}});
  v1::Parameter mean;
  mean.set_name("bn.running_mean");
  *mean.mutable_type() = TensorType{v1::FLOAT32, {3}}.ToProto();
  mean.set_kind(v1::Parameter::BUFFER);
  b.AddParameter(mean);
  b.BufferUpdate("bn.running_mean", x);  // wrong shape
  EXPECT_THAT(std::string(b.status().message()), ::testing::HasSubstr("of another shape"));
  GraphBuilder b2("bn2");
  auto y = b2.Input("y", {v1::FLOAT32, {3}});
  b2.BufferUpdate("y", y);  // an input is not a buffer
  EXPECT_THAT(std::string(b2.status().message()), ::testing::HasSubstr("'y', which is not a buffer"));
}

}  // namespace
}  // namespace mapd


namespace mapd {
namespace {

v1::Graph LogitsModel() {
  GraphBuilder b("lm");
  auto x = b.Input("tokens", {v1::INT64, {2, 5}}, "tokens");
  v1::InitRule init;
  init.set_kind(v1::InitRule::ZEROS);
  auto w = b.Param("emb", {v1::FLOAT32, {11, 4}}, init);
  b.Output(b.Op("embedding", {x, w}));
  return *b.Build();
}

TEST(Loss, AppendsCrossEntropyOnClassLastLogits) {
  auto g = WithTrainingLoss(LogitsModel(), LossKind::kAuto);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(VerifyGraph(*g).ok()) << VerifyGraph(*g);
  ASSERT_EQ(g->outputs_size(), 1);
  auto view = Graph::Create(*g);
  EXPECT_EQ(view->TypeOf(g->outputs(0)).ToString(), "f32[]");
  EXPECT_EQ(view->TypeOf("targets").ToString(), "i64[2,5]");
  EXPECT_EQ(g->nodes(g->nodes_size() - 1).op(), "cross_entropy");
  EXPECT_EQ(g->nodes(g->nodes_size() - 1).scope(), "loss");
}

TEST(Loss, MseAndOutputKinds) {
  auto mse = WithTrainingLoss(LogitsModel(), LossKind::kMse);
  ASSERT_TRUE(mse.ok()) << mse.status();
  EXPECT_EQ(Graph::Create(*mse)->TypeOf("targets").ToString(), "f32[2,5,4]");
  auto bad = WithTrainingLoss(LogitsModel(), LossKind::kOutput);
  EXPECT_THAT(std::string(bad.status().message()), ::testing::HasSubstr("no floating-point scalar"));
  // A model that returns (logits, loss): auto picks the loss and drops the rest.
  v1::Graph two = *WithTrainingLoss(LogitsModel(), LossKind::kCrossEntropy);
  auto* extra = two.add_outputs();
  *extra = "embedding";
  std::swap(*two.mutable_outputs(0), *two.mutable_outputs(1));
  auto picked = WithTrainingLoss(two, LossKind::kAuto);
  ASSERT_TRUE(picked.ok());
  ASSERT_EQ(picked->outputs_size(), 1);
  EXPECT_EQ(picked->outputs(0), "loss/cross_entropy");
  EXPECT_THAT(std::string(ParseLossKind("hinge").status().message()), ::testing::HasSubstr("auto, output, cross_entropy or mse"));
}

}  // namespace
}  // namespace mapd

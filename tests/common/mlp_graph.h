// The two-layer MLP of the planner's known answers (linear with bias → relu → linear →
// cross_entropy), shared by the cost-graph and lowering tests.
#ifndef MAPD_TESTS_COMMON_MLP_GRAPH_H_
#define MAPD_TESTS_COMMON_MLP_GRAPH_H_

#include <gtest/gtest.h>

#include "model/graph/builder.h"
#include "model/graph/verifier.h"

namespace mapd {

inline Graph TwoLayerMlp(int64_t batch, int64_t hidden, int64_t ffn, int64_t classes) {
  GraphBuilder b("mlp");
  auto x = b.Input("x", {v1::FLOAT32, {batch, hidden}}, "features");
  auto labels = b.Input("labels", {v1::INT64, {batch}}, "labels");
  v1::InitRule init;
  init.set_kind(v1::InitRule::ZEROS);
  auto w1 = b.Param("fc1.weight", {v1::FLOAT32, {ffn, hidden}}, init);
  auto b1 = b.Param("fc1.bias", {v1::FLOAT32, {ffn}}, init);
  auto w2 = b.Param("fc2.weight", {v1::FLOAT32, {classes, ffn}}, init);
  auto h = b.Op("linear", {x, w1, b1});
  auto r = b.Op("relu", {h});
  auto y = b.Op("linear", {r, w2});
  b.Output(b.Op("cross_entropy", {y, labels}));
  auto g = MakeVerifiedGraph(*b.Build());
  EXPECT_TRUE(g.ok()) << g.status();
  return *g;
}

}  // namespace mapd

#endif  // MAPD_TESTS_COMMON_MLP_GRAPH_H_

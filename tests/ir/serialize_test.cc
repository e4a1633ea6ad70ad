// Round trips through binary and JSON, the text dump, and file errors.
#include "model/ir/serialize.h"

#include <gtest/gtest.h>
#include <google/protobuf/util/message_differencer.h>

#include <cstdlib>
#include <fstream>

#include "model/graph/builder.h"
#include "model/ir/dump.h"
#include "model/ir/graph.h"

namespace mapd {
namespace {

v1::Graph SmallGraph() {
  GraphBuilder b("small");
  std::string x = b.Input("x", {v1::FLOAT32, {4, 8}}, "features");
  v1::InitRule init;
  init.set_kind(v1::InitRule::NORMAL);
  init.set_std(0.02);
  std::string w = b.Param("fc.weight", {v1::FLOAT32, {16, 8}}, init);
  std::string y;
  {
    ScopeGuard s(b, "fc");
    y = b.Op("linear", {x, w});
  }
  std::string parts = b.Node("split", {y}, Attrs().Int("split_size", 8).Int("dim", 1))[1];
  std::string z = b.Op("relu", {parts});
  b.Output(z);
  auto g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status();
  return *g;
}

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/mapd_ir_test_" + std::to_string(::getpid()) + "_" + name;
}

TEST(Serialize, BinaryRoundTrip) {
  v1::Graph g = SmallGraph();
  auto back = GraphFromBinary(GraphToBinary(g));
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(g, *back));
}

TEST(Serialize, JsonRoundTrip) {
  v1::Graph g = SmallGraph();
  auto json = GraphToJson(g);
  ASSERT_TRUE(json.ok());
  EXPECT_NE(json->find("\"fc.weight\""), std::string::npos);
  auto back = GraphFromJson(*json);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(g, *back));
}

TEST(Serialize, FilesByExtension) {
  v1::Graph g = SmallGraph();
  for (const char* ext : {".pb", ".json"}) {
    const std::string path = TempPath(std::string("g") + ext);
    ASSERT_TRUE(WriteGraphFile(g, path).ok());
    auto back = ReadGraphFile(path);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(g, *back)) << ext;
    std::remove(path.c_str());
  }
  EXPECT_EQ(WriteGraphFile(g, TempPath("g.txt")).code(), absl::StatusCode::kInvalidArgument);
}

TEST(Serialize, CorruptAndMissingFiles) {
  const std::string pb = TempPath("corrupt.pb");
  std::ofstream(pb) << "\xff\xff\xff this is not a protobuf";
  auto r = ReadGraphFile(pb);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find(pb), std::string::npos);
  const std::string json = TempPath("corrupt.json");
  std::ofstream(json) << "{\"nodes\": [1, 2";
  EXPECT_EQ(ReadGraphFile(json).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadGraphFile(TempPath("missing.pb")).status().code(), absl::StatusCode::kNotFound);
  std::remove(pb.c_str());
  std::remove(json.c_str());
}

TEST(Dump, ReadableText) {
  const std::string text = DumpGraphText(SmallGraph());
  EXPECT_NE(text.find("graph small {"), std::string::npos);
  EXPECT_NE(text.find("input %x: f32[4,8]  # features"), std::string::npos);
  EXPECT_NE(text.find("param %fc.weight: f32[16,8]  # parameter, trainable, init normal(0, 0.02)"), std::string::npos);
  EXPECT_NE(text.find("%fc/linear = linear(%x, %fc.weight) : f32[4,16]  @fc"), std::string::npos) << text;
  EXPECT_NE(text.find("%split.0, %split.1 = split(%fc/linear) {dim=1, split_size=8} : f32[4,8], f32[4,8]"),
            std::string::npos) << text;
  EXPECT_NE(text.find("return %relu"), std::string::npos);
}

TEST(GraphView, LookupsAndCounts) {
  auto g = Graph::Create(SmallGraph());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->NumTrainableParameters(), 128);
  ASSERT_NE(g->FindValue("fc/linear"), nullptr);
  EXPECT_EQ(g->FindValue("fc/linear")->consumers.size(), 1u);
  EXPECT_EQ(g->TypeOf("split.1").ToString(), "f32[4,8]");
  EXPECT_EQ(g->FindValue("nope"), nullptr);
  ASSERT_NE(g->FindParameter("fc.weight"), nullptr);
}

}  // namespace
}  // namespace mapd

// Sharding rules (model/ops/sharding_rule.h) and the strategies generated from them
// (planner/sharding/strategies.h): every registry op has a rule that fits its nodes — in zoo
// graphs and hand-built nodes — and the strategies of linear, softmax, views, attention,
// convolution and losses are the ones parallelism needs.
#include "planner/sharding/strategies.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
#include <set>

#include "model/ir/graph.h"
#include "model/ops/generic_op.h"
#include "model/ops/registry.h"
#include "model/zoo/zoo.h"

namespace mapd {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TensorType F32(Shape s) { return {v1::FLOAT32, std::move(s)}; }
TensorType I64(Shape s) { return {v1::INT64, std::move(s)}; }
TensorType Bool(Shape s) { return {v1::BOOL, std::move(s)}; }

// One node with its types inferred through the registry, and the CostContext rules see.
struct Node {
  std::string name = "n", op;
  std::vector<std::optional<TensorType>> in;
  Attrs attrs;
  std::vector<const TensorType*> ptrs;
  std::vector<TensorType> outs;
  std::unique_ptr<OpContext> octx;
  std::unique_ptr<CostContext> ctx;
};

std::unique_ptr<Node> Make(const std::string& op, std::vector<std::optional<TensorType>> in, Attrs attrs = Attrs()) {
  auto n = std::make_unique<Node>();
  n->op = op;
  n->in = std::move(in);
  n->attrs = std::move(attrs);
  for (const auto& t : n->in) n->ptrs.push_back(t ? &*t : nullptr);
  auto outs = OpRegistry::Global().Infer(n->name, op, n->ptrs, n->attrs.map());
  EXPECT_TRUE(outs.ok()) << op << ": " << outs.status();
  if (outs.ok()) n->outs = *outs;
  n->octx = std::make_unique<OpContext>(n->name, n->op, n->ptrs, n->attrs.map());
  n->ctx = std::make_unique<CostContext>(CostContext{*n->octx, n->outs, {}, {}});
  return n;
}

ShardingRule RuleOf(const Node& n) {
  const OpDef* def = OpRegistry::Global().Find(n.op);
  EXPECT_NE(def, nullptr);
  EXPECT_TRUE(def->sharding) << n.op;
  auto r = def->sharding(*n.ctx);
  EXPECT_TRUE(r.ok()) << n.op << ": " << r.status();
  return r.ok() ? *r : ShardingRule();
}

std::vector<Strategy> StrategiesOf(const Node& n, const std::vector<int64_t>& mesh) {
  auto s = GenerateStrategies(*OpRegistry::Global().Find(n.op), *n.ctx, mesh);
  EXPECT_TRUE(s.ok()) << n.op << ": " << s.status();
  return s.ok() ? *s : std::vector<Strategy>();
}

std::vector<std::string> Names(const std::vector<Strategy>& ss) {
  std::vector<std::string> out;
  for (const auto& s : ss) out.push_back(s.ToString());
  return out;
}

// "x-placements->y-placements" by strategy name.
std::map<std::string, std::string> Placements(const std::vector<Strategy>& ss) {
  std::map<std::string, std::string> out;
  for (const auto& s : ss) out[s.ToString()] = s.PlacementsString();
  return out;
}

// Labels that may name dimensions of different sizes (a merged dimension and its outermost
// factor): any label of a view that merges or splits dimensions, or of repeat_interleave; the
// heads of grouped-query attention.
bool MayResize(const std::string& op, char label) {
  if (op == "scaled_dot_product_attention") return label == 'h';
  return op == "view" || op == "reshape" || op == "flatten" || op == "repeat_interleave";
}

// Everything a rule must satisfy for the node `ctx` describes: ValidateShardingRule, plus —
// outside MayResize — the same label means the same size (so a broadcast size-1 dimension has a
// label of its own), and the generated strategies start replicated.
void ExpectFits(const std::string& op, const ShardingRule& rule, const CostContext& ctx, const std::string& where) {
  SCOPED_TRACE(where + " (" + op + "): " + rule.ToString());
  EXPECT_TRUE(ValidateShardingRule(rule, ctx).ok()) << ValidateShardingRule(rule, ctx);
  {
    std::map<char, std::set<int64_t>> sizes;
    for (int i = 0; i < ctx.op.num_inputs() && i < static_cast<int>(rule.inputs.size()); ++i) {
      if (!ctx.op.has_input(i)) continue;
      for (size_t d = 0; d < rule.inputs[i].size() && d < ctx.op.input(i).shape.size(); ++d) {
        sizes[rule.inputs[i][d]].insert(ctx.op.input(i).shape[d]);
      }
    }
    for (size_t o = 0; o < rule.outputs.size() && o < ctx.outputs.size(); ++o) {
      for (size_t d = 0; d < rule.outputs[o].size() && d < ctx.outputs[o].shape.size(); ++d) {
        sizes[rule.outputs[o][d]].insert(ctx.outputs[o].shape[d]);
      }
    }
    for (const auto& [l, s] : sizes) {
      if (!MayResize(op, l)) {
        EXPECT_EQ(s.size(), 1u) << "label '" << l << "' names several sizes";
      }
    }
  }
  for (const std::vector<int64_t>& mesh : {std::vector<int64_t>{2, 2}, std::vector<int64_t>{4}}) {
    auto ss = StrategiesFromRule(rule, ctx, mesh);
    ASSERT_TRUE(ss.ok()) << ss.status();
    ASSERT_FALSE(ss->empty());
    EXPECT_EQ((*ss)[0].ToString(), "replicated");
    for (const auto& p : (*ss)[0].outputs) EXPECT_EQ(p, Replicated(static_cast<int>(mesh.size())));
  }
}

// One hand-built node per op (several for some): every registry op must appear here.
std::vector<std::unique_ptr<Node>> HandBuilt() {
  std::vector<std::unique_ptr<Node>> v;
  const TensorType x = F32({2, 3, 4});
  for (const char* op : {"abs", "cos", "exp", "log", "neg", "relu", "rsqrt", "sigmoid", "silu", "sin", "sqrt", "tanh",
                         "gelu", "dropout", "contiguous", "hardswish", "hardsigmoid", "mish", "log1p", "sign"}) {
    v.push_back(Make(op, {x}));
  }
  v.push_back(Make("hardtanh", {x}, Attrs().Float("min_val", 0).Float("max_val", 6)));
  v.push_back(Make("clamp", {x}, Attrs().Float("min", -1)));
  v.push_back(Make("leaky_relu", {x}, Attrs().Float("negative_slope", 0.2)));
  for (const char* op : {"add", "sub", "mul", "div", "pow", "eq", "ne", "lt", "gt", "le", "ge"}) {
    v.push_back(Make(op, {x, F32({3, 1})}));
    v.push_back(Make(op, {x}, Attrs().Float("scalar", 2)));
  }
  v.push_back(Make("masked_fill", {x, Bool({3, 4})}, Attrs().Float("value", 0)));
  v.push_back(Make("masked_fill", {x, Bool({1, 4}), F32({})}));
  v.push_back(Make("where", {Bool({2, 1, 4}), F32({3, 4}), std::nullopt}, Attrs().Float("y_scalar", 0)));
  v.push_back(Make("triu", {F32({2, 4, 4})}));
  v.push_back(Make("collective", {x}, Attrs().Str("kind", "ALL_GATHER").Int("axis", 0).Ints("shape", {4, 3, 4})));
  v.push_back(Make("tril", {F32({4, 4})}, Attrs().Int("diagonal", 1)));
  v.push_back(Make("to", {x}, Attrs().Str("dtype", "bf16")));
  v.push_back(Make("type_as", {x, I64({5})}));
  v.push_back(Make("type_as", {x, I64({3, 4})}));
  v.push_back(Make("mean", {x}, Attrs().Ints("dims", {1}).Bool("keepdim", true)));
  v.push_back(Make("mean", {x}));
  v.push_back(Make("sum", {x}, Attrs().Ints("dims", {0, -1})));
  v.push_back(Make("amax", {x}, Attrs().Ints("dims", {-1}).Bool("keepdim", true)));
  v.push_back(Make("amin", {x}, Attrs().Ints("dims", {0})));
  v.push_back(Make("softmax", {x}, Attrs().Int("dim", -1)));
  v.push_back(Make("log_softmax", {x}, Attrs().Int("dim", 1)));
  v.push_back(Make("layer_norm", {F32({2, 3, 8}), F32({8}), F32({8})}, Attrs().Ints("normalized_shape", {8})));
  v.push_back(Make("layer_norm", {F32({2, 3, 8})}, Attrs().Ints("normalized_shape", {3, 8})));
  v.push_back(Make("rms_norm", {F32({2, 3, 8}), F32({8})}, Attrs().Ints("normalized_shape", {8})));
  const TensorType c3 = F32({3});
  v.push_back(Make("batch_norm", {F32({4, 3, 5, 5}), c3, c3, c3, c3}, Attrs().Bool("training", true)));
  v.push_back(Make("batch_norm", {F32({4, 3}), c3, c3, c3, c3}, Attrs().Bool("training", false)));
  v.push_back(Make("batch_norm", {F32({4, 3, 6}), std::nullopt, std::nullopt}, Attrs().Bool("training", true)));
  v.push_back(Make("batch_norm_stats", {F32({4, 3, 5, 5})}));
  v.push_back(Make("batch_norm_apply", {F32({4, 3, 5, 5}), TensorType{v1::FLOAT64, {2, 3}}, c3, c3},
                   Attrs().Int("count", 100)));
  v.push_back(Make("batch_norm_running_stats", {TensorType{v1::FLOAT64, {2, 3}}, c3, c3}, Attrs().Int("count", 100)));
  v.push_back(Make("linear", {F32({2, 5, 16}), F32({32, 16}), F32({32})}));
  v.push_back(Make("linear", {F32({16}), F32({16})}));
  v.push_back(Make("matmul", {F32({1, 4, 8, 16}), F32({3, 1, 16, 8})}));
  v.push_back(Make("matmul", {F32({16}), F32({2, 16, 8})}));
  v.push_back(Make("matmul", {F32({4, 16}), F32({16})}));
  v.push_back(Make("matmul", {F32({16}), F32({16})}));
  v.push_back(Make("bmm", {F32({2, 4, 8}), F32({2, 8, 6})}));
  v.push_back(Make("addmm", {F32({6}), F32({4, 8}), F32({8, 6})}));
  v.push_back(Make("baddbmm", {F32({2, 1, 6}), F32({2, 4, 8}), F32({2, 8, 6})}));
  v.push_back(Make("embedding", {I64({2, 5}), F32({100, 16})}));
  v.push_back(Make("scaled_dot_product_attention", {F32({2, 8, 16, 32}), F32({2, 8, 16, 32}), F32({2, 8, 16, 32})},
                   Attrs().Bool("is_causal", true)));
  v.push_back(Make("scaled_dot_product_attention",
                   {F32({2, 8, 16, 32}), F32({2, 2, 24, 32}), F32({2, 2, 24, 8}), Bool({1, 16, 24})}));
  v.push_back(Make("scaled_dot_product_attention", {F32({16, 32}), F32({24, 32}), F32({24, 8})}));
  v.push_back(Make("view", {F32({2, 4, 32})}, Attrs().Ints("shape", {2, 4, 4, 8})));
  v.push_back(Make("reshape", {F32({6, 4})}, Attrs().Ints("shape", {4, 1, 6})));
  v.push_back(Make("reshape", {F32({0, 4})}, Attrs().Ints("shape", {4, 0})));
  v.push_back(Make("flatten", {F32({2, 3, 4, 5})}, Attrs().Int("start_dim", 1)));
  v.push_back(Make("transpose", {x}, Attrs().Int("dim0", 0).Int("dim1", 2)));
  v.push_back(Make("permute", {x}, Attrs().Ints("dims", {2, 0, 1})));
  v.push_back(Make("unsqueeze", {x}, Attrs().Int("dim", 1)));
  v.push_back(Make("squeeze", {F32({2, 1, 4})}));
  v.push_back(Make("expand", {F32({3, 1})}, Attrs().Ints("shape", {2, 3, 4})));
  v.push_back(Make("repeat_interleave", {x}, Attrs().Int("repeats", 2).Int("dim", 1)));
  v.push_back(Make("repeat_interleave", {x}, Attrs().Int("repeats", 3)));
  v.push_back(Make("slice", {x}, Attrs().Int("dim", 2).Int("start", 1)));
  v.push_back(Make("slice", {x}, Attrs().Int("dim", 1).Int("end", 3)));
  v.push_back(Make("select", {x}, Attrs().Int("dim", 1).Int("index", 0)));
  v.push_back(Make("split", {F32({2, 10})}, Attrs().Int("split_size", 4).Int("dim", 1)));
  v.push_back(Make("chunk", {F32({6, 4})}, Attrs().Int("chunks", 3)));
  v.push_back(Make("cat", {F32({2, 3}), F32({2, 5}), F32({2, 3})}, Attrs().Int("dim", -1)));
  v.push_back(Make("stack", {x, x}, Attrs().Int("dim", 3)));
  v.push_back(Make("arange", {}, Attrs().Int("end", 16)));
  v.push_back(Make("zeros", {}, Attrs().Ints("shape", {4, 6})));
  v.push_back(Make("ones", {}, Attrs().Ints("shape", {})));
  v.push_back(Make("full", {}, Attrs().Ints("shape", {8}).Float("value", 1.5)));
  v.push_back(Make("bernoulli", {}, Attrs().Ints("shape", {4, 1, 1}).Float("p", 0.9)));
  v.push_back(Make("randn", {}, Attrs().Ints("shape", {4, 6})));
  v.push_back(Make("rand", {}, Attrs().Ints("shape", {8})));
  v.push_back(Make("pad", {F32({2, 4, 6, 6})}, Attrs().Ints("pads", {1, 1, 0, 2})));
  v.push_back(Make("pad", {F32({2, 4, 6})}, Attrs().Ints("pads", {2, 2}).Str("mode", "reflect")));
  v.push_back(Make("roll", {F32({2, 8, 8, 4})}, Attrs().Ints("shifts", {-2, -2}).Ints("dims", {1, 2})));
  v.push_back(Make("roll", {F32({3, 4})}, Attrs().Ints("shifts", {1})));
  v.push_back(Make("index_select", {F32({49, 2}), TensorType{v1::INT64, {256}}}, Attrs().Int("dim", 0)));
  v.push_back(Make("index_select", {F32({4, 6}), TensorType{v1::INT64, {3}}}, Attrs().Int("dim", -1)));
  v.push_back(Make("slice_scatter", {F32({24, 3}), F32({8, 3})}, Attrs().Int("dim", 0).Int("start", 8).Int("end", 16)));
  v.push_back(Make("elu", {F32({2, 3})}, Attrs().Float("alpha", 1)));
  v.push_back(Make("softplus", {F32({2, 3})}));
  v.push_back(Make("glu", {F32({2, 8})}, Attrs().Int("dim", -1)));
  v.push_back(Make("minimum", {F32({2, 3}), F32({3})}));
  v.push_back(Make("maximum", {F32({2, 3}), F32({2, 1})}));
  for (const char* op : {"logical_and", "logical_or", "logical_xor"}) {
    v.push_back(Make(op, {TensorType{v1::BOOL, {4, 6}}, TensorType{v1::BOOL, {6}}}));
  }
  v.push_back(Make("logical_not", {TensorType{v1::BOOL, {4, 6}}}));
  v.push_back(Make("max", {F32({4, 6, 8})}, Attrs().Int("dim", 1)));
  v.push_back(Make("min", {F32({4, 6})}, Attrs().Int("dim", -1).Bool("keepdim", true)));
  v.push_back(Make("argmax", {F32({4, 6})}, Attrs().Int("dim", -1)));
  v.push_back(Make("argmin", {F32({4, 6})}));
  v.push_back(Make("topk", {F32({4, 16, 8})}, Attrs().Int("k", 2)));
  v.push_back(Make("sort", {F32({4, 6})}, Attrs().Int("dim", 0)));
  v.push_back(Make("cumsum", {F32({4, 6})}, Attrs().Int("dim", 1)));
  v.push_back(Make("flip", {F32({4, 6, 2})}, Attrs().Ints("dims", {0, 2})));
  v.push_back(Make("gather", {F32({12, 8}), TensorType{v1::INT64, {30, 8}}}, Attrs().Int("dim", 0)));
  v.push_back(Make("gather", {F32({12, 8}), TensorType{v1::INT64, {12, 3}}}, Attrs().Int("dim", 1)));
  v.push_back(Make("scatter", {F32({4, 6}), TensorType{v1::INT64, {4, 2}}, F32({4, 2})}, Attrs().Int("dim", -1)));
  v.push_back(Make("scatter", {F32({4, 6}), TensorType{v1::INT64, {2, 6}}}, Attrs().Int("dim", 0).Float("value", 1)));
  v.push_back(Make("scatter_add", {F32({12, 16}), TensorType{v1::INT64, {30, 16}}, F32({30, 16})}, Attrs().Int("dim", 0)));
  v.push_back(Make("index_add", {F32({12, 16}), TensorType{v1::INT64, {30}}, F32({30, 16})}, Attrs().Int("dim", 0)));
  v.push_back(Make("one_hot", {TensorType{v1::INT64, {4, 16}}}, Attrs().Int("num_classes", 8)));
  v.push_back(Make("group_norm", {F32({2, 8, 4, 4}), F32({8}), F32({8})}, Attrs().Int("num_groups", 4)));
  v.push_back(Make("conv_transpose2d", {F32({2, 4, 8, 8}), F32({4, 6, 2, 2}), F32({6})}, Attrs().Ints("stride", {2})));
  v.push_back(Make("conv_transpose2d", {F32({2, 4, 8, 8}), F32({4, 3, 3, 3})}, Attrs().Int("groups", 2)));
  v.push_back(Make("upsample", {F32({2, 4, 8, 8})}, Attrs().Ints("output_size", {16, 16})));
  v.push_back(Make("vector_norm", {F32({2, 3, 8})}, Attrs().Ints("dims", {-1}).Bool("keepdim", true)));
  v.push_back(Make("conv2d", {F32({2, 4, 8, 8}), F32({6, 4, 3, 3}), F32({6})}, Attrs().Ints("padding", {1})));
  v.push_back(Make("conv2d", {F32({4, 8, 8}), F32({6, 2, 3, 3})}, Attrs().Int("groups", 2)));
  v.push_back(Make("max_pool2d", {F32({2, 4, 8, 8})}, Attrs().Ints("kernel_size", {2})));
  v.push_back(Make("avg_pool2d", {F32({4, 8, 8})}, Attrs().Ints("kernel_size", {2})));
  v.push_back(Make("adaptive_avg_pool2d", {F32({2, 4, 8, 8})}, Attrs().Ints("output_size", {1})));
  v.push_back(Make("cross_entropy", {F32({8, 10}), I64({8})}));
  v.push_back(Make("cross_entropy", {F32({8, 10, 5}), F32({8, 10, 5}), F32({10})}, Attrs().Str("reduction", "none")));
  v.push_back(Make("cross_entropy", {F32({10}), I64({})}, Attrs().Str("reduction", "sum")));
  v.push_back(Make("nll_loss", {F32({8, 10}), I64({8})}));
  v.push_back(Make("mse_loss", {F32({8, 4}), F32({4})}));
  v.push_back(Make("mse_loss", {F32({8, 4}), F32({8, 1})}, Attrs().Str("reduction", "none")));
  // The generic ATen op: per-sample (cdist's batch shared by both inputs and the output), and
  // replicated (a reduction over the batch).
  {
    GenericNode per_sample;
    per_sample.schema = "aten::cdist";
    per_sample.args = {*GenericArg::Decode("t:0"), *GenericArg::Decode("t:1"), *GenericArg::Decode("f:2"),
                       *GenericArg::Decode("none")};
    per_sample.input_types = {F32({4, 6, 3}), F32({4, 5, 3})};
    per_sample.output_types = {F32({4, 6, 5})};
    per_sample.batch = {4, {0, 0}, {0}};
    per_sample.alias = {-1};
    per_sample.grad = {true};
    v.push_back(Make("aten", {F32({4, 6, 3}), F32({4, 5, 3})}, per_sample.ToAttrs()));
    GenericNode whole = per_sample;
    whole.schema = "aten::logsumexp";
    whole.args = {*GenericArg::Decode("t:0"), *GenericArg::Decode("il:0"), *GenericArg::Decode("b:0")};
    whole.input_types = {F32({4, 6})};
    whole.output_types = {F32({6})};
    whole.batch = {};
    v.push_back(Make("aten", {F32({4, 6})}, whole.ToAttrs()));
  }
  return v;
}

TEST(ShardingRules, EveryRegistryOpHasARuleAndAHandBuiltCase) {
  std::set<std::string> covered;
  for (const auto& n : HandBuilt()) covered.insert(n->op);
  for (const std::string& name : OpRegistry::Global().Names()) {
    EXPECT_TRUE(OpRegistry::Global().Find(name)->sharding) << "op '" << name << "' has no sharding rule";
    EXPECT_TRUE(covered.count(name)) << "add a hand-built '" << name << "' node to HandBuilt()";
  }
}

TEST(ShardingRules, HandBuiltNodesFitTheirRules) {
  for (const auto& n : HandBuilt()) ExpectFits(n->op, RuleOf(*n), *n->ctx, "hand-built");
}

TEST(ShardingRules, ZooGraphsFitTheirRules) {
  const char* specs[] = {
      "gpt2:layers=2,hidden=64,heads=4,vocab=128,seq=16,batch=2",
      "llama2-7b:layers=2,hidden=64,heads=4,kv_heads=2,ffn=96,vocab=128,seq=16,batch=2",
      "resnet50:image=32,classes=10,batch=2",
      "vit-base:layers=2,hidden=64,heads=4,patch=16,image=32,classes=10,batch=2",
      "bert-large:layers=2,hidden=64,heads=4,vocab=128,seq=16,batch=2",
  };
  for (const char* spec : specs) {
    auto proto = BuildZooModel(spec);
    ASSERT_TRUE(proto.ok()) << spec << ": " << proto.status();
    auto g = Graph::Create(*proto);
    ASSERT_TRUE(g.ok()) << g.status();
    for (int i = 0; i < g->num_nodes(); ++i) {
      const v1::Node& node = g->node(i);
      std::vector<const TensorType*> in;
      for (const auto& name : node.inputs()) in.push_back(name.empty() ? nullptr : &g->TypeOf(name));
      std::vector<TensorType> outs;
      for (const auto& name : node.outputs()) outs.push_back(g->TypeOf(name));
      OpContext octx(node.name(), node.op(), in, node.attrs());
      CostContext ctx{octx, outs, {}, {}};
      const OpDef* def = OpRegistry::Global().Find(node.op());
      ASSERT_NE(def, nullptr);
      ASSERT_TRUE(def->sharding) << node.op();
      auto rule = def->sharding(ctx);
      ASSERT_TRUE(rule.ok()) << spec << " " << node.name() << ": " << rule.status();
      ExpectFits(node.op(), *rule, ctx, std::string(spec) + " " + node.name());
    }
  }
}

// Message passing: the edges (index and src/source rows) are a linear reduction into the nodes,
// so a device with a slice of the edges adds its part (Partial) and x counts once; the node
// dimension is read and written anywhere (unsplittable). gather reads x whole along dim.
TEST(ShardingRules, ScattersReduceOverTheEdges) {
  auto sa = Make("scatter_add", {F32({12, 16}), TensorType{v1::INT64, {30, 16}}, F32({30, 16})}, Attrs().Int("dim", 0));
  EXPECT_EQ(RuleOf(*sa).ToString(), "ab,cb,cb->ab; sum c; unsplittable a; addends 0");
  auto ia = Make("index_add", {F32({12, 16}), TensorType{v1::INT64, {30}}, F32({30, 16})}, Attrs().Int("dim", 0));
  EXPECT_EQ(RuleOf(*ia).ToString(), "ab,c,cb->ab; sum c; unsplittable a; addends 0");
  auto sc = Make("scatter", {F32({4, 6}), TensorType{v1::INT64, {4, 2}}, F32({4, 2})}, Attrs().Int("dim", -1));
  EXPECT_EQ(RuleOf(*sc).ToString(), "ab,ac,ac->ab; unsplittable bc");
  auto g = Make("gather", {F32({12, 8}), TensorType{v1::INT64, {30, 8}}}, Attrs().Int("dim", 0));
  EXPECT_EQ(RuleOf(*g).ToString(), "cb,ab->ab; unsplittable c");
}

// x[8,16] @ w[32,16]^T + b[32] on 4 devices: replicated, data parallel (batch), row parallel
// (k: x S(1), w S(1), y Partial, the bias Partial so it is added once), column parallel (n).
TEST(Strategies, LinearOnOneAxis) {
  auto n = Make("linear", {F32({8, 16}), F32({32, 16}), F32({32})});
  EXPECT_EQ(RuleOf(*n).ToString(), "ak,nk,n->an; sum k; addends 2");
  const auto ss = StrategiesOf(*n, {4});
  EXPECT_THAT(Names(ss), ElementsAre("replicated", "a@0", "k@0", "n@0"));
  auto p = Placements(ss);
  EXPECT_EQ(p["replicated"], "R,R,R->R");
  EXPECT_EQ(p["a@0"], "S(0),R,R->S(0)");
  EXPECT_EQ(p["k@0"], "S(1),S(1),P->P");
  EXPECT_EQ(p["n@0"], "R,S(0),S(0)->S(1)");
}

TEST(Strategies, DivisibilityFilters) {
  // 6 output features do not divide over 4 devices: no column split; over 2 they do.
  auto n = Make("linear", {F32({8, 16}), F32({6, 16})});
  EXPECT_THAT(Names(StrategiesOf(*n, {4})), ElementsAre("replicated", "a@0", "k@0"));
  EXPECT_THAT(Names(StrategiesOf(*n, {2})), ElementsAre("replicated", "a@0", "k@0", "n@0"));
  // A 2-axis shard needs the product: 6 splits over [2] but not over [2,2] on both axes.
  EXPECT_THAT(Names(StrategiesOf(*n, {2, 2})), ::testing::Not(::testing::Contains("n@0,1")));
  EXPECT_THAT(Names(StrategiesOf(*n, {2, 2})), ::testing::Contains("a@0,1"));
  // An axis of size 1 splits nothing.
  EXPECT_THAT(Names(StrategiesOf(*n, {1, 2})), ElementsAre("replicated", "a@1", "k@1", "n@1"));
}

TEST(Strategies, TwoAxisShards) {
  auto n = Make("linear", {F32({8, 16}), F32({32, 16}), F32({32})});
  const auto ss = StrategiesOf(*n, {2, 2});
  EXPECT_EQ(ss.size(), 16u);  // {none, a, k, n} on each axis, all divisible
  EXPECT_EQ(ss[0].ToString(), "replicated");
  auto p = Placements(ss);
  EXPECT_EQ(p["n@0,1"], "RR,S(0)S(0),S(0)S(0)->S(1)S(1)");
  EXPECT_EQ(p["k@0,1"], "S(1)S(1),S(1)S(1),PP->PP");
  EXPECT_EQ(p["a@0,1"], "S(0)S(0),RR,RR->S(0)S(0)");
  EXPECT_EQ(p["a@0 n@1"], "S(0)R,RS(0),RS(0)->S(0)S(1)");  // data x tensor parallel
  EXPECT_EQ(p["k@0 n@1"], "S(1)R,S(1)S(0),PS(0)->PS(1)");
}

TEST(Strategies, SoftmaxNeverSplitsItsDim) {
  auto n = Make("softmax", {F32({4, 8, 16})}, Attrs().Int("dim", -1));
  for (const std::vector<int64_t>& mesh : {std::vector<int64_t>{4}, std::vector<int64_t>{2, 2}}) {
    const auto ss = StrategiesOf(*n, mesh);
    EXPECT_GT(ss.size(), 1u);
    for (const auto& s : ss) EXPECT_THAT(s.PlacementsString(), ::testing::Not(HasSubstr("S(2)"))) << s.ToString();
  }
  auto m = Make("softmax", {F32({4, 8, 16})}, Attrs().Int("dim", 0));
  for (const auto& s : StrategiesOf(*m, {4})) EXPECT_THAT(s.PlacementsString(), ::testing::Not(HasSubstr("S(0)")));
}

// [B,T,H*D] -> [B,T,H,D]: splitting H*D is splitting H (its outermost factor), never D.
TEST(Strategies, ReshapeSplitsTheOutermostFactor) {
  auto n = Make("view", {F32({2, 4, 32})}, Attrs().Ints("shape", {2, 4, 4, 8}));
  const ShardingRule rule = RuleOf(*n);
  EXPECT_EQ(rule.inputs[0].substr(0, 3), rule.outputs[0].substr(0, 3));
  EXPECT_TRUE(rule.IsUnsplittable(rule.outputs[0][3]));
  const auto p = Placements(StrategiesOf(*n, {4}));
  std::set<std::string> placements;
  for (const auto& kv : p) placements.insert(kv.second);
  EXPECT_TRUE(placements.count("S(2)->S(2)"));  // H*D split = H split
  for (const auto& kv : p) EXPECT_THAT(kv.second, ::testing::Not(HasSubstr("S(3)")));
  // H = 2 heads do not divide over 4 devices even though H*D = 16 does.
  auto small = Make("view", {F32({2, 4, 16})}, Attrs().Ints("shape", {2, 4, 2, 8}));
  for (const auto& s : StrategiesOf(*small, {4})) EXPECT_THAT(s.PlacementsString(), ::testing::Not(HasSubstr("S(2)")));
  // And back: [B,T,H,D] -> [B,T,H*D] keeps H's label on the merged dimension; D is unsplittable.
  auto merge = Make("reshape", {F32({2, 4, 4, 8})}, Attrs().Ints("shape", {2, 4, 32}));
  const ShardingRule mr = RuleOf(*merge);
  EXPECT_EQ(mr.inputs[0][2], mr.outputs[0][2]);
  EXPECT_TRUE(mr.IsUnsplittable(mr.inputs[0][3]));
  // [B,T,V] -> [B*T,V]: T merges into B, so only B (and V) split.
  EXPECT_EQ(RuleOf(*Make("view", {F32({4, 16, 128})}, Attrs().Ints("shape", {64, 128}))).ToString(),
            "acb->ab; unsplittable c");
  // [6,4] -> [4,6] is one group: the outermost dims share a label, split when n divides both.
  auto swap = Make("reshape", {F32({6, 4})}, Attrs().Ints("shape", {4, 6}));
  EXPECT_EQ(RuleOf(*swap).ToString(), "ab->ac; unsplittable bc");
  EXPECT_THAT(Names(StrategiesOf(*swap, {2})), ElementsAre("replicated", "a@0"));
  EXPECT_THAT(Names(StrategiesOf(*swap, {3})), ElementsAre("replicated"));
}

TEST(Strategies, BroadcastSizeOneDimsHaveTheirOwnUnsplittableLabels) {
  auto n = Make("add", {F32({2, 3, 4}), F32({3, 1})});
  const ShardingRule r = RuleOf(*n);
  EXPECT_EQ(r.inputs[1][0], r.outputs[0][1]);
  EXPECT_NE(r.inputs[1][1], r.outputs[0][2]);
  EXPECT_TRUE(r.IsUnsplittable(r.inputs[1][1]));
  auto p = Placements(StrategiesOf(*n, {2}));
  EXPECT_EQ(p["a@0"], "S(0),R->S(0)");  // the [3,1] operand has no batch: replicated
  EXPECT_EQ(p["c@0"], "S(2),R->S(2)");
  // matmul's broadcast batch dimensions: [1,4,8,16] @ [3,1,16,8].
  auto m = Make("matmul", {F32({1, 4, 8, 16}), F32({3, 1, 16, 8})});
  const ShardingRule mr = RuleOf(*m);
  EXPECT_EQ(mr.outputs[0].size(), 4u);
  EXPECT_TRUE(mr.IsUnsplittable(mr.inputs[0][0]));
  EXPECT_TRUE(mr.IsUnsplittable(mr.inputs[1][1]));
  EXPECT_EQ(mr.inputs[0][1], mr.outputs[0][1]);
  EXPECT_EQ(mr.linear_reduced, "k");
}

TEST(Strategies, Attention) {
  const TensorType q = F32({2, 8, 16, 32});
  // Multi-head, causal: batch, heads and v's columns split; rows do not (the causal mask
  // depends on the global row), nor do s and e (softmax).
  auto mha = Make("scaled_dot_product_attention", {q, q, q}, Attrs().Bool("is_causal", true));
  EXPECT_EQ(RuleOf(*mha).ToString(), "ahle,ahse,ahsf->ahlf; unsplittable sel");
  EXPECT_THAT(Names(StrategiesOf(*mha, {2})), ElementsAre("replicated", "a@0", "h@0", "f@0"));
  auto p = Placements(StrategiesOf(*mha, {2}));
  EXPECT_EQ(p["h@0"], "S(1),S(1),S(1)->S(1)");
  EXPECT_EQ(p["f@0"], "R,R,S(3)->S(3)");
  // Grouped-query (8 query heads, 2 k/v heads) with a mask: the heads split while the k/v
  // heads divide (each device gets one k/v head and the 4 query heads that read it); rows
  // split with the mask's rows.
  auto gqa = Make("scaled_dot_product_attention",
                  {q, F32({2, 2, 24, 32}), F32({2, 2, 24, 8}), Bool({2, 1, 16, 24})});
  EXPECT_EQ(RuleOf(*gqa).ToString(), "ahle,ahse,ahsf,abls->ahlf; unsplittable seb");
  EXPECT_THAT(Names(StrategiesOf(*gqa, {2})), ElementsAre("replicated", "a@0", "h@0", "l@0", "f@0"));
  p = Placements(StrategiesOf(*gqa, {2}));
  EXPECT_EQ(p["h@0"], "S(1),S(1),S(1),R->S(1)");
  EXPECT_EQ(p["l@0"], "S(2),R,R,S(2)->S(2)");
  EXPECT_THAT(Names(StrategiesOf(*gqa, {4})), ::testing::Not(::testing::Contains("h@0")));
}

TEST(Strategies, EmbeddingKeepsTheVocabularyWhole) {
  auto n = Make("embedding", {I64({4, 16}), F32({100, 64})});
  EXPECT_EQ(RuleOf(*n).ToString(), "ab,vd->abd; unsplittable v");
  EXPECT_THAT(Names(StrategiesOf(*n, {4})), ElementsAre("replicated", "a@0", "b@0", "d@0"));
}

TEST(Strategies, NormsAndReductions) {
  auto ln = Make("layer_norm", {F32({4, 8, 16}), F32({16}), F32({16})}, Attrs().Ints("normalized_shape", {16}));
  EXPECT_THAT(Names(StrategiesOf(*ln, {2})), ElementsAre("replicated", "a@0", "b@0"));
  auto bn = Make("batch_norm", {F32({4, 6, 8, 8}), F32({6}), F32({6}), F32({6}), F32({6})},
                 Attrs().Bool("training", true));
  auto p = Placements(StrategiesOf(*bn, {2}));
  EXPECT_EQ(p.size(), 2u);  // channels only
  EXPECT_EQ(p["c@0"], "S(1),S(0),S(0),S(0),S(0)->S(1),S(0),S(0)");
  // Synchronised batch norm: the batch and spatial dims of the sums split into summands (P),
  // which an all-reduce completes; the normalisation splits every dimension of x.
  auto stats = Make("batch_norm_stats", {F32({4, 6, 8, 8})});
  EXPECT_EQ(RuleOf(*stats).ToString(), "ncab->sc; sum nab; unsplittable s");
  p = Placements(StrategiesOf(*stats, {2}));
  EXPECT_EQ(p["n@0"], "S(0)->P");
  EXPECT_EQ(p["c@0"], "S(1)->S(1)");
  auto apply = Make("batch_norm_apply", {F32({4, 6, 8, 8}), TensorType{v1::FLOAT64, {2, 6}}, F32({6}), F32({6})},
                    Attrs().Int("count", 256));
  p = Placements(StrategiesOf(*apply, {2}));
  EXPECT_EQ(p["n@0"], "S(0),R,R,R->S(0)");
  EXPECT_EQ(p["c@0"], "S(1),S(1),S(0),S(0)->S(1)");
  // Over groups of samples: a batch split in whole groups keeps each device's groups (no
  // summands, no all-reduce); the running statistics need every group.
  auto grouped = Make("batch_norm_stats", {F32({4, 6, 8, 8})}, Attrs().Int("group_size", 2));
  EXPECT_EQ(RuleOf(*grouped).ToString(), "ncab->nsc; sum ab; unsplittable s");
  EXPECT_EQ(Placements(StrategiesOf(*grouped, {2}))["n@0"], "S(0)->S(0)");
  EXPECT_EQ(Placements(StrategiesOf(*grouped, {4})).count("n@0"), 0u);  // 4 devices, 2 groups
  auto grouped_apply = Make("batch_norm_apply", {F32({4, 6, 8, 8}), TensorType{v1::FLOAT64, {2, 2, 6}}, F32({6}), F32({6})},
                            Attrs().Int("count", 128));
  EXPECT_EQ(Placements(StrategiesOf(*grouped_apply, {2}))["n@0"], "S(0),S(0),R,R->S(0)");
  auto grouped_running = Make("batch_norm_running_stats", {TensorType{v1::FLOAT64, {2, 2, 6}}, F32({6}), F32({6})},
                              Attrs().Int("count", 256));
  EXPECT_EQ(Placements(StrategiesOf(*grouped_running, {2})).count("g@0"), 0u);
  auto sum = Make("sum", {F32({4, 6})}, Attrs().Ints("dims", {1}));
  p = Placements(StrategiesOf(*sum, {2}));
  EXPECT_EQ(p["b@0"], "S(1)->P");
  auto amax = Make("amax", {F32({4, 6})}, Attrs().Ints("dims", {1}));
  EXPECT_THAT(Names(StrategiesOf(*amax, {2})), ElementsAre("replicated", "a@0"));
}

TEST(Strategies, ConvolutionAndLosses) {
  auto conv = Make("conv2d", {F32({2, 4, 8, 8}), F32({6, 4, 3, 3}), F32({6})});
  EXPECT_EQ(RuleOf(*conv).ToString(), "nchw,ocij,o->noyx; sum c; unsplittable hwijyx; addends 2");
  auto p = Placements(StrategiesOf(*conv, {2}));
  EXPECT_EQ(p["c@0"], "S(1),S(1),P->P");
  EXPECT_EQ(p["o@0"], "R,S(0),S(0)->S(1)");
  EXPECT_EQ(p.count("h@0"), 0u);
  // Data-parallel loss: the batch is summed, the scalar loss Partial; classes stay whole.
  auto ce = Make("cross_entropy", {F32({8, 10}), I64({8})});
  EXPECT_EQ(RuleOf(*ce).ToString(), "nc,n->; sum n; unsplittable c");
  p = Placements(StrategiesOf(*ce, {4}));
  EXPECT_EQ(p.size(), 2u);
  EXPECT_EQ(p["n@0"], "S(0),S(0)->P");
}

TEST(Strategies, Errors) {
  auto n = Make("relu", {F32({4})});
  EXPECT_EQ(GenerateStrategies(*OpRegistry::Global().Find("relu"), *n->ctx, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GenerateStrategies(*OpRegistry::Global().Find("relu"), *n->ctx, {2, 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  OpDef bare = *OpRegistry::Global().Find("relu");
  bare.sharding = nullptr;
  auto s = GenerateStrategies(bare, *n->ctx, {2});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(s.status().message(), HasSubstr("relu"));
  // A rule that does not fit the node is INTERNAL and names the node.
  ShardingRule wrong;
  wrong.inputs = {"ab"};
  wrong.outputs = {"a"};
  auto w = StrategiesFromRule(wrong, *n->ctx, {2});
  EXPECT_EQ(w.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(w.status().message(), HasSubstr("node 'n'"));
}

}  // namespace
}  // namespace mapd

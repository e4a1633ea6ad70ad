// The execution table: one entry per registry op, and every op runs — forward with the types
// the registry inferred (the executor checks each output), and backward where it has a
// gradient — on single-node graphs. Semantics that are easy to get wrong are checked against
// direct LibTorch computations.
#include "worker/runtime/exec_table.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>

#include "model/graph/builder.h"
#include "model/import/input_spec.h"
#include "model/ops/generic_op.h"
#include "model/ops/registry.h"
#include "worker/runtime/executor.h"

namespace mapd {
namespace {

using ::testing::HasSubstr;

TEST(ExecTableTest, EveryRegistryOpHasAnEntryAndNoOther) {
  const ExecTable& table = ExecTable::Global();
  std::set<std::string> registry;
  for (const std::string& op : OpRegistry::Global().Names()) {
    registry.insert(op);
    const ExecEntry* e = table.Find(op);
    ASSERT_NE(e, nullptr) << "no execution entry for registry op '" << op << "'";
    EXPECT_TRUE(static_cast<bool>(e->fn)) << op;
    EXPECT_FALSE(e->saved.empty()) << op << ": say what autograd saves";
  }
  for (const std::string& op : table.Names()) EXPECT_TRUE(registry.count(op)) << "'" << op << "' is not a registry op";
  EXPECT_EQ(table.Names().size(), registry.size());
}

// One input of a single-node test graph: "p:f32[2,3]" a trainable parameter (normal init),
// "x:f32[2,3]" a float data input, "i7:i64[2,3]" integers in [0, 7), "b:bool[2,3]" booleans,
// "" an absent optional input.
struct OpCase {
  std::string op;
  std::vector<std::string> inputs;
  Attrs attrs;
  std::string label;
};

struct Built {
  v1::Graph graph;
  TensorMap feed;
};

Built BuildCase(const OpCase& c, at::Generator& gen) {
  GraphBuilder b("op_" + c.op);
  Built out;
  std::vector<std::string> names;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const std::string& in = c.inputs[i];
    if (in.empty()) {
      names.push_back("");
      continue;
    }
    const size_t colon = in.find(':');
    const std::string kind = in.substr(0, colon);
    const std::string name = "in" + std::to_string(i);
    auto spec = ParseInputSpec(name + in.substr(colon));
    EXPECT_TRUE(spec.ok()) << spec.status();
    const TensorType type = spec->type;
    if (kind == "p") {
      v1::InitRule init;
      init.set_kind(v1::InitRule::NORMAL);
      init.set_std(1.0);
      names.push_back(b.Param(name, type, init));
      continue;
    }
    names.push_back(b.Input(name, type));
    const auto opts = at::TensorOptions().dtype(at::kLong);
    if (kind == "x") {
      out.feed[name] = at::randn(type.shape, gen, at::TensorOptions().dtype(at::kFloat)).to(ToScalarType(type.dtype));
    } else if (kind == "b") {
      out.feed[name] = at::randint(0, 2, type.shape, gen, opts).to(at::kBool);
    } else {
      const int64_t bound = std::stoll(kind.substr(1));
      out.feed[name] = at::randint(0, bound, type.shape, gen, opts).to(ToScalarType(type.dtype));
    }
  }
  for (const std::string& o : b.Node(c.op, names, c.attrs)) b.Output(o);
  auto g = b.Build();
  EXPECT_TRUE(g.ok()) << c.op << " " << c.label << ": " << g.status();
  if (g.ok()) out.graph = *g;
  return out;
}

// The generic op as the importer writes it: logsumexp over dimension 1, per-sample.
Attrs GenericLogsumexp() {
  GenericNode g;
  g.schema = "aten::logsumexp";
  g.args = {*GenericArg::Decode("t:0"), *GenericArg::Decode("il:1"), *GenericArg::Decode("b:0")};
  g.input_types = {{v1::FLOAT32, {2, 3}}};
  g.output_types = {{v1::FLOAT32, {2}}};
  g.batch = {2, {0}, {0}};
  g.alias = {-1};
  g.grad = {true};
  g.saved_inputs = {0};
  g.saved_outputs = {0};
  return g.ToAttrs();
}

std::vector<OpCase> Cases() {
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  return {
      {"abs", {"p:f32[2,3]"}, {}},
      {"adaptive_avg_pool2d", {"p:f32[2,3,8,8]"}, Attrs().Ints("output_size", {2, 3})},
      {"adaptive_avg_pool2d", {"p:f32[2,3,8,8]"}, Attrs().Ints("output_size", {1}), "1x1"},
      {"add", {"p:f32[2,3]", "p:f32[3]"}, Attrs().Float("alpha", 2.0)},
      {"add", {"p:f32[2,3]"}, Attrs().Int("scalar", 2).Bool("reverse", true).Float("alpha", 3.0), "scalar"},
      {"add", {"i5:i64[4]"}, Attrs().Float("scalar", 0.5), "int+float scalar"},
      {"addmm", {"p:f32[4]", "p:f32[2,3]", "p:f32[3,4]"}, Attrs().Float("beta", 0.5).Float("alpha", 2.0)},
      {"amax", {"p:f32[2,3,4]"}, Attrs().Ints("dims", {1}).Bool("keepdim", true)},
      {"amin", {"p:f32[2,3]"}, {}},
      {"arange", {}, Attrs().Int("end", 5)},
      {"arange", {}, Attrs().Float("start", 1.0).Float("end", 3.0).Float("step", 0.5), "float"},
      {"avg_pool2d", {"p:f32[1,2,6,6]"}, Attrs().Ints("kernel_size", {2}).Ints("stride", {2})},
      {"avg_pool2d", {"p:f32[1,2,6,6]"},
       Attrs().Ints("kernel_size", {3}).Ints("padding", {1}).Bool("count_include_pad", false)
           .Int("divisor_override", 4), "options"},
      {"baddbmm", {"p:f32[2,3,4]", "p:f32[2,3,5]", "p:f32[2,5,4]"}, {}},
      {"batch_norm", {"p:f32[4,3,5]", "p:f32[3]", "p:f32[3]", "x:f32[3]", "x:f32[3]"},
       Attrs().Bool("training", true).Float("momentum", 0.2)},
      {"batch_norm", {"p:f32[4,3,5]", "p:f32[3]", "p:f32[3]", "x:f32[3]", "x:f32[3]"},
       Attrs().Bool("training", false), "eval"},
      {"batch_norm", {"p:f32[4,3]"}, Attrs().Bool("training", true), "no stats"},
      {"batch_norm_stats", {"p:f32[4,3,5]"}, {}},
      {"batch_norm_apply", {"p:f32[4,3,5]", "p:f64[2,3]", "p:f32[3]", "p:f32[3]"}, Attrs().Int("count", 20)},
      {"batch_norm_apply", {"p:f32[4,3]", "p:f64[2,3]"}, Attrs().Int("count", 4), "no affine"},
      {"batch_norm_running_stats", {"p:f64[2,3]", "x:f32[3]", "x:f32[3]"}, Attrs().Int("count", 20).Float("momentum", 0.2)},
      {"batch_norm_stats", {"p:f32[4,3,5]"}, Attrs().Int("group_size", 2), "two groups"},
      {"batch_norm_apply", {"p:f32[4,3,5]", "p:f64[2,2,3]", "p:f32[3]", "p:f32[3]"}, Attrs().Int("count", 10), "two groups"},
      {"batch_norm_running_stats", {"p:f64[2,2,3]", "x:f32[3]", "x:f32[3]"}, Attrs().Int("count", 20).Float("momentum", 0.2),
       "two groups"},
      {"bmm", {"p:f32[2,3,4]", "p:f32[2,4,5]"}, {}},
      {"cat", {"p:f32[2,3]", "p:f32[2,4]"}, Attrs().Int("dim", 1)},
      {"chunk", {"p:f32[5,2]"}, Attrs().Int("chunks", 2)},
      {"contiguous", {"p:f32[2,3]"}, {}},
      {"conv2d", {"p:f32[1,4,8,8]", "p:f32[6,2,3,3]", "p:f32[6]"},
       Attrs().Ints("stride", {2}).Ints("padding", {1}).Ints("dilation", {1}).Int("groups", 2)},
      {"cos", {"p:f32[3]"}, {}},
      {"cross_entropy", {"p:f32[4,5]", "i5:i64[4]"}, Attrs().Float("label_smoothing", 0.1)},
      {"cross_entropy", {"p:f32[2,5,3]", "i5:i64[2,3]", "x:f32[5]"},
       Attrs().Str("reduction", "none").Int("ignore_index", 1), "weighted"},
      {"cross_entropy", {"p:f32[4,5]", "x:f32[4,5]"}, Attrs().Str("reduction", "sum"), "probabilities"},
      {"div", {"p:f32[2,3]", "p:f32[2,3]"}, {}},
      {"div", {"p:f32[2,3]"}, Attrs().Float("scalar", 2.0).Bool("reverse", true), "reverse"},
      {"div", {"i9:i64[5]"}, Attrs().Int("scalar", 2).Str("rounding_mode", "floor"), "floor"},
      {"div", {"i9:i64[5]"}, Attrs().Int("scalar", 2), "int true division"},
      {"dropout", {"p:f32[10,10]"}, Attrs().Float("p", 0.5).Bool("train", true)},
      {"embedding", {"i7:i64[2,3]", "p:f32[7,4]"}, Attrs().Int("padding_idx", 0)},
      {"eq", {"p:f32[2,3]"}, Attrs().Float("scalar", 0.0)},
      {"ne", {"p:f32[2,3]", "p:f32[3]"}, {}},
      {"lt", {"p:f32[2,3]"}, Attrs().Int("scalar", 0)},
      {"gt", {"i3:i64[4]"}, Attrs().Int("scalar", 1)},
      {"le", {"p:f32[2,3]", "p:f32[2,3]"}, {}},
      {"ge", {"p:f32[2,3]"}, Attrs().Float("scalar", 0.5)},
      {"exp", {"p:f32[3]"}, {}},
      {"expand", {"p:f32[3,1]"}, Attrs().Ints("shape", {2, 3, 4})},
      {"flatten", {"p:f32[2,3,4]"}, Attrs().Int("start_dim", 1)},
      {"full", {}, Attrs().Ints("shape", {2, 2}).Int("value", 3)},
      {"bernoulli", {}, Attrs().Ints("shape", {2, 3}).Float("p", 0.5)},
      {"randn", {}, Attrs().Ints("shape", {2, 3})},
      {"rand", {}, Attrs().Ints("shape", {4}).Str("dtype", "f64"), "f64"},
      {"pad", {"p:f32[2,3,4]"}, Attrs().Ints("pads", {1, 2, 0, 1}).Float("value", -1.5)},
      {"pad", {"p:f32[2,3,4]"}, Attrs().Ints("pads", {2, 1}).Str("mode", "reflect"), "reflect"},
      {"pad", {"p:f32[1,2,3,4]"}, Attrs().Ints("pads", {1, 1, 2, 0}).Str("mode", "replicate"), "replicate"},
      {"roll", {"p:f32[3,4,5]"}, Attrs().Ints("shifts", {-1, 2}).Ints("dims", {1, 2})},
      {"roll", {"p:f32[3,4]"}, Attrs().Ints("shifts", {5}), "flattened"},
      {"index_select", {"p:f32[5,3]", "i5:i64[7]"}, Attrs().Int("dim", 0)},
      {"elu", {"p:f32[3,4]"}, Attrs().Float("alpha", 0.5).Float("scale", 1.5).Float("input_scale", 2)},
      {"softplus", {"p:f32[3,4]"}, Attrs().Float("beta", 2).Float("threshold", 1)},
      {"glu", {"p:f32[3,4]"}, Attrs().Int("dim", 1)},
      {"minimum", {"p:f32[2,3]", "p:f32[3]"}, {}},
      {"maximum", {"p:f32[2,3]", "x:f32[2,1]"}, {}},
      {"logical_and", {"b:bool[2,3]", "b:bool[3]"}, {}},
      {"logical_or", {"b:bool[2,3]", "i3:i64[2,3]"}, {}},
      {"logical_xor", {"b:bool[2,3]", "b:bool[2,3]"}, {}},
      {"logical_not", {"x:f32[2,3]"}, {}},
      {"max", {"p:f32[3,4]"}, Attrs().Int("dim", -1).Bool("keepdim", true)},
      {"min", {"p:f32[3,4]"}, Attrs().Int("dim", 0)},
      {"argmax", {"p:f32[3,4]"}, Attrs().Int("dim", 1)},
      {"argmin", {"p:f32[3,4]"}, Attrs().Bool("keepdim", true), "flattened"},
      {"topk", {"p:f32[3,5]"}, Attrs().Int("k", 2).Int("dim", -1).Bool("largest", false)},
      {"sort", {"p:f32[3,5]"}, Attrs().Int("dim", 0).Bool("descending", true)},
      {"cumsum", {"p:f32[3,5]"}, Attrs().Int("dim", 1)},
      {"cumsum", {"b:bool[4]"}, Attrs().Int("dim", 0), "bool to i64"},
      {"flip", {"p:f32[2,3,4]"}, Attrs().Ints("dims", {0, -1})},
      {"gather", {"p:f32[4,3]", "i4:i64[6,2]"}, Attrs().Int("dim", 0)},
      {"scatter", {"p:f32[4,3]", "i4:i64[2,3]", "p:f32[2,3]"}, Attrs().Int("dim", 0)},
      {"scatter", {"p:f32[4,3]", "i3:i64[4,2]"}, Attrs().Int("dim", 1).Float("value", 2.5), "value"},
      {"scatter_add", {"p:f32[4,3]", "i4:i64[5,3]", "p:f32[5,3]"}, Attrs().Int("dim", 0)},
      {"index_add", {"p:f32[4,3]", "i4:i64[6]", "p:f32[6,3]"}, Attrs().Int("dim", 0).Float("alpha", 0.5)},
      {"one_hot", {"i5:i64[2,3]"}, Attrs().Int("num_classes", 5)},
      {"group_norm", {"p:f32[2,4,3,3]", "p:f32[4]", "p:f32[4]"}, Attrs().Int("num_groups", 2)},
      {"group_norm", {"p:f32[2,6,5]"}, Attrs().Int("num_groups", 6).Float("eps", 1e-3), "instance, no affine"},
      {"conv_transpose2d", {"p:f32[2,4,3,3]", "p:f32[4,3,2,2]", "p:f32[3]"}, Attrs().Ints("stride", {2})},
      {"conv_transpose2d", {"p:f32[1,4,5,5]", "p:f32[4,1,3,3]"},
       Attrs().Ints("stride", {2}).Ints("padding", {1}).Ints("output_padding", {1}).Int("groups", 2), "grouped"},
      {"upsample", {"p:f32[1,2,3,4]"}, Attrs().Ints("output_size", {6, 8}).Float("scale_h", 2).Float("scale_w", 2)},
      {"upsample", {"p:f32[1,2,3,4]"}, Attrs().Ints("output_size", {5, 7}).Str("mode", "bilinear").Bool("align_corners", true),
       "bilinear"},
      {"slice_scatter", {"p:f32[6,3]", "p:f32[2,3]"}, Attrs().Int("dim", 0).Int("start", 1).Int("end", 5).Int("step", 2)},
      {"vector_norm", {"p:f32[2,3,4]"}, Attrs().Ints("dims", {-1}).Bool("keepdim", true)},
      {"vector_norm", {"p:f32[2,3]"}, Attrs().Float("ord", 1), "ord 1, all dims"},
      {"full", {}, Attrs().Ints("shape", {2}).Float("value", 1.5).Str("dtype", "f64"), "f64"},
      {"gelu", {"p:f32[3,4]"}, Attrs().Str("approximate", "tanh")},
      {"gelu", {"p:f32[3,4]"}, {}, "erf"},
      {"hardtanh", {"p:f32[3,4]"}, Attrs().Float("min_val", 0).Float("max_val", 6)},
      {"clamp", {"p:f32[3,4]"}, Attrs().Float("min", -0.5).Float("max", 0.5)},
      {"clamp", {"p:f32[3,4]"}, Attrs().Float("min", -0.5), "min only"},
      {"leaky_relu", {"p:f32[3,4]"}, Attrs().Float("negative_slope", 0.2)},
      {"hardswish", {"p:f32[3,4]"}},
      {"hardsigmoid", {"p:f32[3,4]"}},
      {"mish", {"p:f32[3,4]"}},
      {"log1p", {"p:f32[3,4]"}},
      {"sign", {"p:f32[3,4]"}},
      {"layer_norm", {"p:f32[2,3,4]", "p:f32[4]", "p:f32[4]"}, Attrs().Ints("normalized_shape", {4})},
      {"layer_norm", {"p:f32[2,3,4]"}, Attrs().Ints("normalized_shape", {3, 4}).Float("eps", 1e-3), "no affine"},
      {"linear", {"p:f32[2,3,4]", "p:f32[5,4]", "p:f32[5]"}, {}},
      {"linear", {"p:f32[4]", "p:f32[5,4]"}, {}, "1-D"},
      {"log", {"p:f32[3]"}, {}},
      {"log_softmax", {"p:f32[2,5]"}, Attrs().Int("dim", -1)},
      {"masked_fill", {"p:f32[2,3]", "b:bool[3]"}, Attrs().Float("value", -1.0)},
      {"masked_fill", {"p:f32[2,3]", "b:bool[2,3]", "x:f32[]"}, {}, "tensor value"},
      {"matmul", {"p:f32[2,3,4]", "p:f32[4,5]"}, {}},
      {"matmul", {"p:f32[4]", "p:f32[2,4,5]"}, {}, "1-D @ batched"},
      {"max_pool2d", {"p:f32[1,2,8,8]"},
       Attrs().Ints("kernel_size", {3}).Ints("stride", {2}).Ints("padding", {1}).Bool("ceil_mode", true)},
      {"mean", {"p:f32[2,3]"}, Attrs().Ints("dims", {-1}).Bool("keepdim", true)},
      {"mean", {"i5:i64[2,3]"}, Attrs().Str("dtype", "f32"), "int with dtype"},
      {"mse_loss", {"p:f32[2,3]", "x:f32[2,3]"}, {}},
      {"mul", {"p:f32[2,3]", "p:f32[2,3]"}, {}},
      {"mul", {"p:f32[2,3]"}, Attrs().Int("scalar", 2), "scalar"},
      {"neg", {"p:f32[3]"}, {}},
      {"nll_loss", {"p:f32[4,5]", "i5:i64[4]"}, Attrs().Str("reduction", "sum")},
      {"ones", {}, Attrs().Ints("shape", {3}).Str("dtype", "i64")},
      {"permute", {"p:f32[2,3,4]"}, Attrs().Ints("dims", {2, 0, 1})},
      {"pow", {"p:f32[2,3]"}, Attrs().Int("scalar", 2)},
      {"pow", {"p:f32[2,3]"}, Attrs().Float("scalar", 2.0).Bool("reverse", true), "reverse"},
      {"pow", {"p:f32[2,3]", "p:f32[3]"}, {}, "tensor"},
      {"relu", {"p:f32[3]"}, {}},
      {"repeat_interleave", {"p:f32[2,3]"}, Attrs().Int("repeats", 2).Int("dim", -1)},
      {"repeat_interleave", {"p:f32[2,3]"}, Attrs().Int("repeats", 2), "flat"},
      {"reshape", {"p:f32[2,6]"}, Attrs().Ints("shape", {3, -1})},
      {"rms_norm", {"p:f32[2,4]", "p:f32[4]"}, Attrs().Ints("normalized_shape", {4}).Float("eps", 1e-6)},
      {"rsqrt", {"p:f32[3]"}, {}},
      {"scaled_dot_product_attention", {"p:f32[2,4,5,8]", "p:f32[2,2,6,8]", "p:f32[2,2,6,8]"},
       Attrs().Bool("is_causal", true)},
      {"scaled_dot_product_attention", {"p:f32[2,4,5,8]", "p:f32[2,4,6,8]", "p:f32[2,4,6,8]", "b:bool[5,6]"},
       Attrs().Float("scale", 0.5).Float("dropout_p", 0.1), "bool mask, dropout"},
      {"scaled_dot_product_attention", {"p:f32[3,5,8]", "p:f32[3,6,8]", "p:f32[3,6,4]", "x:f32[3,5,6]"}, {},
       "float mask"},
      {"select", {"p:f32[2,3]"}, Attrs().Int("dim", 1).Int("index", -1)},
      {"sigmoid", {"p:f32[3]"}, {}},
      {"silu", {"p:f32[3]"}, {}},
      {"sin", {"p:f32[3]"}, {}},
      {"slice", {"p:f32[4,6]"}, Attrs().Int("dim", 1).Int("start", 1).Int("end", kMax).Int("step", 2)},
      {"slice", {"p:f32[4,6]"}, Attrs().Int("dim", -2).Int("start", -3).Int("end", -1), "negative"},
      {"softmax", {"p:f32[2,5]"}, Attrs().Int("dim", 0).Str("dtype", "f64")},
      {"split", {"p:f32[5,2]"}, Attrs().Int("split_size", 2)},
      {"split", {"p:f32[5,2]"}, Attrs().Ints("sizes", {1, 4}), "sizes"},
      {"sqrt", {"p:f32[3]"}, {}},
      {"squeeze", {"p:f32[1,3,1]"}, Attrs().Ints("dims", {0, 1})},
      {"squeeze", {"p:f32[1,3,1]"}, {}, "all"},
      {"stack", {"p:f32[2,3]", "p:f32[2,3]"}, Attrs().Int("dim", 2)},
      {"sub", {"p:f32[2,3]", "p:f32[2,3]"}, Attrs().Float("alpha", 0.5)},
      {"sub", {"p:f32[2,3]"}, Attrs().Int("scalar", 1).Bool("reverse", true).Int("alpha", 2), "reverse"},
      {"sum", {"p:f32[2,3]"}, {}},
      {"sum", {"b:bool[2,3]"}, Attrs().Ints("dims", {1}), "bool"},
      {"tanh", {"p:f32[3]"}, {}},
      {"to", {"p:f32[3]"}, Attrs().Str("dtype", "f64")},
      {"to", {"p:f32[3]"}, Attrs().Str("dtype", "bf16"), "bf16"},
      {"transpose", {"p:f32[2,3]"}, Attrs().Int("dim0", 0).Int("dim1", 1)},
      {"transpose", {"p:f32[3]"}, {}, "1-D"},
      {"tril", {"p:f32[3,3]"}, Attrs().Int("diagonal", 1)},
      {"triu", {"p:f32[3,3]"}, Attrs().Int("diagonal", -1)},
      {"type_as", {"p:f32[3]", "x:f64[2]"}, {}},
      {"unsqueeze", {"p:f32[2,3]"}, Attrs().Int("dim", -1)},
      {"view", {"p:f32[2,6]"}, Attrs().Ints("shape", {3, 4})},
      {"where", {"b:bool[2,3]", "p:f32[2,3]", "p:f32[3]"}, {}},
      {"where", {"b:bool[2,3]", "p:f32[2,3]"}, Attrs().Float("y_scalar", 0.0), "y scalar"},
      {"where", {"b:bool[2,3]"}, Attrs().Int("x_scalar", 1).Float("y_scalar", 0.5), "both scalars"},
      {"zeros", {}, Attrs().Ints("shape", {2}).Str("dtype", "bool")},
      {"aten", {"p:f32[2,3]"}, GenericLogsumexp(), "logsumexp by its schema"},
  };
}

TEST(ExecTableTest, EveryOpRunsForwardAndBackwardWithTheInferredTypes) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(7);
  std::set<std::string> covered;
  for (const OpCase& c : Cases()) {
    SCOPED_TRACE(c.op + " " + c.label);
    Built built = BuildCase(c, gen);
    if (built.graph.nodes_size() == 0) continue;
    auto ex = Executor::Create(built.graph, {});
    ASSERT_TRUE(ex.ok()) << ex.status();
    auto result = (*ex)->Run(built.feed, RunMode::kTrain);
    ASSERT_TRUE(result.ok()) << result.status();  // outputs were checked against the IR types
    at::Tensor total;
    for (const at::Tensor& out : result->outputs) {
      if (!out.requires_grad()) continue;
      at::Tensor s = out.to(at::kDouble).sum();
      total = total.defined() ? total + s : s;
    }
    if (total.defined()) {
      ASSERT_NO_THROW(total.backward());
      bool some_grad = false;
      for (const auto& [name, p] : (*ex)->parameters().Trainable()) some_grad |= p.grad().defined();
      EXPECT_TRUE(some_grad);
    }
    // Evaluation runs too (no autograd, no dropout).
    auto eval = (*ex)->Run(built.feed, RunMode::kEval);
    ASSERT_TRUE(eval.ok()) << eval.status();
    covered.insert(c.op);
  }
  // "collective" runs only in the distributed runtime (worker/rank; tests/rank), never here.
  covered.insert("collective");
  for (const std::string& op : OpRegistry::Global().Names()) EXPECT_TRUE(covered.count(op)) << "no case for " << op;
}

// GELU's gradient through a transpose equals the one through a contiguous copy (LibTorch 1.13's
// erf-GELU backward alone gives garbage for the transposed gradient; the entry corrects it).
TEST(ExecTableTest, GeluGradientThroughATransposeIsRight) {
  GraphBuilder b("gelu_t");
  v1::InitRule init;
  init.set_kind(v1::InitRule::NORMAL);
  init.set_std(1.0);
  const std::string x = b.Param("x", {v1::FLOAT32, {2, 8, 20}}, init);
  const std::string y = b.Node("gelu", {x}, Attrs().Str("approximate", "none"))[0];
  b.Output(b.Node("transpose", {y}, Attrs().Int("dim0", 1).Int("dim1", 2))[0]);
  auto g = b.Build();
  ASSERT_TRUE(g.ok()) << g.status();
  auto ex = Executor::Create(*g, {});
  ASSERT_TRUE(ex.ok()) << ex.status();
  const at::Tensor weight = at::randn({2, 20, 8}, at::make_generator<at::CPUGeneratorImpl>(3));
  auto out = (*ex)->Run({}, RunMode::kTrain);
  ASSERT_TRUE(out.ok()) << out.status();
  (out->outputs[0] * weight).sum().backward();
  const at::Tensor& p = *(*ex)->parameters().Find("x");
  const at::Tensor want = at::gelu_backward(weight.transpose(1, 2).contiguous(), p.detach(), "none");
  EXPECT_TRUE(at::allclose(p.grad(), want, 1e-6, 1e-6));
}

// Runs a single node on given tensors (all graph inputs, no parameters) and returns output 0.
at::Tensor RunOne(const std::string& op, const std::vector<at::Tensor>& ins, const Attrs& attrs, int output = 0,
                  RunMode mode = RunMode::kEval) {
  GraphBuilder b("one");
  std::vector<std::string> names;
  TensorMap feed;
  for (size_t i = 0; i < ins.size(); ++i) {
    const std::string name = "in" + std::to_string(i);
    const at::Tensor& t = ins[i];
    b.Input(name, TensorType{FromScalarType(t.scalar_type()), Shape(t.sizes().begin(), t.sizes().end())});
    names.push_back(name);
    feed[name] = t;
  }
  for (const std::string& o : b.Node(op, names, attrs)) b.Output(o);
  auto g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status();
  auto ex = Executor::Create(*g, {});
  EXPECT_TRUE(ex.ok()) << ex.status();
  auto r = (*ex)->Run(feed, mode);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? r->outputs.at(output) : at::Tensor();
}

TEST(ExecTableTest, SemanticsMatchPyTorch) {
  at::manual_seed(3);
  const at::Tensor x = at::randn({4, 6});
  EXPECT_TRUE(at::equal(RunOne("slice", {x}, Attrs().Int("dim", 1).Int("start", 1).Int("end", INT64_MAX).Int("step", 2)),
                        x.slice(1, 1, 6, 2)));
  EXPECT_TRUE(at::equal(RunOne("slice", {x}, Attrs().Int("dim", 0).Int("start", -3).Int("end", -1)), x.slice(0, 1, 3)));
  EXPECT_TRUE(at::allclose(RunOne("sub", {x}, Attrs().Int("scalar", 1).Bool("reverse", true).Float("alpha", 2.0)),
                           1 - 2 * x));
  EXPECT_TRUE(at::allclose(RunOne("add", {x}, Attrs().Int("scalar", 1).Bool("reverse", true).Float("alpha", 2.0)),
                           1 + 2 * x));
  EXPECT_TRUE(at::allclose(RunOne("div", {x}, Attrs().Float("scalar", 3.0).Bool("reverse", true)), 3.0 / x));
  EXPECT_TRUE(at::allclose(RunOne("pow", {x}, Attrs().Float("scalar", 2.0).Bool("reverse", true)), at::pow(2.0, x)));
  const at::Tensor ints = at::arange(-4, 5);
  EXPECT_TRUE(at::equal(RunOne("div", {ints}, Attrs().Int("scalar", 3).Str("rounding_mode", "floor")),
                        at::div(ints, 3, "floor")));
  const at::Tensor mask = x > 0;
  EXPECT_TRUE(at::equal(RunOne("where", {mask}, Attrs().Int("x_scalar", 1).Float("y_scalar", 0.5)),
                        at::where(mask, at::full({4, 6}, 1.0), at::full({4, 6}, 0.5))));
  EXPECT_TRUE(at::equal(RunOne("masked_fill", {x, mask, at::scalar_tensor(7.0)}, {}), x.masked_fill(mask, 7.0)));
  // rms_norm: x * rsqrt(mean(x^2) + eps) * w.
  const at::Tensor w = at::randn({6});
  EXPECT_TRUE(at::allclose(RunOne("rms_norm", {x, w}, Attrs().Ints("normalized_shape", {6}).Float("eps", 1e-6)),
                           x * at::rsqrt(x.pow(2).mean(std::vector<int64_t>{-1}, true) + 1e-6) * w));
  // sdpa with grouped-query heads and a causal mask = the composite written out.
  const at::Tensor q = at::randn({2, 4, 5, 8}), k = at::randn({2, 2, 5, 8}), v = at::randn({2, 2, 5, 8});
  const at::Tensor kr = k.repeat_interleave(2, 1), vr = v.repeat_interleave(2, 1);
  at::Tensor scores = at::matmul(q, kr.transpose(-2, -1)) / std::sqrt(8.0);
  scores = scores.masked_fill(at::ones({5, 5}, at::kBool).triu(1), -INFINITY);
  EXPECT_TRUE(at::allclose(RunOne("scaled_dot_product_attention", {q, k, v}, Attrs().Bool("is_causal", true)),
                           at::matmul(at::softmax(scores, -1), vr), 1e-5, 1e-6));
  // A bool attention mask keeps the positions that are true.
  const at::Tensor keep = at::rand({5, 5}) > 0.3;
  at::Tensor s2 = (at::matmul(q, kr.transpose(-2, -1)) / std::sqrt(8.0)).masked_fill(keep.logical_not(), -INFINITY);
  at::Tensor got = RunOne("scaled_dot_product_attention", {q, k, v, keep}, {});
  at::Tensor want = at::matmul(at::softmax(s2, -1), vr);
  EXPECT_TRUE(at::allclose(got.nan_to_num(0), want.nan_to_num(0), 1e-5, 1e-6));
  // batch_norm in training mode returns updated clones and leaves its inputs alone.
  const at::Tensor bx = at::randn({8, 3, 4}), rm = at::zeros({3}), rv = at::ones({3});
  const Attrs bn = Attrs().Bool("training", true).Float("momentum", 0.1).Float("eps", 1e-5);
  at::Tensor new_mean = RunOne("batch_norm", {bx, at::ones({3}), at::zeros({3}), rm, rv}, bn, 1);
  EXPECT_TRUE(at::allclose(new_mean, 0.1 * bx.mean(std::vector<int64_t>{0, 2})));
  EXPECT_TRUE(at::equal(rm, at::zeros({3}))) << "the running mean input must not change";
  // Dropout: identity in evaluation runs, zeros about p of the elements in training runs.
  const at::Tensor big = at::ones({1000});
  EXPECT_TRUE(at::equal(RunOne("dropout", {big}, Attrs().Float("p", 0.5).Bool("train", true)), big));
  const double kept =
      (RunOne("dropout", {big}, Attrs().Float("p", 0.5).Bool("train", true), 0, RunMode::kTrain) > 0)
          .sum().item<double>();
  EXPECT_GT(kept, 400);
  EXPECT_LT(kept, 600);
  // bernoulli: 0/1 with probability p of a 1, seeded like torch.empty(shape).bernoulli_(p).
  at::manual_seed(3);
  const at::Tensor draw = RunOne("bernoulli", {}, Attrs().Ints("shape", {1000}).Float("p", 0.8).Str("dtype", "f32"));
  at::manual_seed(3);
  EXPECT_TRUE(at::equal(draw, at::empty({1000}).bernoulli_(0.8)));
  EXPECT_TRUE(at::equal(draw * (1 - draw), at::zeros({1000})));
  EXPECT_GT(draw.sum().item<double>(), 700);
  EXPECT_LT(draw.sum().item<double>(), 900);
}

// The synchronised batch norm (batch_norm_stats then batch_norm_apply) is ATen's training batch
// norm: the same output, running statistics and gradients of x, weight and bias — on the whole
// batch, and with the batch in two halves whose sums are added (two ranks' all-reduce) and whose
// statistics' gradients are added (the GRAD_SYNC on the replicated stats).
std::vector<at::Tensor> RunEntry(const std::string& op, std::vector<at::Tensor> ins, const Attrs& attrs) {
  v1::Node node;
  node.set_op(op);
  for (const auto& [name, value] : attrs.map()) (*node.mutable_attrs())[name] = value;
  return ExecTable::Global().Find(op)->fn(ExecContext(node, std::move(ins), {}, c10::Device(c10::kCPU), true));
}

TEST(ExecTableTest, SynchronisedBatchNormIsATensBatchNormWholeAndSplit) {
  at::manual_seed(5);
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor x0 = at::randn({6, 3, 4, 5}, f64) * 2 + 3, w0 = at::randn({3}, f64), b0 = at::randn({3}, f64);
  const at::Tensor rm = at::randn({3}, f64), rv = at::rand({3}, f64) + 0.5, gy = at::randn({6, 3, 4, 5}, f64);
  const int64_t count = 6 * 4 * 5;
  // ATen.
  const at::Tensor x = x0.clone().requires_grad_(), w = w0.clone().requires_grad_(), b = b0.clone().requires_grad_();
  const at::Tensor rm_aten = rm.clone(), rv_aten = rv.clone();
  const at::Tensor y = at::batch_norm(x, w, b, rm_aten, rv_aten, true, 0.1, 1e-5, false);
  y.backward(gy);
  const Attrs attrs = Attrs().Int("count", count).Float("eps", 1e-5);
  for (int parts : {1, 2}) {
    SCOPED_TRACE(parts);
    const int64_t n = 6 / parts;
    std::vector<at::Tensor> xs, stats_local, ys;
    const at::Tensor wm = w0.clone().requires_grad_(), bm = b0.clone().requires_grad_();
    at::Tensor sum;
    for (int p = 0; p < parts; ++p) {
      xs.push_back(x0.slice(0, p * n, (p + 1) * n).clone().requires_grad_());
      stats_local.push_back(RunEntry("batch_norm_stats", {xs.back()}, {})[0]);
      sum = p == 0 ? stats_local.back() : sum + stats_local.back();
    }
    // Each part reads the summed stats through its own leaf, as a rank reads its all-reduced copy.
    std::vector<at::Tensor> reads;
    for (int p = 0; p < parts; ++p) {
      reads.push_back(sum.detach().clone().requires_grad_());
      ys.push_back(RunEntry("batch_norm_apply", {xs[p], reads.back(), wm, bm}, attrs)[0]);
      ys.back().backward(gy.slice(0, p * n, (p + 1) * n));
    }
    const auto running = RunEntry("batch_norm_running_stats", {sum, rm, rv}, Attrs().Int("count", count).Float("momentum", 0.1));
    at::Tensor g_stats = reads[0].grad();
    for (int p = 1; p < parts; ++p) g_stats = g_stats + reads[p].grad();
    for (int p = 0; p < parts; ++p) stats_local[p].backward(g_stats);  // the all-reduce's backward: the sum
    EXPECT_TRUE(at::allclose(at::cat(ys), y, 1e-10, 1e-10));
    EXPECT_TRUE(at::allclose(running[0], rm_aten, 1e-10, 1e-12)) << running[0] << rm_aten;
    EXPECT_TRUE(at::allclose(running[1], rv_aten, 1e-10, 1e-12)) << running[1] << rv_aten;
    EXPECT_FALSE(running[0].requires_grad());
    std::vector<at::Tensor> gx;
    for (const at::Tensor& xp : xs) gx.push_back(xp.grad());
    EXPECT_TRUE(at::allclose(at::cat(gx), x.grad(), 1e-9, 1e-10)) << (at::cat(gx) - x.grad()).abs().max();
    EXPECT_TRUE(at::allclose(wm.grad(), w.grad(), 1e-9, 1e-10));
    EXPECT_TRUE(at::allclose(bm.grad(), b.grad(), 1e-9, 1e-10));
  }
  // f32 without affine or running statistics: the output and x's gradient.
  const at::Tensor xf = (x0.to(at::kFloat) * 10).requires_grad_(), xg = xf.detach().clone().requires_grad_();
  const at::Tensor yf = at::batch_norm(xf, {}, {}, {}, {}, true, 0.1, 1e-5, false);
  yf.backward(gy.to(at::kFloat));
  const at::Tensor ym = RunEntry("batch_norm_apply", {xg, RunEntry("batch_norm_stats", {xg}, {})[0]},
                                 Attrs().Int("count", count))[0];
  ym.backward(gy.to(at::kFloat));
  EXPECT_TRUE(at::allclose(ym, yf, 1e-5, 1e-5)) << (ym - yf).abs().max();
  EXPECT_TRUE(at::allclose(xg.grad(), xf.grad(), 1e-5, 1e-5)) << (xg.grad() - xf.grad()).abs().max();
}

// Batch norm over groups of samples (group_size; what --batch-norm local runs): each run of
// group_size samples is normalised as ATen's training batch norm normalises it alone — output and
// the gradients of x, weight and bias — whether the op holds three groups or one (a rank's share);
// the running statistics move by the groups' sums added (the whole batch's).
TEST(ExecTableTest, GroupedBatchNormIsATensBatchNormPerGroup) {
  at::manual_seed(7);
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  const int64_t groups = 3, size = 2;
  const at::Tensor x0 = at::randn({groups * size, 4, 3, 5}, f64) * 2 + 1, w0 = at::randn({4}, f64), b0 = at::randn({4}, f64);
  const at::Tensor gy = at::randn({groups * size, 4, 3, 5}, f64), rm = at::randn({4}, f64), rv = at::rand({4}, f64) + 0.5;
  const Attrs apply = Attrs().Int("count", size * 3 * 5).Float("eps", 1e-5);
  // ATen on each group alone: the expected output, and gradients summed over the groups.
  std::vector<at::Tensor> y_aten, gx_aten;
  const at::Tensor w = w0.clone().requires_grad_(), b = b0.clone().requires_grad_();
  for (int64_t g = 0; g < groups; ++g) {
    const at::Tensor xg = x0.slice(0, g * size, (g + 1) * size).clone().requires_grad_();
    y_aten.push_back(at::batch_norm(xg, w, b, {}, {}, true, 0.1, 1e-5, false));
    y_aten.back().backward(gy.slice(0, g * size, (g + 1) * size));
    gx_aten.push_back(xg.grad());
  }
  for (bool one_call : {true, false}) {
    SCOPED_TRACE(one_call ? "three groups in one op" : "one group per op");
    const at::Tensor wm = w0.clone().requires_grad_(), bm = b0.clone().requires_grad_();
    std::vector<at::Tensor> xs, ys, stats;
    for (int64_t g = 0; g < (one_call ? 1 : groups); ++g) {
      xs.push_back((one_call ? x0 : x0.slice(0, g * size, (g + 1) * size)).clone().requires_grad_());
      stats.push_back(RunEntry("batch_norm_stats", {xs.back()}, Attrs().Int("group_size", size))[0]);
      ASSERT_EQ(stats.back().sizes(), (std::vector<int64_t>{one_call ? groups : 1, 2, 4}));
      ys.push_back(RunEntry("batch_norm_apply", {xs.back(), stats.back(), wm, bm}, apply)[0]);
    }
    at::cat(ys).backward(gy);
    EXPECT_TRUE(at::allclose(at::cat(ys), at::cat(y_aten), 1e-10, 1e-10)) << (at::cat(ys) - at::cat(y_aten)).abs().max();
    std::vector<at::Tensor> gx;
    for (const at::Tensor& xp : xs) gx.push_back(xp.grad());
    EXPECT_TRUE(at::allclose(at::cat(gx), at::cat(gx_aten), 1e-9, 1e-10)) << (at::cat(gx) - at::cat(gx_aten)).abs().max();
    EXPECT_TRUE(at::allclose(wm.grad(), w.grad(), 1e-9, 1e-10));
    EXPECT_TRUE(at::allclose(bm.grad(), b.grad(), 1e-9, 1e-10));
    // The running statistics: as ATen's over the whole batch.
    const at::Tensor rm_aten = rm.clone(), rv_aten = rv.clone();
    at::batch_norm(x0, {}, {}, rm_aten, rv_aten, true, 0.1, 1e-5, false);
    const auto running = RunEntry("batch_norm_running_stats", {at::cat(stats).detach().sum(0), rm, rv},
                                  Attrs().Int("count", groups * size * 3 * 5).Float("momentum", 0.1));
    EXPECT_TRUE(at::allclose(running[0], rm_aten, 1e-10, 1e-12)) << running[0] << rm_aten;
    EXPECT_TRUE(at::allclose(running[1], rv_aten, 1e-10, 1e-12)) << running[1] << rv_aten;
  }
}

TEST(ExecTableTest, LibTorchErrorsNameTheNodeAndOp) {
  // view of a transposed tensor: the registry checks element counts only, LibTorch refuses.
  GraphBuilder b("bad_view");
  const std::string x = b.Input("x", TensorType{v1::FLOAT32, {2, 3, 4}});
  const std::string t = b.Op("transpose", {x}, Attrs().Int("dim0", 0).Int("dim1", 2));
  b.Output(b.Op("view", {t}, Attrs().Ints("shape", {24})));
  auto g = b.Build();
  ASSERT_TRUE(g.ok()) << g.status();
  auto ex = Executor::Create(*g, {});
  ASSERT_TRUE(ex.ok()) << ex.status();
  auto r = (*ex)->Run({{"x", at::randn({2, 3, 4})}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(r.status().message(), HasSubstr("node 'view' (view)"));
  EXPECT_THAT(r.status().message(), HasSubstr("view size is not compatible"));
  EXPECT_THAT(r.status().message(), ::testing::Not(HasSubstr("frame #")));  // no C++ backtrace

  // Inputs are checked against the graph's declarations.
  auto wrong = (*ex)->Run({{"x", at::randn({2, 3})}});
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong.status().message(), HasSubstr("input 'x' is f32[2,3] but graph 'bad_view' declares f32[2,3,4]"));
  auto missing = (*ex)->Run({});
  EXPECT_THAT(missing.status().message(), HasSubstr("needs input 'x'"));
}

}  // namespace
}  // namespace mapd

// Imports models traced/scripted at test time by Debian's python3-torch and checks them
// against what PyTorch itself reports (tests/import/models/make_models.py → expected.json).
#include "model/import/torchscript_importer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <nlohmann/json.hpp>

#include "model/graph/verifier.h"
#include "model/ir/graph.h"

namespace mapd {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

class ImporterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/mapd_import_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    const std::string cmd = std::string("/usr/bin/python3 ") + MAPD_SOURCE_DIR +
                            "/tests/import/models/make_models.py " + dir_ + " --without-families > " + dir_ + "/make.log 2>&1";
    const int rc = std::system(cmd.c_str());
    std::ifstream log(dir_ + "/make.log");
    std::string log_text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    ASSERT_EQ(rc, 0) << "make_models.py failed:\n" << log_text;
    std::ifstream in(dir_ + "/expected.json");
    expected_ = nlohmann::json::parse(in);
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  static std::string Path(const std::string& file) { return dir_ + "/" + file; }

  // Input specs as PyTorch reported them for `file`.
  static std::vector<InputSpec> SpecsFor(const std::string& file) {
    std::vector<InputSpec> specs;
    for (const auto& in : expected_[file]["inputs"]) {
      InputSpec s;
      s.name = in["name"].get<std::string>();
      s.type.dtype = *ParseDType(in["dtype"].get<std::string>());
      s.type.shape = in["shape"].get<std::vector<int64_t>>();
      specs.push_back(s);
    }
    return specs;
  }

  static absl::StatusOr<v1::Graph> Import(const std::string& file, std::vector<InputSpec> specs) {
    ImportOptions opts;
    opts.inputs = std::move(specs);
    return ImportTorchScript(Path(file), opts);
  }

  // Output shapes/dtypes and parameter count equal what PyTorch reported.
  static void ExpectMatchesPyTorch(const std::string& file, const v1::Graph& proto) {
    SCOPED_TRACE(file);
    ASSERT_TRUE(VerifyGraph(proto).ok()) << VerifyGraph(proto);
    auto g = Graph::Create(proto);
    ASSERT_TRUE(g.ok()) << g.status();
    const auto& exp = expected_[file];
    EXPECT_EQ(g->NumTrainableParameters(), exp["num_parameters"].get<int64_t>());
    ASSERT_EQ(static_cast<size_t>(proto.outputs_size()), exp["outputs"].size());
    for (int i = 0; i < proto.outputs_size(); ++i) {
      const TensorType& t = g->TypeOf(proto.outputs(i));
      EXPECT_EQ(t.shape, exp["outputs"][i]["shape"].get<std::vector<int64_t>>()) << "output " << i;
      EXPECT_EQ(t.dtype, *ParseDType(exp["outputs"][i]["dtype"].get<std::string>())) << "output " << i;
    }
    int buffers = 0;
    for (const auto& p : proto.parameters()) buffers += p.kind() == v1::Parameter::BUFFER;
    EXPECT_EQ(buffers, exp["num_buffers"].get<int>());
    EXPECT_EQ(proto.metadata().at("mode"), exp["mode"].get<std::string>());
  }

  static int CountOp(const v1::Graph& g, const std::string& op) {
    int n = 0;
    for (const auto& node : g.nodes()) n += node.op() == op;
    return n;
  }

  static std::string dir_;
  static nlohmann::json expected_;
};

std::string ImporterTest::dir_;
nlohmann::json ImporterTest::expected_;

TEST_F(ImporterTest, NanoGptWithTiedWeightsAndCausalMask) {
  for (const std::string file : {"nanogpt_trace_train.pt", "nanogpt_trace_eval.pt"}) {
    auto g = Import(file, SpecsFor(file));
    ASSERT_TRUE(g.ok()) << g.status();
    ExpectMatchesPyTorch(file, *g);
    // Tied: one parameter, reachable under both module paths.
    const v1::Parameter* wte = nullptr;
    for (const auto& p : g->parameters()) {
      if (p.name() == "transformer.wte.weight" || p.name() == "lm_head.weight") wte = &p;
    }
    ASSERT_NE(wte, nullptr);
    ASSERT_EQ(wte->aliases_size(), 1);
    EXPECT_EQ(wte->name() == "lm_head.weight" ? wte->aliases(0) : wte->name(), "transformer.wte.weight");
    EXPECT_EQ(CountOp(*g, "masked_fill"), 2);  // the causal mask, once per layer
    EXPECT_EQ(CountOp(*g, "softmax"), 2);
    const bool train = file.find("train") != std::string::npos;
    EXPECT_EQ(CountOp(*g, "dropout") > 0, train) << "dropout is kept only in train mode";
    // Nodes carry module scopes.
    bool scoped = false;
    for (const auto& n : g->nodes()) scoped |= n.scope().find("transformer.h.1.attn") == 0;
    EXPECT_TRUE(scoped);
  }
}

TEST_F(ImporterTest, NanoGptReturningLoss) {
  const std::string file = "nanogpt_loss_trace_train.pt";
  auto g = Import(file, SpecsFor(file));
  ASSERT_TRUE(g.ok()) << g.status();
  ExpectMatchesPyTorch(file, *g);
  EXPECT_EQ(CountOp(*g, "cross_entropy"), 1);
}

TEST_F(ImporterTest, NewShapesFoldIntoAttributes) {
  // The same traced nanoGPT at another batch size and a shorter sequence.
  auto g = Import("nanogpt_trace_train.pt", {*ParseInputSpec("idx:i64[4,8]")});
  ASSERT_TRUE(g.ok()) << g.status();
  auto view = Graph::Create(*g);
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view->TypeOf(g->outputs(0)).ToString(), "f32[4,8,96]");
}

TEST_F(ImporterTest, LlamaWithRmsNormRopeSwiGluAndGqa) {
  const std::string file = "llama_trace_train.pt";
  auto g = Import(file, SpecsFor(file));
  ASSERT_TRUE(g.ok()) << g.status();
  ExpectMatchesPyTorch(file, *g);
  EXPECT_EQ(CountOp(*g, "repeat_interleave"), 4);  // k and v of 2 layers: grouped-query attention
  EXPECT_GE(CountOp(*g, "rsqrt"), 5);              // RMSNorm
  EXPECT_EQ(CountOp(*g, "silu"), 2);               // SwiGLU
  // The causal mask, full() then triu() of no input, folds into one constant.
  EXPECT_EQ(CountOp(*g, "triu"), 0);
  EXPECT_EQ(std::count_if(g->parameters().begin(), g->parameters().end(),
                          [](const v1::Parameter& p) { return p.kind() == v1::Parameter::CONSTANT; }),
            1);
}

TEST_F(ImporterTest, ResNetBatchNormTrainingUpdatesBuffers) {
  const std::string file = "resnet_trace_train.pt";
  auto g = Import(file, SpecsFor(file));
  ASSERT_TRUE(g.ok()) << g.status();
  ExpectMatchesPyTorch(file, *g);
  // Training batch norms come synchronised (docs/ops.md): sums, normalisation, running statistics.
  EXPECT_EQ(CountOp(*g, "batch_norm"), 0);
  EXPECT_EQ(CountOp(*g, "batch_norm_stats"), 6);
  EXPECT_EQ(CountOp(*g, "batch_norm_apply"), 6);
  EXPECT_EQ(CountOp(*g, "batch_norm_running_stats"), 6);
  EXPECT_EQ(CountOp(*g, "conv2d"), 6);
  std::set<std::string> updated;
  for (const auto& u : g->buffer_updates()) updated.insert(u.buffer());
  std::set<std::string> want;
  for (const auto& b : expected_[file]["buffers"]) want.insert(b.get<std::string>());
  EXPECT_EQ(updated, want);
}

TEST_F(ImporterTest, ResNetEvalHasNoBufferUpdates) {
  const std::string file = "resnet_trace_eval.pt";
  auto g = Import(file, SpecsFor(file));
  ASSERT_TRUE(g.ok()) << g.status();
  ExpectMatchesPyTorch(file, *g);
  EXPECT_EQ(g->buffer_updates_size(), 0);
}

TEST_F(ImporterTest, ScriptedModelWithEmbeddedSpecs) {
  auto g = Import("mlp_script.pt", {});  // specs come from mapd_inputs.json inside the archive
  ASSERT_TRUE(g.ok()) << g.status();
  ExpectMatchesPyTorch("mlp_script.pt", *g);
}

TEST_F(ImporterTest, ParameterDataIsReachable) {
  auto g = Import("nanogpt_trace_train.pt", SpecsFor("nanogpt_trace_train.pt"));
  ASSERT_TRUE(g.ok()) << g.status();
  int checked = 0;
  const int64_t loads = ArchiveLoads();
  {
    // Under a scope the archive is loaded once for every parameter (the ShuffleNetV2 "hang":
    // a load per parameter took minutes), and again after it.
    ArchiveScope scope;
    for (const auto& p : g->parameters()) {
      auto data = LoadParameterData(p);
      ASSERT_TRUE(data.ok()) << p.name() << ": " << data.status();
      EXPECT_EQ(static_cast<int64_t>(data->bytes.size()), TensorType::FromProto(p.type()).NumBytes()) << p.name();
      ++checked;
    }
  }
  EXPECT_GT(checked, 10);
  EXPECT_EQ(ArchiveLoads() - loads, 1);
  const v1::Parameter& archived = *std::find_if(g->parameters().begin(), g->parameters().end(),
                                                [](const v1::Parameter& p) { return p.data().inline_data().empty(); });
  ASSERT_TRUE(LoadParameterData(archived).ok());
  ASSERT_TRUE(LoadParameterData(archived).ok());
  EXPECT_EQ(ArchiveLoads() - loads, 3);  // no scope: a load a call
}

// A mask and rotary tables built from no input, parameter or random draw (arange, outer,
// comparisons, bitwise_not, &, detach, cos/sin of a plain attribute) fold into constants: the
// ops that built them need no handler and leave no node.
TEST_F(ImporterTest, InputIndependentTensorsFoldIntoConstants) {
  const std::string file = "folded_masks_trace_train.pt";
  auto g = Import(file, SpecsFor(file));
  ASSERT_TRUE(g.ok()) << g.status();
  ExpectMatchesPyTorch(file, *g);
  for (const char* op : {"arange", "ge", "sub", "cos", "sin", "logical_not"}) EXPECT_EQ(CountOp(*g, op), 0) << op;
  EXPECT_EQ(CountOp(*g, "masked_fill"), 1);
  const v1::Parameter* mask = nullptr;
  int constants = 0;
  for (const auto& p : g->parameters()) {
    if (p.kind() != v1::Parameter::CONSTANT) continue;
    ++constants;
    EXPECT_FALSE(p.data().inline_data().empty()) << p.name();
    if (p.type().dtype() == v1::BOOL) mask = &p;
  }
  EXPECT_EQ(constants, 3);  // the mask, cos and sin
  ASSERT_NE(mask, nullptr);
  auto data = LoadParameterData(*mask);
  ASSERT_TRUE(data.ok()) << data.status();
  const int64_t seq = SpecsFor(file)[0].type.shape[1];
  ASSERT_EQ(static_cast<int64_t>(data->bytes.size()), seq * seq);
  for (int64_t i = 0; i < seq; ++i) {
    for (int64_t j = 0; j < seq; ++j) {
      // What masked_fill reads: ~mask, where mask is causal within a window of 3.
      EXPECT_EQ(data->bytes[i * seq + j] != 0, !(j <= i && i - j < 3)) << i << "," << j;
    }
  }
}

TEST_F(ImporterTest, CorruptFile) {
  const std::string bad = Path("corrupt.pt");
  std::ofstream(bad) << "PK\x03\x04 definitely not a zip archive";
  auto g = Import("corrupt.pt", SpecsFor("nanogpt_trace_train.pt"));
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(g.status().message()), HasSubstr("cannot load"));
  EXPECT_EQ(Import("no_such_file.pt", {}).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ImporterTest, MissingAndWrongInputSpecs) {
  auto missing = Import("nanogpt_trace_train.pt", {});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("argument 'idx' has no input spec; pass --input idx:"));

  auto wrong_name = Import("nanogpt_trace_train.pt", {*ParseInputSpec("idx:i64[2,16]"), *ParseInputSpec("tokens:i64[2,16]")});
  EXPECT_THAT(std::string(wrong_name.status().message()), HasSubstr("'tokens', which is not a forward() argument; the arguments are: idx"));

  // A saved trace no longer records input dtypes; the first op that cares names the fault.
  auto wrong_dtype = Import("nanogpt_trace_train.pt", {*ParseInputSpec("idx:f32[2,16]")});
  EXPECT_THAT(std::string(wrong_dtype.status().message()),
              HasSubstr("node 'transformer.wte/embedding' (embedding): indices must be an integer tensor, got f32[2,16]"));

  auto wrong_rank = Import("nanogpt_trace_train.pt", {*ParseInputSpec("idx:i64[32]")});
  EXPECT_THAT(std::string(wrong_rank.status().message()),
              HasSubstr("size(1) of a i64[32] tensor: no such dimension (does the input spec have the rank"));

  // Longer than the model's block size: the causal mask slice no longer fits.
  auto too_long = Import("nanogpt_trace_train.pt", {*ParseInputSpec("idx:i64[2,32]")});
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(too_long.status().message()), HasSubstr("[input specs: idx:i64[2,32]]"));
}

TEST_F(ImporterTest, OpsWithoutEntriesImportByTheGenericPath) {
  auto g = Import("generic_ops.pt", SpecsFor("generic_ops.pt"));
  ASSERT_TRUE(g.ok()) << g.status();
  std::map<std::string, int> counts;
  for (const auto& n : g->nodes()) {
    if (n.op() != "aten") continue;
    const std::string schema = n.attrs().at("schema").s();
    ++counts[schema.substr(0, schema.find('.'))];
  }
  for (const auto& [op, count] : expected_["generic_ops.pt"]["generic_ops"].items()) EXPECT_EQ(counts[op], count.get<int>()) << op;
  // What the import measured: kthvalue's values carry a gradient and its indices do not;
  // logcumsumexp's backward keeps its input and its output (derivatives.yaml: self, result).
  for (const auto& n : g->nodes()) {
    if (n.op() != "aten") continue;
    const std::string schema = n.attrs().at("schema").s();
    const auto& grad = n.attrs().at("grad").ints().values();
    if (schema.rfind("aten::kthvalue", 0) == 0) {
      ASSERT_EQ(grad.size(), 2);
      EXPECT_EQ(grad[0], 1);
      EXPECT_EQ(grad[1], 0);
    }
    if (schema.rfind("aten::logcumsumexp", 0) == 0) {
      EXPECT_THAT(n.attrs().at("saved_in").ints().values(), ::testing::ElementsAre(0));
      EXPECT_THAT(n.attrs().at("saved_out").ints().values(), ::testing::ElementsAre(0));
      EXPECT_EQ(n.attrs().at("measured_on").s(), "cpu");  // no meta kernel in LibTorch 1.13
    }
  }
}

TEST_F(ImporterTest, TheGenericPathRefusesShapesThatDependOnValues) {
  auto g = Import("refused.pt", {*ParseInputSpec("x:f32[4,8]")});
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(g.status().message()), HasSubstr("aten::nonzero"));
  EXPECT_THAT(std::string(g.status().message()), HasSubstr("depend on the values of its inputs"));
}

}  // namespace
}  // namespace mapd

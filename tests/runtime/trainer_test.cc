// Training steps of zoo models, data sources, a small byte-level GPT that learns, and the
// runtime's errors.
#include "worker/runtime/trainer.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>

#include "model/graph/builder.h"
#include "model/zoo/zoo.h"
#include "tests/runtime/test_models.h"
#include "worker/runtime/data.h"
#include "worker/runtime/data_files.h"
#include "worker/runtime/optimizer.h"
#include "worker/runtime/torch_pickle.h"

namespace mapd {
namespace {

using ::testing::HasSubstr;

v1::Graph Zoo(const std::string& spec) {
  auto g = BuildZooModel(spec);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *g : v1::Graph();
}

std::string TempFile(const std::string& name, const std::string& contents) {
  const std::string path = ::testing::TempDir() + "/mapd_runtime_" + name;
  std::ofstream out(path, std::ios::binary);
  out << contents;
  return path;
}

TrainerOptions Options(OptimizerOptions::Kind kind, double lr, uint64_t seed = 1) {
  TrainerOptions o;
  o.executor.seed = seed;
  o.optimizer.kind = kind;
  o.optimizer.lr = lr;
  return o;
}

// Copies of every parameter, buffer and constant, by name.
std::vector<at::Tensor> Snapshot(Trainer& t) {
  std::vector<at::Tensor> out;
  for (const std::string& name : t.executor().parameters().names()) {
    out.push_back(t.executor().parameters().Find(name)->detach().clone());
  }
  return out;
}

struct TrainRun {
  std::vector<double> losses;
  std::vector<at::Tensor> params;
};

// `steps` steps of `spec` from `seed` on synthetic data.
TrainRun Train(const std::string& spec, OptimizerOptions::Kind kind, int steps, uint64_t seed) {
  TrainRun run;
  v1::Graph g = Zoo(spec);
  auto trainer = Trainer::Create(g, Options(kind, kind == OptimizerOptions::Kind::kSgd ? 0.1 : 1e-3, seed));
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  if (!trainer.ok()) return run;
  DataOptions data;
  data.seed = seed;
  auto source = MakeDataSource(g, data, at::kCPU);
  EXPECT_TRUE(source.ok()) << source.status();
  if (!source.ok()) return run;
  for (int i = 0; i < steps; ++i) {
    auto batch = (*source)->Next();
    EXPECT_TRUE(batch.ok()) << batch.status();
    auto r = (*trainer)->Step(*batch);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return run;
    EXPECT_EQ(r->step, i + 1);
    EXPECT_GT(r->seconds, 0);
    run.losses.push_back(r->loss);
  }
  run.params = Snapshot(**trainer);
  return run;
}

struct ZooCase {
  std::string spec;
  int64_t vocab;  // language models: the loss at init is near ln(vocab); 0 otherwise
  // Every trainable parameter gets a gradient at init (not ViT: its zero-initialised head
  // blocks the gradient to everything below it on the first step).
  bool all_move = true;
};

void PrintTo(const ZooCase& c, std::ostream* os) { *os << c.spec; }

class ZooTrainingTest : public ::testing::TestWithParam<ZooCase> {};

TEST_P(ZooTrainingTest, StepsGiveAFiniteLossChangeParametersAndRepeatBitForBit) {
  const ZooCase& c = GetParam();
  v1::Graph g = Zoo(c.spec);
  auto trainer = Trainer::Create(g, Options(OptimizerOptions::Kind::kAdamW, 1e-3));
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  auto before = Snapshot(**trainer);
  DataOptions data;
  data.seed = 1;
  auto source = MakeDataSource(g, data, at::kCPU);
  ASSERT_TRUE(source.ok()) << source.status();
  auto batch = (*source)->Next();
  ASSERT_TRUE(batch.ok()) << batch.status();
  auto r = (*trainer)->Step(*batch);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(std::isfinite(r->loss)) << r->loss;
  if (c.vocab > 0) {
    EXPECT_NEAR(r->loss, std::log(static_cast<double>(c.vocab)), 0.15) << "loss at init";
  }
  EXPECT_GT((*trainer)->optimizer().StateBytes(), 0);

  // Every trainable parameter moved (AdamW moves each by about lr); gradients were released.
  const auto& store = (*trainer)->executor().parameters();
  for (const auto& [name, p] : store.Trainable()) {
    EXPECT_FALSE(p.grad().defined()) << name << ": gradients must not outlive the step";
  }
  auto after = Snapshot(**trainer);
  int changed = 0, trainable = 0;
  for (size_t i = 0; i < store.names().size(); ++i) {
    if (!g.parameters(static_cast<int>(i)).trainable()) continue;
    ++trainable;
    changed += !at::equal(before[i], after[i]);
  }
  EXPECT_GT(changed, 0);
  if (c.all_move) {
    EXPECT_EQ(changed, trainable);
  }

  // Same seed: the same run, bit for bit (parameters at init and after a step, and the loss).
  TrainRun a = Train(c.spec, OptimizerOptions::Kind::kAdamW, 1, 5);
  TrainRun b = Train(c.spec, OptimizerOptions::Kind::kAdamW, 1, 5);
  ASSERT_EQ(a.losses.size(), 1u);
  ASSERT_EQ(b.losses.size(), 1u);
  EXPECT_EQ(a.losses[0], b.losses[0]);
  ASSERT_EQ(a.params.size(), b.params.size());
  for (size_t i = 0; i < a.params.size(); ++i) EXPECT_TRUE(at::equal(a.params[i], b.params[i])) << i;
}

INSTANTIATE_TEST_SUITE_P(
    Zoo, ZooTrainingTest,
    ::testing::Values(ZooCase{"gpt2:layers=2,hidden=64,heads=4,vocab=128,seq=32,batch=2", 128},
                      ZooCase{"llama2-7b:layers=2,hidden=64,heads=4,kv_heads=2,ffn=128,vocab=128,seq=32,batch=2", 128},
                      ZooCase{"resnet50:image=64,batch=2,classes=10", 0},
                      ZooCase{"vit-base:layers=2,hidden=64,heads=4,patch=8,image=32,classes=10,batch=2", 0, false},
                      ZooCase{"bert-large:layers=2,hidden=64,heads=4,vocab=128,seq=32,classes=2,batch=2", 0},
                      ZooCase{"mlp:batch=4,in=32,hidden=64,layers=2,out=10", 0}),
    [](const ::testing::TestParamInfo<ZooCase>& info) {
      std::string name = info.param.spec.substr(0, info.param.spec.find(':'));
      for (char& ch : name) {
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      return name;
    });

TEST(TrainerTest, SgdWithMomentumTrainsAnMlp) {
  const std::string spec = "mlp:batch=16,in=16,hidden=32,layers=1,out=4";
  v1::Graph g = Zoo(spec);
  TrainerOptions o = Options(OptimizerOptions::Kind::kSgd, 0.05);
  o.optimizer.momentum = 0.9;
  auto trainer = Trainer::Create(g, o);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  // One fixed batch, fitted: the loss must fall.
  DataOptions data;
  auto source = MakeDataSource(g, data, at::kCPU);
  ASSERT_TRUE(source.ok());
  auto batch = (*source)->Next();
  ASSERT_TRUE(batch.ok());
  double first = 0, last = 0;
  for (int i = 0; i < 30; ++i) {
    auto r = (*trainer)->Step(*batch);
    ASSERT_TRUE(r.ok()) << r.status();
    if (i == 0) first = r->loss;
    last = r->loss;
  }
  EXPECT_LT(last, 0.5 * first);
  // Momentum: one buffer per trainable parameter.
  int64_t param_bytes = 0;
  for (const auto& [name, p] : (*trainer)->executor().parameters().Trainable()) param_bytes += p.nbytes();
  EXPECT_EQ((*trainer)->optimizer().StateBytes(), param_bytes);
}

TEST(TrainerTest, BatchNormStatisticsAreUpdatedAfterTheStep) {
  v1::Graph g = Zoo("resnet50:image=32,batch=2,classes=10");
  auto trainer = Trainer::Create(g, Options(OptimizerOptions::Kind::kSgd, 0.01));
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  auto& store = (*trainer)->executor().parameters();
  const at::Tensor mean_before = store.Find("bn1.running_mean")->clone();
  const at::Tensor var_before = store.Find("bn1.running_var")->clone();
  auto source = MakeDataSource(g, {}, at::kCPU);
  ASSERT_TRUE(source.ok());
  auto r = (*trainer)->Step(*(*source)->Next());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(at::equal(*store.Find("bn1.running_mean"), mean_before));
  EXPECT_FALSE(at::equal(*store.Find("bn1.running_var"), var_before));
  EXPECT_FALSE(store.Find("bn1.running_mean")->requires_grad());
}

// A small GPT learns the repository's own documentation, byte by byte.
TEST(TrainerTest, TinyGptLearnsText) {
  const std::string path = TempFile("docs.txt", testing_util::RepositoryText());
  v1::Graph g = Zoo("gpt2:layers=2,hidden=64,heads=4,vocab=256,seq=64,batch=8");
  TrainerOptions o = Options(OptimizerOptions::Kind::kAdamW, 3e-3);
  o.optimizer.max_grad_norm = 1.0;
  auto trainer = Trainer::Create(g, o);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  DataOptions data;
  data.source = DataOptions::Source::kText;
  data.path = path;
  data.seed = 2;
  auto source = MakeDataSource(g, data, at::kCPU);
  ASSERT_TRUE(source.ok()) << source.status();
  std::vector<double> losses;
  double seconds = 0;
  for (int i = 0; i < 100; ++i) {
    auto batch = (*source)->Next();
    ASSERT_TRUE(batch.ok()) << batch.status();
    auto r = (*trainer)->Step(*batch);
    ASSERT_TRUE(r.ok()) << r.status();
    losses.push_back(r->loss);
    seconds += r->seconds;
  }
  const double last10 = std::accumulate(losses.end() - 10, losses.end(), 0.0) / 10;
  std::printf("tiny GPT on %s: loss %.3f -> %.3f (last 10 mean), %.1f ms/step\n", path.c_str(), losses[0], last10,
              1000 * seconds / losses.size());
  EXPECT_NEAR(losses[0], std::log(256.0), 0.15);
  EXPECT_LT(last10, 0.75 * losses[0]);
  std::remove(path.c_str());
}

TEST(ParametersTest, InitDependsOnSeedAndNameOnly) {
  const std::string one = "gpt2:layers=1,hidden=32,heads=2,vocab=64,seq=8";
  const std::string two = "gpt2:layers=2,hidden=32,heads=2,vocab=64,seq=8";
  auto a = ParameterStore::Create(Zoo(one), 1, at::kCPU);
  auto b = ParameterStore::Create(Zoo(two), 1, at::kCPU);
  auto c = ParameterStore::Create(Zoo(one), 2, at::kCPU);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  // The same parameter of a deeper model (another plan, another parameter order) is the same.
  for (const char* name : {"wte.weight", "h.0.attn.c_attn.weight", "ln_f.weight"}) {
    EXPECT_TRUE(at::equal(*a->Find(name), *b->Find(name))) << name;
  }
  EXPECT_FALSE(at::equal(*a->Find("wte.weight"), *c->Find("wte.weight")));
  EXPECT_FALSE(at::equal(*b->Find("h.0.attn.c_attn.weight"), *b->Find("h.1.attn.c_attn.weight")));
  EXPECT_TRUE(a->Find("lm_head.weight")->is_same(*a->Find("wte.weight"))) << "tied";
  EXPECT_TRUE(a->Find("wte.weight")->requires_grad());
  EXPECT_NEAR(a->Find("wte.weight")->std().item<double>(), 0.02, 0.002);

  // Kaiming uniform bound, RoPE tables, causal mask.
  v1::InitRule k;
  k.set_kind(v1::InitRule::KAIMING_UNIFORM);
  k.set_fan_in(100);
  at::Tensor w = *InitTensor(k, TensorType{v1::FLOAT32, {200, 100}}, 3);
  EXPECT_LE(w.abs().max().item<double>(), 0.1);
  EXPECT_GT(w.abs().max().item<double>(), 0.099);
  v1::InitRule rope;
  rope.set_kind(v1::InitRule::ROPE_SIN);
  rope.set_theta(10000);
  at::Tensor sin = *InitTensor(rope, TensorType{v1::FLOAT32, {4, 8}}, 0);
  EXPECT_NEAR(sin[3][1].item<double>(), std::sin(3 * std::pow(10000.0, -2.0 / 8)), 1e-6);
  EXPECT_TRUE(at::equal(sin.slice(1, 0, 4), sin.slice(1, 4, 8)));
  v1::InitRule mask;
  mask.set_kind(v1::InitRule::CAUSAL_MASK);
  EXPECT_TRUE(at::equal(*InitTensor(mask, TensorType{v1::BOOL, {1, 3, 3}}, 0),
                        at::ones({1, 3, 3}, at::kBool).tril()));
  k.set_fan_in(0);
  EXPECT_EQ(InitTensor(k, TensorType{v1::FLOAT32, {2}}, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DataTest, TextWindowsAreShiftedByOne) {
  std::string text;
  for (int i = 0; i < 300; ++i) text += static_cast<char>('a' + i % 26);
  const std::string path = TempFile("abc.txt", text);
  v1::Graph g = Zoo("gpt2:layers=1,hidden=32,heads=2,vocab=256,seq=16,batch=3");
  DataOptions data;
  data.source = DataOptions::Source::kText;
  data.path = path;
  auto source = MakeDataSource(g, data, at::kCPU);
  ASSERT_TRUE(source.ok()) << source.status();
  auto batch = (*source)->Next();
  ASSERT_TRUE(batch.ok());
  const at::Tensor x = batch->at("tokens"), y = batch->at("targets");
  EXPECT_EQ(x.sizes(), (std::vector<int64_t>{3, 16}));
  EXPECT_TRUE(at::equal(x.slice(1, 1), y.slice(1, 0, 15)));
  EXPECT_TRUE(at::equal((x - 'a' + 1) % 26, y - 'a')) << "targets are the next byte";
  std::remove(path.c_str());
}

TEST(DataTest, TokenFiles) {
  v1::Graph g = Zoo("gpt2:layers=1,hidden=32,heads=2,vocab=100,seq=8,batch=2");
  std::string bytes;
  for (uint16_t i = 0; i < 50; ++i) {
    const uint16_t id = static_cast<uint16_t>(i * 2);  // 0..98
    bytes.push_back(static_cast<char>(id & 0xff));
    bytes.push_back(static_cast<char>(id >> 8));
  }
  DataOptions data;
  data.source = DataOptions::Source::kTokens;
  data.path = TempFile("ids.bin", bytes);
  auto source = MakeDataSource(g, data, at::kCPU);
  ASSERT_TRUE(source.ok()) << source.status();
  auto batch = (*source)->Next();
  ASSERT_TRUE(batch.ok());
  EXPECT_TRUE(at::equal(batch->at("targets") - batch->at("tokens"), at::full({2, 8}, 2, at::kLong)));
  std::remove(data.path.c_str());

  // An id at or above the vocabulary is refused up front.
  data.path = TempFile("big_ids.bin", std::string("\x64\x00\x01\x00", 4) + bytes);  // id 100
  auto bad = MakeDataSource(g, data, at::kCPU);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("holds id 100, not below the graph's vocabulary of 100"));
  std::remove(data.path.c_str());
  data.path = TempFile("odd.bin", "abc");
  EXPECT_THAT(MakeDataSource(g, data, at::kCPU).status().message(), HasSubstr("odd number"));
  std::remove(data.path.c_str());
}

// An .npy file as numpy.save writes it (version 1 or 2), the header padded to 64 bytes.
std::string Npy(const std::string& descr, const std::string& shape, const std::string& data, int version = 1,
                bool fortran = false) {
  std::string header = "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") + ", 'shape': " + shape + ", }";
  const size_t prefix = version == 1 ? 10 : 12;
  while ((prefix + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = std::string("\x93NUMPY", 6) + static_cast<char>(version) + '\0';
  for (size_t i = 0; i < prefix - 8; ++i) out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + data;
}

template <typename T>
std::string Bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

TEST(DataTest, NumPyHeaders) {
  auto h = ParseNpyHeader("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }   \n");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->descr, "<f4");
  EXPECT_EQ(h->shape, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(ParseNpyHeader("{\"shape\": (5,), \"descr\": \"|u1\", \"fortran_order\": True}")->shape, std::vector<int64_t>{5});
  EXPECT_TRUE(ParseNpyHeader("{'descr': '<f8', 'fortran_order': False, 'shape': ()}")->shape.empty());
  for (const char* bad : {"{'descr': '<f4'", "{'descr': '<f4', 'fortran_order': False}", "{'shape': (3 4)}",
                          "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (1,)}", "{'kind': 1}",
                          "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)} x"}) {
    EXPECT_EQ(ParseNpyHeader(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(DataTest, NumPyArraysFeedTheFirstInputsInEpochs) {
  v1::Graph g = Zoo("mlp:batch=4,in=3,hidden=4,layers=1,out=5");  // features f32[4,3], labels [4]
  std::vector<double> x;
  std::vector<int64_t> y;
  for (int i = 0; i < 6; ++i) {
    for (int j = 0; j < 3; ++j) x.push_back(i * 3 + j);
    y.push_back(i % 5);
  }
  DataOptions data;
  data.source = DataOptions::Source::kNpy;
  data.path = TempFile("x.npy", Npy("<f8", "(6, 3)", Bytes(x)));
  data.targets_path = TempFile("y.npy", Npy("<i8", "(6,)", Bytes(y), 2));
  data.seed = 3;
  auto source = MakeDataSource(g, data, at::kCPU);
  ASSERT_TRUE(source.ok()) << source.status();
  std::vector<int64_t> rows;
  for (int b = 0; b < 3; ++b) {  // 12 samples: two epochs of 6
    auto batch = (*source)->Next();
    ASSERT_TRUE(batch.ok()) << batch.status();
    const at::Tensor f = batch->at("features"), l = batch->at("labels");
    ASSERT_EQ(f.scalar_type(), at::kFloat);
    ASSERT_EQ(f.sizes(), (std::vector<int64_t>{4, 3}));
    for (int r = 0; r < 4; ++r) {
      const int64_t row = static_cast<int64_t>(f[r][0].item<float>()) / 3;
      EXPECT_EQ(f[r][2].item<float>(), row * 3 + 2);
      EXPECT_EQ(l[r].item<int64_t>(), row % 5);  // a sample keeps its target
      rows.push_back(row);
    }
  }
  for (int epoch = 0; epoch < 2; ++epoch) {  // each epoch is a permutation of the six samples
    std::vector<int64_t> e(rows.begin() + 6 * epoch, rows.begin() + 6 * (epoch + 1));
    std::sort(e.begin(), e.end());
    EXPECT_EQ(e, (std::vector<int64_t>{0, 1, 2, 3, 4, 5})) << "epoch " << epoch;
  }
  EXPECT_NE(std::vector<int64_t>(rows.begin(), rows.begin() + 6), std::vector<int64_t>(rows.begin() + 6, rows.end()));
  // Only the inputs: the labels are synthetic.
  DataOptions inputs_only = data;
  inputs_only.targets_path.clear();
  auto only = MakeDataSource(g, inputs_only, at::kCPU);
  ASSERT_TRUE(only.ok()) << only.status();
  EXPECT_LT((*(*only)->Next())["labels"].max().item<int64_t>(), 5);
  std::remove(data.path.c_str());
  std::remove(data.targets_path.c_str());
}

TEST(RuntimeErrorsTest, NumPyArraysThatDoNotFitAreRefusedByName) {
  v1::Graph g = Zoo("mlp:batch=4,in=3,hidden=4,layers=1,out=5");
  const std::vector<float> x(18, 1.0f);
  DataOptions data;
  data.source = DataOptions::Source::kNpy;
  data.path = TempFile("x.npy", Npy("<f4", "(6, 3)", Bytes(x)));
  auto refused = [&](const std::string& inputs, const std::string& targets) {
    DataOptions d = data;
    d.path = TempFile("in.npy", inputs);
    if (!targets.empty()) d.targets_path = TempFile("t.npy", targets);
    absl::Status st = MakeDataSource(g, d, at::kCPU).status();
    std::remove(d.path.c_str());
    if (!d.targets_path.empty()) std::remove(d.targets_path.c_str());
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    return std::string(st.message());
  };
  const std::string good = Npy("<f4", "(6, 3)", Bytes(x));
  EXPECT_THAT(refused(Npy("<f4", "(9, 2)", Bytes(x)), ""), HasSubstr("has shape [9, 2]; input 'features' is f32[4,3]: save its samples as [N, 3]"));
  EXPECT_THAT(refused(good, Npy("<f4", "(6,)", Bytes(std::vector<float>(6)))), HasSubstr("holds floats; input 'labels'"));
  EXPECT_THAT(refused(good, Npy("<i8", "(6,)", Bytes(std::vector<int64_t>{0, 1, 2, 3, 4, 5}))),
              HasSubstr("holds values in [0, 5]; input 'labels' takes 0..4 (the graph's classes"));
  EXPECT_THAT(refused(good, Npy("|u1", "(5,)", std::string(5, '\1'))), HasSubstr("has 5 samples and"));
  EXPECT_THAT(refused(Npy("<f4", "(6, 3)", Bytes(x), 1, true), ""), HasSubstr("Fortran order"));
  EXPECT_THAT(refused(Npy(">f4", "(6, 3)", Bytes(x)), ""), HasSubstr("element type '>f4'"));
  EXPECT_THAT(refused(Npy("<u2", "(6, 3)", std::string(36, '\0')), ""), HasSubstr("astype"));
  EXPECT_THAT(refused(Npy("<f4", "(6, 3)", Bytes(x).substr(4)), ""), HasSubstr("promises 72 bytes of data and the file holds 68"));
  EXPECT_THAT(refused("PK\3\4 a zip, not an array", ""), HasSubstr("no .npy magic"));
  EXPECT_THAT(refused(Npy("<f4", "(0, 3)", ""), ""), HasSubstr("holds no samples"));
  DataOptions missing = data;
  missing.targets_path = "/nonexistent/y.npy";
  EXPECT_EQ(MakeDataSource(g, missing, at::kCPU).status().code(), absl::StatusCode::kNotFound);
  std::remove(data.path.c_str());
}

TEST(TorchPickleTest, ReadsWhatAStateDictIsAndNamesWhatIsNot) {
  auto empty = ParseStateDictPickle(std::string("\x80\x02}q\x00.", 6));  // {}
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->empty());
  const std::pair<std::string, std::string> bad[] = {
      {std::string("\x80\x02K\x05.", 5), "holds no dict of tensors"},                            // 5
      {std::string("\x80\x02}q\x00(X\x01\x00\x00\x00" "aK\x01u.", 16), "'a' is no tensor"},  // {'a': 1}
      {std::string("\x80\x02}q", 4), "truncated"},
      {std::string("\x80\x02\xff", 3), "opcode 0xff"},
      {std::string("\x80\x02h\x07.", 5), "memo 7 was never set"},
      {std::string("\x80\x02" "cos\nsystem\nq\x00X\x02\x00\x00\x00lsq\x01\x85R.", 27), "a call of os.system"}};
  for (const auto& [pickle, why] : bad) {
    auto st = ParseStateDictPickle(pickle).status();
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << why;
    EXPECT_THAT(std::string(st.message()), HasSubstr(why));
  }
}

TEST(DataTest, SyntheticBoundsComeFromTheGraph) {
  v1::Graph bert = Zoo("bert-large:layers=1,hidden=32,heads=2,vocab=50,seq=8,classes=3,batch=64");
  EXPECT_EQ(*IndexBound(bert, "tokens"), 50);
  EXPECT_EQ(*IndexBound(bert, "segments"), 2);
  EXPECT_EQ(*IndexBound(bert, "labels"), 3);
  v1::Graph gpt = Zoo("gpt2:layers=1,hidden=32,heads=2,vocab=77,seq=8,batch=2");
  EXPECT_EQ(*IndexBound(gpt, "targets"), 77);  // through the loss's view
  EXPECT_EQ(InputRange(gpt, "targets")->high, 76);
  // A stated range is followed to the indices it reaches and must fit them.
  for (auto& in : *gpt.mutable_inputs()) {
    if (in.name() != "tokens") continue;
    in.mutable_value_range()->set_low(3);
    in.mutable_value_range()->set_high(70);
  }
  EXPECT_EQ(InputRange(gpt, "tokens")->low, 3);
  EXPECT_EQ(InputRange(gpt, "tokens")->high, 70);
  for (auto& in : *gpt.mutable_inputs()) {
    if (in.name() == "tokens") in.mutable_value_range()->set_high(80);
  }
  auto too_wide = InputRange(gpt, "tokens");
  ASSERT_FALSE(too_wide.ok());
  EXPECT_THAT(std::string(too_wide.status().message()), HasSubstr("ranges 3..80, so node"));
  EXPECT_THAT(std::string(too_wide.status().message()), HasSubstr("where it takes 0..76"));
  DataOptions data;
  data.seed = 9;
  auto source = MakeDataSource(bert, data, at::kCPU);
  ASSERT_TRUE(source.ok()) << source.status();
  auto batch = (*source)->Next();
  ASSERT_TRUE(batch.ok());
  EXPECT_EQ(batch->at("segments").max().item<int64_t>(), 1);
  EXPECT_EQ(batch->at("labels").max().item<int64_t>(), 2);
  EXPECT_LT(batch->at("tokens").max().item<int64_t>(), 50);
  // The same seed gives the same batches; the next batch differs.
  auto again = MakeDataSource(bert, data, at::kCPU);
  auto b2 = (*again)->Next();
  EXPECT_TRUE(at::equal(batch->at("tokens"), b2->at("tokens")));
  EXPECT_FALSE(at::equal(batch->at("tokens"), (*source)->Next()->at("tokens")));
}

// ---------------------------------------------------------------- errors

TEST(RuntimeErrorsTest, TrainingNeedsAScalarLoss) {
  GraphBuilder b("logits_only");
  const std::string x = b.Input("features", TensorType{v1::FLOAT32, {4, 8}}, "features");
  v1::InitRule init;
  init.set_kind(v1::InitRule::NORMAL);
  init.set_std(0.1);
  b.Output(b.Op("linear", {x, b.Param("fc.weight", TensorType{v1::FLOAT32, {3, 8}}, init)}));
  auto g = b.Build();
  ASSERT_TRUE(g.ok());
  auto t = Trainer::Create(*g, {});
  EXPECT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(t.status().message(), HasSubstr("output 0 ('linear') is f32[4,3], not a floating-point scalar"));
  EXPECT_THAT(t.status().message(), HasSubstr("returns its loss"));
  TrainerOptions o;
  o.loss_output = 1;
  EXPECT_EQ(Trainer::Create(*g, o).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(RuntimeErrorsTest, ShortOrNarrowTextIsRefused) {
  v1::Graph g = Zoo("gpt2:layers=1,hidden=32,heads=2,vocab=256,seq=16,batch=2");
  DataOptions data;
  data.source = DataOptions::Source::kText;
  data.path = TempFile("short.txt", "only sixteen b..");  // 16 bytes: a window needs 17
  auto s = MakeDataSource(g, data, at::kCPU);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("has 16 tokens; a training window needs seq+1 = 17"));
  std::remove(data.path.c_str());

  data.path = TempFile("long.txt", std::string(1000, 'x'));
  v1::Graph narrow = Zoo("gpt2:layers=1,hidden=32,heads=2,vocab=128,seq=16,batch=2");
  s = MakeDataSource(narrow, data, at::kCPU);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("vocabulary of 128; byte-level text needs at least 256"));
  std::remove(data.path.c_str());

  data.path = "/nonexistent/mapd.txt";
  EXPECT_EQ(MakeDataSource(g, data, at::kCPU).status().code(), absl::StatusCode::kNotFound);
  v1::Graph resnet = Zoo("resnet50:image=32,batch=2,classes=10");
  data.path = "unused";
  EXPECT_THAT(MakeDataSource(resnet, data, at::kCPU).status().message(), HasSubstr("no input of role 'tokens'"));
}

TEST(RuntimeErrorsTest, CudaWithoutCuda) {
  if (at::hasCUDA()) GTEST_SKIP() << "this LibTorch has CUDA and a GPU";
  auto d = ParseDevice("cuda");
  EXPECT_EQ(d.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(d.status().message(), HasSubstr("no CUDA support"));
  TrainerOptions o;
  o.executor.device = "cuda:0";
  EXPECT_EQ(Trainer::Create(Zoo("mlp:batch=2,in=4,hidden=4,layers=1,out=2"), o).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ParseDevice("tpu").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(ParseDevice("cpu").ok());
}

TEST(RuntimeErrorsTest, BadOptions) {
  EXPECT_EQ(ParseOptimizerKind("adam").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseDataSource("files").status().code(), absl::StatusCode::kInvalidArgument);
  TrainerOptions o;
  o.optimizer.lr = -1;
  auto t = Trainer::Create(Zoo("mlp:batch=2,in=4,hidden=4,layers=1,out=2"), o);
  EXPECT_THAT(t.status().message(), HasSubstr("lr=-1 must be positive"));
}


// bf16 mixed precision: a 16-bit parameter steps through an fp32 master. With SGD at lr 1e-4 and
// a gradient of 1, bf16 alone would round 1 - 1e-4 back to 1 at every step and never move; the
// master reaches 0.99 after 100 steps and the parameter is its rounding.
TEST(OptimizerTest, Bf16ParametersStepThroughFp32Masters) {
  at::Tensor p = at::ones({4}, at::kBFloat16).requires_grad_(true);
  OptimizerOptions o;
  o.kind = OptimizerOptions::Kind::kSgd;
  o.lr = 1e-4;
  auto opt = Optimizer::Create(o, {{"p", p}});
  ASSERT_TRUE(opt.ok()) << opt.status();
  EXPECT_EQ((*opt)->StateBytes(), 4 * 4);  // the master; plain SGD has no state
  for (int s = 0; s < 100; ++s) {
    p.mutable_grad() = at::ones({4}, at::kBFloat16);
    ASSERT_TRUE((*opt)->Step().ok());
  }
  const auto state = (*opt)->State();
  ASSERT_EQ(state.size(), 1u);
  ASSERT_TRUE(state[0].master.defined());
  EXPECT_EQ(state[0].master.scalar_type(), at::kFloat);
  EXPECT_NEAR(state[0].master[0].item<double>(), 0.99, 1e-5);
  EXPECT_EQ(p.scalar_type(), at::kBFloat16);
  EXPECT_EQ(p[0].item<double>(), state[0].master.to(at::kBFloat16)[0].item<double>());
  EXPECT_LT(p[0].item<double>(), 0.995);
  // AdamW keeps its moments in fp32 beside the master; a restored state brings the master back.
  at::Tensor q = at::ones({4}, at::kBFloat16).requires_grad_(true);
  OptimizerOptions adam;
  auto other = Optimizer::Create(adam, {{"p", q}});
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE((*other)->Restore(state, 100).ok());
  EXPECT_NEAR((*other)->State()[0].master[0].item<double>(), 0.99, 1e-5);
  q.mutable_grad() = at::ones({4}, at::kBFloat16);
  ASSERT_TRUE((*other)->Step().ok());
  EXPECT_EQ((*other)->State()[0].buf1.scalar_type(), at::kFloat);
  EXPECT_EQ((*other)->StateBytes(), 3 * 4 * 4);
}

// Learning-rate schedules (lr_schedule.h): a linear warm-up to the peak, then a cosine or linear
// decay to the floor at the run's last step, held after it; constant after the warm-up.
TEST(LrScheduleTest, WarmUpThenCosineOrLinearToTheFloor) {
  LrSchedule s;
  s.kind = LrSchedule::Kind::kCosine;
  s.warmup_steps = 4;
  s.min_lr = 0.1;
  s.total_steps = 14;
  ASSERT_TRUE(s.Validate(1.0).ok());
  EXPECT_DOUBLE_EQ(LearningRateAt(s, 1.0, 1), 0.25);
  EXPECT_DOUBLE_EQ(LearningRateAt(s, 1.0, 4), 1.0);
  EXPECT_NEAR(LearningRateAt(s, 1.0, 9), 0.55, 1e-12);  // half way: the cosine's middle
  EXPECT_NEAR(LearningRateAt(s, 1.0, 6), 0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI * 0.2)), 1e-12);
  EXPECT_DOUBLE_EQ(LearningRateAt(s, 1.0, 14), 0.1);
  EXPECT_DOUBLE_EQ(LearningRateAt(s, 1.0, 20), 0.1);
  s.kind = LrSchedule::Kind::kLinear;
  EXPECT_NEAR(LearningRateAt(s, 1.0, 9), 0.55, 1e-12);
  EXPECT_NEAR(LearningRateAt(s, 1.0, 6), 1.0 - 0.9 * 0.2, 1e-12);
  EXPECT_DOUBLE_EQ(LearningRateAt(s, 1.0, 14), 0.1);
  s.kind = LrSchedule::Kind::kConstant;
  s.min_lr = 0;
  EXPECT_DOUBLE_EQ(LearningRateAt(s, 2.0, 2), 1.0);
  EXPECT_DOUBLE_EQ(LearningRateAt(s, 2.0, 5), 2.0);
  EXPECT_DOUBLE_EQ(LearningRateAt(LrSchedule(), 2.0, 1), 2.0);
  // Errors name the flag to change.
  EXPECT_THAT(std::string(ParseLrScheduleKind("step").status().message()), HasSubstr("constant, cosine or linear"));
  LrSchedule bad = s;
  bad.min_lr = 0.5;
  EXPECT_THAT(std::string(bad.Validate(1.0).message()), HasSubstr("--lr-schedule cosine or linear"));
  bad.kind = LrSchedule::Kind::kCosine;
  bad.min_lr = 2;
  EXPECT_THAT(std::string(bad.Validate(1.0).message()), HasSubstr("--min-lr"));
  bad.min_lr = 0;
  bad.warmup_steps = 14;
  EXPECT_THAT(std::string(bad.Validate(1.0).message()), HasSubstr("fewer --warmup-steps"));
  bad.warmup_steps = -1;
  EXPECT_THAT(std::string(bad.Validate(1.0).message()), HasSubstr("--warmup-steps"));
}

// The optimizer updates at the schedule's rate of each step, and one restored at step 3 goes on
// at step 4's rate (a resumed run continues its schedule).
TEST(OptimizerTest, StepsAtTheScheduledRateAndResumesIt) {
  OptimizerOptions o;
  o.kind = OptimizerOptions::Kind::kSgd;
  o.lr = 1.0;
  o.schedule.kind = LrSchedule::Kind::kCosine;
  o.schedule.warmup_steps = 2;
  o.schedule.total_steps = 6;
  at::Tensor p = at::zeros({3}).requires_grad_(true);
  auto opt = Optimizer::Create(o, {{"p", p}});
  ASSERT_TRUE(opt.ok()) << opt.status();
  double moved = 0;
  for (int64_t step = 1; step <= 6; ++step) {
    p.mutable_grad() = at::ones({3});
    ASSERT_TRUE((*opt)->Step().ok());
    EXPECT_DOUBLE_EQ((*opt)->learning_rate(), LearningRateAt(o.schedule, 1.0, step));
    moved += LearningRateAt(o.schedule, 1.0, step);
    EXPECT_NEAR(p[0].item<double>(), -moved, 1e-6) << "step " << step;
  }
  EXPECT_NEAR(moved, 0.5 + 1.0 + 0.5 * (1 + std::cos(M_PI * 0.25)) + 0.5 + 0.5 * (1 + std::cos(M_PI * 0.75)) + 0.0, 1e-9);
  at::Tensor q = at::zeros({3}).requires_grad_(true);
  auto resumed = Optimizer::Create(o, {{"p", q}});
  ASSERT_TRUE(resumed.ok());
  ASSERT_TRUE((*resumed)->Restore((*opt)->State(), 3).ok());
  q.mutable_grad() = at::ones({3});
  ASSERT_TRUE((*resumed)->Step().ok());
  EXPECT_NEAR(q[0].item<double>(), -LearningRateAt(o.schedule, 1.0, 4), 1e-6);
  o.schedule.total_steps = 2;  // no step left to decay over
  EXPECT_THAT(std::string(Optimizer::Create(o, {{"p", q}}).status().message()), HasSubstr("fewer --warmup-steps"));
}

}  // namespace
}  // namespace mapd

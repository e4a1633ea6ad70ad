// The runtime against LibTorch itself: each TorchScript test model (traced or scripted by
// tests/import/models/make_models.py) is imported, executed by MAP's executor with the archive's
// weights, and compared with the same archive run by torch::jit — outputs, every parameter's
// gradient (matched by name, tied weights through their aliases) and, for BatchNorm in training
// mode, the updated running statistics. Also: MAP's optimizers against torch::optim.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/script.h>
#include <torch/types.h>
// (after torch/types.h, which clip_grad.h needs but does not include)
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <ATen/CPUGeneratorImpl.h>

#include "model/import/torchscript_importer.h"
#include "tests/runtime/test_models.h"
#include "worker/runtime/data.h"
#include "worker/runtime/executor.h"
#include "worker/runtime/optimizer.h"
#include "worker/runtime/trainer.h"

namespace mapd {
namespace {

// |a - b| <= tol + tol * |b| everywhere; the message gives the largest difference.
::testing::AssertionResult Close(const at::Tensor& a, const at::Tensor& b, double tol = 1e-5) {
  if (!a.defined() || !b.defined()) {
    return ::testing::AssertionFailure() << "undefined tensor: ours " << a.defined() << ", PyTorch's " << b.defined();
  }
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) {
    return ::testing::AssertionFailure() << "ours " << DescribeTensor(a) << ", PyTorch's " << DescribeTensor(b);
  }
  const at::Tensor ad = a.detach().to(at::kDouble), bd = b.detach().to(at::kDouble);
  const at::Tensor diff = (ad - bd).abs();
  if ((diff <= tol + tol * bd.abs()).all().item<bool>()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "max |difference| " << diff.max().item<double>() << " (max |value| "
                                       << bd.abs().max().item<double>() << ")";
}

void Flatten(const c10::IValue& v, std::vector<at::Tensor>* out) {
  if (v.isTensor()) {
    out->push_back(v.toTensor());
  } else if (v.isTuple()) {
    for (const auto& e : v.toTupleRef().elements()) Flatten(e, out);
  } else if (v.isList()) {
    for (const auto& e : v.toListRef()) Flatten(e, out);
  }
}

struct ParityCase {
  std::string file;
  bool buffers = false;  // compare the running statistics a train-mode forward updates
};

void PrintTo(const ParityCase& c, std::ostream* os) { *os << c.file; }

class TorchScriptParityTest : public ::testing::TestWithParam<ParityCase> {};

TEST_P(TorchScriptParityTest, OutputsGradientsAndBuffersEqualPyTorch) {
  const ParityCase& c = GetParam();
  const std::string& dir = testing_util::ModelsDir();
  ASSERT_FALSE(dir.empty());
  const std::string path = dir + "/" + c.file;
  ImportOptions opts;
  opts.inputs = testing_util::SpecsFor(c.file);
  auto graph = ImportTorchScript(path, opts);
  ASSERT_TRUE(graph.ok()) << graph.status();
  auto ex = Executor::Create(*graph, {});
  ASSERT_TRUE(ex.ok()) << ex.status();

  // Seeded inputs: integers within the range the graph allows (the embedding's rows).
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(11);
  TensorMap feed;
  std::vector<c10::IValue> args;
  for (const InputSpec& s : opts.inputs) {
    at::Tensor t;
    if (IsIntegral(s.type.dtype)) {
      auto bound = IndexBound(*graph, s.name);
      ASSERT_TRUE(bound.ok()) << bound.status();
      t = at::randint(0, *bound, s.type.shape, gen, at::TensorOptions().dtype(ToScalarType(s.type.dtype)));
    } else {
      t = at::randn(s.type.shape, gen, at::TensorOptions().dtype(ToScalarType(s.type.dtype)));
    }
    feed[s.name] = t;
    args.emplace_back(t.clone());
  }

  torch::jit::Module module = torch::jit::load(path);
  // Dropout draws from the default generator in the same order in both runs.
  at::manual_seed(5);
  auto ours = (*ex)->Run(feed, RunMode::kTrain);
  ASSERT_TRUE(ours.ok()) << ours.status();
  at::manual_seed(5);
  std::vector<at::Tensor> theirs;
  Flatten(module.forward(args), &theirs);
  ASSERT_EQ(ours->outputs.size(), theirs.size());
  for (size_t i = 0; i < theirs.size(); ++i) EXPECT_TRUE(Close(ours->outputs[i], theirs[i])) << "output " << i;

  // Backward of a scalar: the loss output if there is one, else a fixed random weighting of
  // output 0.
  auto reduce = [&](const std::vector<at::Tensor>& outs) {
    for (const at::Tensor& o : outs) {
      if (o.dim() == 0 && o.is_floating_point()) return o;
    }
    at::Tensor w = at::randn(outs[0].sizes(), at::make_generator<at::CPUGeneratorImpl>(13));
    return (outs[0] * w).sum();
  };
  reduce(ours->outputs).backward();
  reduce(theirs).backward();
  int compared = 0;
  for (const auto& p : module.named_parameters(/*recurse=*/true)) {
    const at::Tensor* mine = (*ex)->parameters().Find(p.name);
    ASSERT_NE(mine, nullptr) << "no parameter '" << p.name << "'";
    EXPECT_TRUE(Close(mine->grad(), p.value.grad())) << "gradient of " << p.name;
    ++compared;
  }
  EXPECT_GT(compared, 0);
  // Tied weights: every alias reaches the same tensor.
  for (const auto& tied : testing_util::Expected()[c.file]["tied"]) {
    const at::Tensor* first = (*ex)->parameters().Find(tied[0].get<std::string>());
    for (const auto& name : tied) {
      const at::Tensor* t = (*ex)->parameters().Find(name.get<std::string>());
      ASSERT_NE(t, nullptr) << name;
      EXPECT_TRUE(t->is_same(*first)) << name;
    }
  }

  if (c.buffers) {
    ASSERT_FALSE(ours->buffer_updates.empty());
    ASSERT_TRUE((*ex)->ApplyBufferUpdates(*ours).ok());
    int buffers = 0;
    for (const auto& b : module.named_buffers(/*recurse=*/true)) {
      const at::Tensor* mine = (*ex)->parameters().Find(b.name);
      ASSERT_NE(mine, nullptr) << "no buffer '" << b.name << "'";
      EXPECT_TRUE(Close(*mine, b.value)) << "buffer " << b.name;
      ++buffers;
    }
    EXPECT_EQ(buffers, testing_util::Expected()[c.file]["num_buffers"].get<int>());
  }
}

INSTANTIATE_TEST_SUITE_P(Models, TorchScriptParityTest,
                         ::testing::Values(ParityCase{"nanogpt_trace_eval.pt"},
                                           ParityCase{"nanogpt_loss_trace_train.pt"},  // dropout, seeded alike
                                           ParityCase{"llama_trace_train.pt"},
                                           ParityCase{"resnet_trace_train.pt", true},
                                           ParityCase{"resnet_trace_eval.pt"},
                                           ParityCase{"mlp_script.pt"},
                                           ParityCase{"mobile_trace_train.pt"},  // ReLU6 in place, clamps
                                           ParityCase{"folded_masks_trace_train.pt"},  // folded constants
                                           ParityCase{"convnext_block_trace_train.pt"},  // stochastic depth
                                           ParityCase{"swin_block_trace_train.pt"},  // pad, roll, index, slice writes
                                           ParityCase{"einsum_attention_trace_train.pt"},  // einsum
                                           ParityCase{"recurrent_trace_train.pt"},  // LSTM, GRU
                                           ParityCase{"t5_encoder_trace_train.pt"},  // bucketed relative bias
                                           ParityCase{"bert_trace_train.pt"},  // nn.TransformerEncoderLayer
                                           ParityCase{"neox_trace_train.pt"},  // parallel residual, partial rotary
                                           ParityCase{"vae_trace_train.pt"},  // randn_like
                                           ParityCase{"audio_encoder_trace_train.pt"},  // conv1d, group norm
                                           ParityCase{"diffusion_unet_trace_train.pt"},  // transposed conv, resizing
                                           ParityCase{"topk_moe_trace_train.pt"},  // topk, scatter, one_hot
                                           ParityCase{"message_passing_trace_train.pt"},  // gather, index_add
                                           ParityCase{"torch_layers_trace_train.pt"},  // nn.Transformer{En,De}coder, MHA
                                           ParityCase{"signal_ops_script.pt"}),  // scripted: conv1d, sort, unbind, ...
                         [](const ::testing::TestParamInfo<ParityCase>& info) {
                           return info.param.file.substr(0, info.param.file.find('.'));
                         });

// nanoGPT's forward returns (logits, loss): the trainer takes the loss from output 1, and
// refuses output 0 (logits) with a message saying why.
TEST(ImportedTrainingTest, NanoGptWithLossTrainsFromOutputOne) {
  const std::string& dir = testing_util::ModelsDir();
  ASSERT_FALSE(dir.empty());
  const std::string file = "nanogpt_loss_trace_train.pt";
  ImportOptions opts;
  opts.inputs = testing_util::SpecsFor(file);
  auto graph = ImportTorchScript(dir + "/" + file, opts);
  ASSERT_TRUE(graph.ok()) << graph.status();

  auto refused = Trainer::Create(*graph, {});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), ::testing::HasSubstr("is f32[2,16,96], not a floating-point scalar"));

  TrainerOptions o;
  o.loss_output = 1;
  o.optimizer.lr = 1e-2;
  auto trainer = Trainer::Create(*graph, o);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  auto source = MakeDataSource(*graph, {}, at::kCPU);  // synthetic; bounds from the graph
  ASSERT_TRUE(source.ok()) << source.status();
  auto batch = (*source)->Next();
  ASSERT_TRUE(batch.ok());
  double first = 0, last = 0;
  for (int i = 0; i < 15; ++i) {  // one batch, fitted (with dropout on)
    auto r = (*trainer)->Step(*batch);
    ASSERT_TRUE(r.ok()) << r.status();
    if (i == 0) first = r->loss;
    last = r->loss;
  }
  EXPECT_NEAR(first, std::log(96.0), 0.2);
  EXPECT_LT(last, 0.8 * first);
}

// ---------------------------------------------------------------- optimizers vs torch::optim

struct Pair {
  std::vector<at::Tensor> ours, theirs;
};

Pair MakeParams() {
  at::manual_seed(21);
  Pair p;
  for (auto shape : {std::vector<int64_t>{5, 3}, std::vector<int64_t>{7}}) {
    at::Tensor t = at::randn(shape);
    p.ours.push_back(t.clone().set_requires_grad(true));
    p.theirs.push_back(t.clone().set_requires_grad(true));
  }
  return p;
}

// Gives both sets the same fresh gradients.
void SetGrads(Pair& p, int step) {
  at::manual_seed(100 + step);
  for (size_t i = 0; i < p.ours.size(); ++i) {
    at::Tensor g = at::randn(p.ours[i].sizes());
    p.ours[i].mutable_grad() = g.clone();
    p.theirs[i].mutable_grad() = g.clone();
  }
}

std::unique_ptr<Optimizer> Ours(const OptimizerOptions& o, const Pair& p) {
  auto opt = Optimizer::Create(o, {{"a", p.ours[0]}, {"b", p.ours[1]}});
  EXPECT_TRUE(opt.ok()) << opt.status();
  return opt.ok() ? std::move(*opt) : nullptr;
}

TEST(OptimizerParityTest, SgdWithMomentumAndWeightDecayMatchesTorchOptim) {
  Pair p = MakeParams();
  OptimizerOptions o;
  o.kind = OptimizerOptions::Kind::kSgd;
  o.lr = 0.1;
  o.momentum = 0.9;
  o.weight_decay = 0.01;
  auto ours = Ours(o, p);
  torch::optim::SGD theirs(p.theirs, torch::optim::SGDOptions(0.1).momentum(0.9).weight_decay(0.01));
  for (int step = 0; step < 3; ++step) {
    SetGrads(p, step);
    ASSERT_TRUE(ours->Step().ok());
    theirs.step();
    for (size_t i = 0; i < p.ours.size(); ++i) EXPECT_TRUE(Close(p.ours[i], p.theirs[i], 1e-6)) << step;
  }
  EXPECT_EQ(ours->StateBytes(), (15 + 7) * 4);
}

TEST(OptimizerParityTest, AdamWMatchesTorchOptim) {
  Pair p = MakeParams();
  OptimizerOptions o;
  o.lr = 1e-2;
  o.beta2 = 0.99;
  o.weight_decay = 0.1;
  auto ours = Ours(o, p);
  torch::optim::AdamW theirs(
      p.theirs, torch::optim::AdamWOptions(1e-2).betas({0.9, 0.99}).eps(1e-8).weight_decay(0.1));
  for (int step = 0; step < 4; ++step) {
    SetGrads(p, step);
    ASSERT_TRUE(ours->Step().ok());
    theirs.step();
    for (size_t i = 0; i < p.ours.size(); ++i) EXPECT_TRUE(Close(p.ours[i], p.theirs[i], 1e-6)) << step;
  }
  EXPECT_EQ(ours->StateBytes(), 2 * (15 + 7) * 4);
  // A parameter without a gradient is skipped and its state left alone.
  p.ours[0].mutable_grad().reset();
  p.ours[1].mutable_grad() = at::ones({7});
  const at::Tensor before = p.ours[0].detach().clone();
  ASSERT_TRUE(ours->Step().ok());
  EXPECT_TRUE(at::equal(before, p.ours[0]));
}

TEST(OptimizerParityTest, GradientClippingMatchesClipGradNorm) {
  Pair p = MakeParams();
  OptimizerOptions o;
  o.kind = OptimizerOptions::Kind::kSgd;
  o.lr = 0.5;
  o.max_grad_norm = 0.3;
  auto ours = Ours(o, p);
  torch::optim::SGD theirs(p.theirs, torch::optim::SGDOptions(0.5));
  SetGrads(p, 0);
  ASSERT_TRUE(ours->Step().ok());
  torch::nn::utils::clip_grad_norm_(p.theirs, 0.3);
  theirs.step();
  for (size_t i = 0; i < p.ours.size(); ++i) EXPECT_TRUE(Close(p.ours[i], p.theirs[i], 1e-6));
  EXPECT_EQ(ours->StateBytes(), 0);
}

}  // namespace
}  // namespace mapd

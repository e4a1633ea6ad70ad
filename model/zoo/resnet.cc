// ResNet-50 (torchvision layout and names): a 7x7 stem, four stages of Bottleneck blocks
// [3, 4, 6, 3] with the stride on the 3x3 conv (v1.5), global average pooling and fc.
// BatchNorm runs in training mode (synchronised: batch_norm_stats, batch_norm_apply and
// batch_norm_running_stats), so each one also yields its running statistics, which
// the graph records as buffer updates.
#include "absl/strings/str_cat.h"
#include "model/ir/attrs.h"
#include "model/zoo/family.h"
#include "model/zoo/layers.h"

namespace mapd {
namespace {

constexpr int64_t kExpansion = 4;  // Bottleneck output channels = 4 * planes

std::string BatchNorm(Layers& L, const std::string& module, const std::string& x) {
  if (!L.ok()) return "";
  GraphBuilder& b = L.b();
  ScopeGuard scope(b, module);
  const int64_t c = L.ShapeOf(x)[1];
  const std::string w = L.Param("weight", {c}, OnesInit());
  const std::string bias = L.Param("bias", {c}, ZerosInit());
  const std::string mean = L.Buffer("running_mean", {c}, ZerosInit());
  const std::string var = L.Buffer("running_var", {c}, OnesInit());
  // Synchronised batch norm (ops_norm.cc): per-channel sums, then the normalisation.
  const Shape& shape = L.ShapeOf(x);
  const int64_t count = NumElements(shape) / c;
  const std::string stats = b.Op("batch_norm_stats", {x});
  const std::string y = b.Op("batch_norm_apply", {x, stats, w, bias}, Attrs().Int("count", count).Float("eps", 1e-5));
  const auto running = b.Node("batch_norm_running_stats", {stats, mean, var}, Attrs().Int("count", count).Float("momentum", 0.1));
  if (running.size() != 2) return "";
  b.BufferUpdate(mean, running[0]);
  b.BufferUpdate(var, running[1]);
  return y;
}

std::string ConvBn(Layers& L, const std::string& conv, const std::string& bn, const std::string& x,
                   int64_t out, int64_t kernel, int64_t stride, int64_t padding) {
  return BatchNorm(L, bn, L.Conv2d(conv, x, out, kernel, stride, padding, false));
}

std::string Relu(Layers& L, const std::string& x) { return L.b().Op("relu", {x}); }

std::string Bottleneck(Layers& L, const std::string& x, int64_t planes, int64_t stride, bool downsample) {
  std::string out = Relu(L, ConvBn(L, "conv1", "bn1", x, planes, 1, 1, 0));
  out = Relu(L, ConvBn(L, "conv2", "bn2", out, planes, 3, stride, 1));
  out = ConvBn(L, "conv3", "bn3", out, planes * kExpansion, 1, 1, 0);
  std::string identity = x;
  if (downsample) {
    ScopeGuard ds(L.b(), "downsample");
    identity = ConvBn(L, "0", "1", x, planes * kExpansion, 1, stride, 0);
  }
  return Relu(L, L.Add(out, identity));
}

absl::Status BuildResnet(ModelOptions& o, GraphBuilder& b) {
  const int64_t batch = o.Size("batch"), image = o.Size("image"), classes = o.Size("classes");
  const DType dtype = o.FloatDType("dtype");
  // Five stride-2 steps: smaller images leave nothing for the last stage to convolve.
  o.Require(image >= 32, "image=", image, " is too small for ResNet-50 (at least 32)");
  if (!o.status().ok()) return o.status();

  Layers L(b, dtype);
  const std::string images = b.Input("images", TensorType{dtype, {batch, 3, image, image}}, "images");
  const std::string labels = L.IndexInput("labels", {batch}, "labels");
  std::string x = Relu(L, ConvBn(L, "conv1", "bn1", images, 64, 7, 2, 3));
  {
    ScopeGuard pool(b, "maxpool");
    x = b.Op("max_pool2d", {x}, Attrs().Ints("kernel_size", {3, 3}).Ints("stride", {2, 2}).Ints("padding", {1, 1}));
  }
  const int64_t blocks[] = {3, 4, 6, 3};
  int64_t planes = 64;
  for (int stage = 0; stage < 4; ++stage, planes *= 2) {
    for (int64_t i = 0; i < blocks[stage]; ++i) {
      ScopeGuard scope(b, absl::StrCat("layer", stage + 1, ".", i));
      // The first block of each stage changes the width (and, after stage 1, halves the size).
      const int64_t stride = (i == 0 && stage > 0) ? 2 : 1;
      x = Bottleneck(L, x, planes, stride, i == 0);
    }
  }
  {
    ScopeGuard pool(b, "avgpool");
    x = b.Op("adaptive_avg_pool2d", {x}, Attrs().Ints("output_size", {1, 1}));
  }
  x = b.Op("flatten", {x}, Attrs().Int("start_dim", 1));
  const int64_t features = planes / 2 * kExpansion;  // planes was doubled after the last stage
  L.ClassificationLoss(L.Linear("fc", x, classes, true, KaimingUniformInit(features), FanInBiasInit(features)),
                       labels);
  return absl::OkStatus();
}

}  // namespace

std::vector<ZooEntry> ResnetModels() {
  std::vector<ZooOption> o = {
      BatchOption(),
      {"image", "224", "image height and width"},
      {"classes", "1000", "classifier outputs"},
      DTypeOption(),
  };
  return {{{"resnet50", "resnet", "ResNet-50 v1.5 (He et al. 2016; torchvision)", 25557032, std::move(o)},
           BuildResnet}};
}

}  // namespace mapd

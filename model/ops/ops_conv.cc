// Convolution, pooling and resizing over NCHW (or CHW) tensors: conv2d, conv_transpose2d,
// max_pool2d, avg_pool2d, adaptive_avg_pool2d, upsample (nearest, bilinear). 1-D convolutions
// and pooling are these over [N, C, 1, L] (the importer unsqueezes, as LibTorch itself does).
#include <algorithm>
#include <vector>

#include "common/status_macros.h"
#include "model/ops/registry.h"
#include "model/ops/shape_util.h"

namespace mapd {
namespace {

using Types = std::vector<TensorType>;

// A 2-D convolution's window attributes, read after checking the input ([n,] c, h, w) and the
// 4-D weight.
struct ConvWindow {
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups = 1;
};

absl::StatusOr<ConvWindow> ReadConvWindow(const OpContext& ctx) {
  MAPD_RETURN_IF_ERROR(ExpectRank(ctx, 0, 3, 4, "input"));
  MAPD_RETURN_IF_ERROR(ExpectRank(ctx, 1, 4, 4, "weight"));
  MAPD_RETURN_IF_ERROR(ExpectFloating(ctx, 0, "input"));
  ConvWindow w;
  MAPD_ASSIGN_OR_RETURN(w.stride, Pair(ctx, "stride", {1}));
  MAPD_ASSIGN_OR_RETURN(w.padding, Pair(ctx, "padding", {0}));
  MAPD_ASSIGN_OR_RETURN(w.dilation, Pair(ctx, "dilation", {1}));
  MAPD_ASSIGN_OR_RETURN(w.groups, ctx.Int("groups", 1));
  return w;
}

absl::StatusOr<Types> InferConv2d(const OpContext& ctx) {
  const TensorType& x = ctx.input(0);
  const TensorType& w = ctx.input(1);
  MAPD_ASSIGN_OR_RETURN(ConvWindow win, ReadConvWindow(ctx));
  const auto& [stride, padding, dilation, groups] = win;
  const int c_dim = x.rank() - 3;
  const int64_t c = x.shape[c_dim];
  if (groups <= 0 || c % groups != 0 || w.shape[0] % groups != 0) {
    return ctx.Error("groups=", groups, " must divide input channels (", c, ") and output channels (",
                     w.shape[0], ")");
  }
  if (w.shape[1] * groups != c) {
    return ctx.Error("weight ", w.ToString(), " expects ", w.shape[1] * groups, " input channels, input ",
                     x.ToString(), " has ", c);
  }
  if (ctx.has_input(2) && ctx.input(2).shape != Shape{w.shape[0]}) {
    return ctx.Error("bias ", ctx.input(2).ToString(), " must have shape [", w.shape[0], "]");
  }
  Shape out(x.shape.begin(), x.shape.begin() + c_dim);
  out.push_back(w.shape[0]);
  for (int i = 0; i < 2; ++i) {
    MAPD_ASSIGN_OR_RETURN(int64_t o, WindowOutputSize(ctx, x.shape[c_dim + 1 + i], w.shape[2 + i], stride[i],
                                                      padding[i], dilation[i], false));
    out.push_back(o);
  }
  return Types{{x.dtype, out}};
}

// conv_transpose2d(x[n, c, h, w], weight[c, o/groups, i, j], bias?[o]): the gradient of a
// conv2d with respect to its input; out = (in - 1) * stride - 2 * padding + dilation * (k - 1)
// + output_padding + 1.
absl::StatusOr<Types> InferConvTranspose2d(const OpContext& ctx) {
  const TensorType& x = ctx.input(0);
  const TensorType& w = ctx.input(1);
  MAPD_ASSIGN_OR_RETURN(ConvWindow win, ReadConvWindow(ctx));
  const auto& [stride, padding, dilation, groups] = win;
  MAPD_ASSIGN_OR_RETURN(auto output_padding, Pair(ctx, "output_padding", {0}));
  const int c_dim = x.rank() - 3;
  const int64_t c = x.shape[c_dim];
  if (groups <= 0 || c % groups != 0 || w.shape[0] != c) {
    return ctx.Error("weight ", w.ToString(), " must have the input's ", c, " channels first, divisible by groups=", groups);
  }
  const int64_t o = w.shape[1] * groups;
  if (ctx.has_input(2) && ctx.input(2).shape != Shape{o}) {
    return ctx.Error("bias ", ctx.input(2).ToString(), " must have shape [", o, "]");
  }
  Shape out(x.shape.begin(), x.shape.begin() + c_dim);
  out.push_back(o);
  for (int i = 0; i < 2; ++i) {
    if (stride[i] <= 0 || dilation[i] <= 0) return ctx.Error("stride and dilation must be positive");
    if (output_padding[i] >= std::max(stride[i], dilation[i])) {
      return ctx.Error("output_padding ", output_padding[i], " must be smaller than the stride or the dilation");
    }
    const int64_t size = (x.shape[c_dim + 1 + i] - 1) * stride[i] - 2 * padding[i] + dilation[i] * (w.shape[2 + i] - 1) +
                         output_padding[i] + 1;
    if (size <= 0) return ctx.Error("output size ", size, " in spatial dimension ", i, " is not positive");
    out.push_back(size);
  }
  return Types{{x.dtype, out}};
}

// upsample(x[n, c, h, w], output_size, mode): nearest or bilinear resizing to output_size; the
// scales PyTorch was given (scale_h/scale_w) map coordinates when present, as in LibTorch.
absl::StatusOr<Types> InferUpsample(const OpContext& ctx) {
  const TensorType& x = ctx.input(0);
  MAPD_RETURN_IF_ERROR(ExpectRank(ctx, 0, 4, 4, "input"));
  MAPD_RETURN_IF_ERROR(ExpectFloating(ctx, 0, "input"));
  MAPD_ASSIGN_OR_RETURN(std::vector<int64_t> size, ctx.Ints("output_size"));
  MAPD_ASSIGN_OR_RETURN(std::string mode, ctx.Str("mode", "nearest"));
  if (mode != "nearest" && mode != "bilinear") return ctx.Error("mode '", mode, "' is not nearest or bilinear");
  if (size.size() != 2 || size[0] <= 0 || size[1] <= 0) {
    return ctx.Error("output_size must be two positive sizes, got ", ShapeToString(size));
  }
  if (mode == "nearest" && ctx.has_attr("align_corners")) return ctx.Error("align_corners applies to bilinear only");
  return Types{{x.dtype, {x.shape[0], x.shape[1], size[0], size[1]}}};
}

absl::StatusOr<Types> InferPool(const OpContext& ctx, bool is_max) {
  const TensorType& x = ctx.input(0);
  MAPD_RETURN_IF_ERROR(ExpectRank(ctx, 0, 3, 4, "input"));
  MAPD_ASSIGN_OR_RETURN(auto kernel, Pair(ctx, "kernel_size", {}));
  // Absent or stride=[] means "same as kernel", as in PyTorch (max_pool2d(x, 2) traces with
  // stride=[]).
  MAPD_ASSIGN_OR_RETURN(std::vector<int64_t> stride_list, ctx.Ints("stride", {}));
  std::vector<int64_t> stride = kernel;
  if (!stride_list.empty()) {
    MAPD_ASSIGN_OR_RETURN(stride, Pair(ctx, "stride", kernel));
  }
  MAPD_ASSIGN_OR_RETURN(auto padding, Pair(ctx, "padding", {0}));
  std::vector<int64_t> dilation = {1, 1};
  if (is_max) {
    MAPD_ASSIGN_OR_RETURN(dilation, Pair(ctx, "dilation", {1}));
  }
  MAPD_ASSIGN_OR_RETURN(bool ceil_mode, ctx.Bool("ceil_mode", false));
  for (int i = 0; i < 2; ++i) {
    if (padding[i] * 2 > kernel[i]) {
      return ctx.Error("padding ", padding[i], " must be at most half the kernel size ", kernel[i]);
    }
  }
  Shape out(x.shape.begin(), x.shape.end() - 2);
  for (int i = 0; i < 2; ++i) {
    MAPD_ASSIGN_OR_RETURN(int64_t o, WindowOutputSize(ctx, x.shape[x.rank() - 2 + i], kernel[i], stride[i],
                                                      padding[i], dilation[i], ceil_mode));
    out.push_back(o);
  }
  return Types{{x.dtype, out}};
}

absl::StatusOr<Types> InferAdaptiveAvgPool(const OpContext& ctx) {
  const TensorType& x = ctx.input(0);
  MAPD_RETURN_IF_ERROR(ExpectRank(ctx, 0, 3, 4, "input"));
  MAPD_ASSIGN_OR_RETURN(auto size, Pair(ctx, "output_size", {}));
  if (size[0] <= 0 || size[1] <= 0) return ctx.Error("output_size must be positive, got ", ShapeToString(size));
  Shape out(x.shape.begin(), x.shape.end() - 2);
  out.push_back(size[0]);
  out.push_back(size[1]);
  return Types{{x.dtype, out}};
}


// ---- costs and saved tensors ----

// The channel block of oneDNN's blocked layouts on this host: 16 floats (one 512-bit vector)
// where the CPU has AVX-512, 8 (one 256-bit vector) where it has AVX2 only (nChw16c vs nChw8c).
// Measured: 8 -> 8 and 24 -> 24 channel 3x3 convolutions on an AVX2 EPYC need no padding
// (padded to 16 they were predicted +33% and +10%).
int64_t OneDnnChannelBlock() {
#if defined(__x86_64__) || defined(__i386__)
  static const int64_t block = __builtin_cpu_supports("avx512f") ? 16 : 8;
  return block;
#else
  return 16;
#endif
}

// On AVX2 (a channel block of 8) oneDNN's backward for the weight leaves its JIT kernel for a
// GEMM over plain layouts where an output side is no longer than that side's padding (a 3x3
// convolution padded 1 on 1x1 and 2x2 maps, a 5x5 padded 2 on 4x4; ONEDNN_VERBOSE shows
// "x64:gemm:jit ... backward_weights"); its scratchpad is four weights and one sample's im2col
// columns per thread (measured with MAPD_ALLOC_TRACE: 1, 2, 3, 4 intra-op threads gave 4, 8, 12,
// 16 weights, for 3x3, 5x5 and 7x7 kernels and 64-512 channels). Ranks and this machine's one
// process run one intra-op thread. Returns that scratchpad, or 0 where the JIT kernel runs.
int64_t GemmWeightGradientScratch(const CostContext& c, int64_t block) {
  if (block != 8) return 0;  // AVX-512's kernels were exact without it (ResNet-18 at 32 pixels)
  auto window = ReadConvWindow(c.op);
  if (!window.ok()) return 0;
  const TensorType& w = c.op.input(1);
  const TensorType& out = c.outputs[0];
  const int64_t oh = out.shape[out.rank() - 2], ow = out.shape[out.rank() - 1];
  if (oh > 2 * window->padding[0] && ow > 2 * window->padding[1]) return 0;
  const int64_t columns = w.shape[1] * w.shape[2] * w.shape[3] * oh * ow * DTypeSize(w.dtype);
  return 4 * w.NumBytes() + columns;
}

// LibTorch's CPU convolution runs through oneDNN, which computes into blocked copies with
// channels padded to its channel block and reorders them (measured with MAPD_ALLOC_TRACE):
// forward, a blocked output; backward for the input, blocked copies of the output's and the
// input's gradients and one reordered weight before the plain input gradient; for the weight,
// blocked copies of the input and of the output's gradient. A 1x1 convolution of aligned
// channels needs none.
void SetOneDnnWorkspace(const CostContext& c, OpCost* cost, bool transposed) {
  const int64_t block = OneDnnChannelBlock();
  auto round_up = [block](int64_t n) { return (n + block - 1) / block * block; };
  auto padded = [&](const TensorType& t) {
    const int cd = t.rank() - 3;
    const int64_t ch = std::max<int64_t>(t.shape[cd], 1);
    return t.NumBytes() / ch * round_up(ch);
  };
  const TensorType& in = c.op.input(0);
  const TensorType& w = c.op.input(1);
  const TensorType& out = c.outputs[0];
  auto g = c.op.Int("groups", 1);
  const int64_t groups = g.ok() ? std::max<int64_t>(*g, 1) : 1;
  const int64_t in_channels = in.rank() >= 3 ? in.shape[in.rank() - 3] : 1;
  const bool pointwise = w.shape[2] * w.shape[3] == 1;
  if (pointwise && groups == 1 && in_channels % block == 0 && out.shape[out.rank() - 3] % block == 0) {
    // Measured: 512 -> 512 at 1x1, 4x4 and 32x32, 192 -> 192: exact with no workspace (with
    // the copies below a 32x32 one was predicted +64%).
    cost->workspace_bytes = 0;
    cost->grad_workspace_bytes = 0;
    return;
  }
  // A transposed convolution (oneDNN's deconvolution) computes into its plain output and its
  // input's gradient in both directions, with only a small reordered weight beside them
  // (measured with MAPD_ALLOC_TRACE: 16 -> 16 channels kernel 2 and 16 -> 8 kernel 3, stride 2;
  // the padded copies below predicted +18%).
  if (transposed) {
    cost->workspace_bytes = 0;
    cost->grad_workspace_bytes = 0;
    return;
  }
  cost->workspace_bytes = padded(out);
  // The weight's gradient: blocked copies — measured on depthwise 3x3 convolutions of 24
  // channels (two padded copies; of 64, where padding is nothing, exact) and the 8- and
  // 16-channel test ResNet — except a first layer's few-channel input (oneDNN keeps fewer than
  // 8 plain: RGB images).
  const int64_t in_copy = groups == 1 && in_channels < 8 ? in.NumBytes() : padded(in);
  // The weight in the blocked layout: output and input channels (per group) padded to the block,
  // or the groups padded to it for grouped ones; 1x1 kernels are used as they are. The JIT kernel
  // computes the weight's gradient so, and LibTorch reorders it to a plain one while the blocked
  // one lives (the copies freed by then: a 256 -> 256 3x3 on 3x3 maps was predicted -18%
  // without it); the input's gradient reads one reordered copy of the weight (below).
  const int64_t kernel = w.shape[2] * w.shape[3] * DTypeSize(w.dtype);
  const int64_t blocked_w = pointwise     ? 0
                            : groups == 1 ? round_up(w.shape[0]) * round_up(w.shape[1]) * kernel
                                          : round_up(groups) * (w.shape[0] / groups) * w.shape[1] * kernel;
  const int64_t gemm_scratch = GemmWeightGradientScratch(c, block);
  const int64_t for_weight = gemm_scratch > 0 ? gemm_scratch : std::max(in_copy + padded(out), blocked_w);
  if (!c.input_requires_grad(0)) {
    cost->grad_workspace_bytes = for_weight;
    return;
  }
  // The input's gradient: one blocked copy of the weight (a 512x512 3x3 weight adds 9.0 MiB,
  // not four times that).
  // A few-channel input's gradient is computed plain too (a 1-channel waveform's Conv1d: the
  // padded copy predicted +88%).
  const int64_t in_grad_copy = groups == 1 && in_channels < 8 ? in.NumBytes() : padded(in);
  const int64_t for_input = padded(out) + in_grad_copy + blocked_w - in.NumBytes();
  cost->grad_workspace_bytes = std::max(for_input, for_weight);
}

// A conv2d's output element is a dot product of w.shape[1]*kh*kw inputs with the weight; a
// transposed convolution's input element scatters into w.shape[1]*kh*kw outputs (its weight is
// [in, out/groups, kh, kw]). The gradients cost the same again each.
CostFn ConvCost(bool transposed) {
  return [transposed](const CostContext& c) {
    const TensorType& w = c.op.input(1);
    const double per = 2.0 * static_cast<double>(w.shape[1] * w.shape[2] * w.shape[3]);
    const double outs = static_cast<double>(c.outputs[0].NumElements());
    const double macs = per * (transposed ? static_cast<double>(c.op.input(0).NumElements()) : outs);
    OpCost cost;
    cost.flops = macs + (c.op.has_input(2) ? outs : 0);
    cost.grad_flops = {c.input_requires_grad(0) ? macs : 0, c.input_requires_grad(1) ? macs : 0,
                       c.input_requires_grad(2) ? outs : 0};
    cost.bytes = IoBytes(c);
    SetOneDnnWorkspace(c, &cost, transposed);
    return cost;
  };
}

// The input is kept for the weight's gradient and the weight for the input's.
SavedSpec Conv2dSaved(const CostContext& c) {
  SavedSpec s;
  if (c.input_requires_grad(1)) s.inputs.push_back(0);
  if (c.input_requires_grad(0)) s.inputs.push_back(1);
  return s;
}

OpCost UpsampleCost(const CostContext& c) {
  OpCost cost = CopyCost(c);
  auto mode = c.op.Str("mode", "nearest");
  const double per = mode.ok() && *mode == "bilinear" ? 8 : 1;
  cost.flops = per * static_cast<double>(c.outputs[0].NumElements());
  cost.grad_flops = {c.input_requires_grad(0) ? per * static_cast<double>(c.outputs[0].NumElements()) : 0};
  return cost;
}

OpCost PoolCost(const CostContext& c) {
  auto k = c.op.Ints("kernel_size", {1});
  double window = 1;
  if (k.ok()) {
    for (int64_t v : *k) window *= static_cast<double>(v);
    if (k->size() == 1) window *= window;
  }
  OpCost cost;
  cost.flops = window * static_cast<double>(c.outputs[0].NumElements());
  cost.grad_flops = {c.input_requires_grad(0) ? static_cast<double>(c.op.input(0).NumElements()) : 0};
  cost.bytes = IoBytes(c);
  return cost;
}

// max_pool2d_with_indices keeps the input and an int64 index per output element.
SavedSpec MaxPoolSaved(const CostContext& c) {
  SavedSpec s;
  if (!c.any_requires_grad()) return s;
  s.inputs = {0};
  s.extra_bytes = c.outputs[0].NumElements() * 8;
  return s;
}

// ---- sharding rules (docs/sharding.md) ----

// conv2d: x[n, c, h, w] (or [c, h, w]), weight[o, c/groups, i, j], bias[o] -> y[n, o, y, x].
// The batch and the output channels split; the input channels are summed (linear: y Partial,
// the bias Partial too) when groups == 1. With groups > 1 an output channel reads only its
// group's input channels, and the weight's second dimension is c/groups: a device with part
// of the output channels would need a conv of fewer groups on its groups' input channels,
// which the lowering does not make (LibTorch refuses the local weight under the global
// groups — EfficientNet's depthwise convs on ranks), so both channel dimensions are
// unsplittable and a grouped conv splits over the batch only. Spatial dimensions are
// unsplittable: a window straddles a split (a halo exchange would be needed).
//
// conv_transpose2d: x[n, c, h, w], weight[c, o, i, j] (o per group), bias[o]: the same with the
// weight's channel dimensions the other way round (grouped: its o is a group's share, d the
// output's channels).
ShardingFn ConvSharding(bool transposed) {
  return [transposed](const CostContext& c) -> absl::StatusOr<ShardingRule> {
    ShardingRule r = EmptyRule(c);
    const bool batched = c.op.input(0).rank() == 4;
    auto groups = c.op.Int("groups", 1);
    const bool grouped = !groups.ok() || *groups != 1;
    const std::string n = batched ? "n" : "";
    const char out_channels = transposed && grouped ? 'd' : 'o';
    r.inputs[0] = n + "chw";
    r.inputs[1] = transposed ? "coij" : (grouped ? "odij" : "ocij");
    r.outputs[0] = n + out_channels + "yx";
    r.unsplittable = grouped ? "hwijyxcdo" : "hwijyx";
    if (!grouped) r.linear_reduced = "c";
    if (c.op.has_input(2)) {
      r.inputs[2] = std::string(1, out_channels);
      if (!grouped) r.addends = {2};
    }
    return r;
  };
}

// Pooling: batch and channels split; the pooled spatial dimensions are unsplittable.
absl::StatusOr<ShardingRule> PoolSharding(const CostContext& c) {
  ShardingRule r = EmptyRule(c);
  const std::string lead = c.op.input(0).rank() == 4 ? "nc" : "c";
  r.inputs[0] = lead + "hw";
  r.outputs[0] = lead + "yx";
  r.unsplittable = "hwyx";
  return r;
}

}  // namespace

void RegisterConvOps(OpRegistry& r) {
  r.Add(Op("conv2d", "2-D convolution (NCHW)")
          .Inputs({{"x"}, {"weight"}, {"bias", true}})
          .Attrs({{"stride", AttrKind::kInts}, {"padding", AttrKind::kInts}, {"dilation", AttrKind::kInts},
                     {"groups", AttrKind::kInt}})
          .Infer(InferConv2d)
          .Cost(ConvCost(false))
          .Saved(Conv2dSaved)
          .Sharding(ConvSharding(false)));
  r.Add(Op("conv_transpose2d", "2-D transposed convolution (NCHW; weight [in, out/groups, kh, kw])")
          .Inputs({{"x"}, {"weight"}, {"bias", true}})
          .Attrs({{"stride", AttrKind::kInts}, {"padding", AttrKind::kInts}, {"output_padding", AttrKind::kInts},
                     {"dilation", AttrKind::kInts}, {"groups", AttrKind::kInt}})
          .Infer(InferConvTranspose2d)
          .Cost(ConvCost(true))
          .Saved(Conv2dSaved)
          .Sharding(ConvSharding(true)));
  // The backward needs only sizes: nothing is kept.
  r.Add(Op("upsample", "resize the spatial dims to output_size, mode nearest | bilinear")
          .Inputs({{"x"}})
          .Attrs({{"output_size", AttrKind::kInts, true}, {"mode", AttrKind::kString},
                     {"align_corners", AttrKind::kBool}, {"scale_h", AttrKind::kFloat}, {"scale_w", AttrKind::kFloat}})
          .Infer(InferUpsample)
          .Cost(UpsampleCost)
          .Saved(SavesNothing())
          .Sharding(PoolSharding));
  r.Add(Op("max_pool2d", "2-D max pooling")
          .Inputs({{"x"}})
          .Attrs({{"kernel_size", AttrKind::kInts, true}, {"stride", AttrKind::kInts}, {"padding", AttrKind::kInts},
                     {"dilation", AttrKind::kInts}, {"ceil_mode", AttrKind::kBool}})
          .Infer([](const OpContext& c) { return InferPool(c, true); })
          .Cost(PoolCost)
          .Saved(MaxPoolSaved)
          .Sharding(PoolSharding));
  r.Add(Op("avg_pool2d", "2-D average pooling")
          .Inputs({{"x"}})
          .Attrs({{"kernel_size", AttrKind::kInts, true}, {"stride", AttrKind::kInts}, {"padding", AttrKind::kInts},
                     {"ceil_mode", AttrKind::kBool}, {"count_include_pad", AttrKind::kBool},
                     {"divisor_override", AttrKind::kInt}})
          .Infer([](const OpContext& c) { return InferPool(c, false); })
          .Cost(PoolCost)
          .Saved(Saves({0}, {}))
          .Sharding(PoolSharding));
  r.Add(Op("adaptive_avg_pool2d", "average pooling to a fixed output size")
          .Inputs({{"x"}})
          .Attrs({{"output_size", AttrKind::kInts, true}})
          .Infer(InferAdaptiveAvgPool)
          .Cost(ReduceCost())
          .Saved(Saves({0}, {}))
          .Sharding(PoolSharding));
}

}  // namespace mapd

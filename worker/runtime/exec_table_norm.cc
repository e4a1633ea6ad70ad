// The exec table's normalisation ops (see exec_table.h): layer_norm, rms_norm, batch_norm, the
// synchronised batch norm's batch_norm_stats, batch_norm_apply and batch_norm_running_stats (over
// groups of samples too; their backwards written out as autograd functions), group_norm, softmax
// and log_softmax. exec_table.cc's BuildTable adds them with AddNormOps.
#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <vector>

#include "worker/runtime/exec_table.h"
#include "worker/runtime/exec_table_internal.h"

namespace mapd {
namespace exec_internal {
namespace {

using Outs = std::vector<at::Tensor>;

Outs LayerNorm(const ExecContext& c) {
  return {at::layer_norm(c.in(0), c.Ints("normalized_shape", {}), Opt(c, 1), Opt(c, 2), c.Float("eps", 1e-5))};
}

// x * rsqrt(mean(x^2 over the normalized dims) + eps) * weight, as LLaMA's RMSNorm. The default
// eps (1e-5) is the registry's (model/ops/ops_norm.cc).
Outs RmsNorm(const ExecContext& c) {
  const at::Tensor& x = c.in(0);
  const int64_t n = static_cast<int64_t>(c.Ints("normalized_shape", {}).size());
  std::vector<int64_t> dims;
  for (int64_t i = 1; i <= n; ++i) dims.push_back(-i);
  at::Tensor r = at::rsqrt(x.pow(2).mean(dims, /*keepdim=*/true).add(c.Float("eps", 1e-5)));
  at::Tensor y = x * r;
  if (c.has_input(1)) y = y * c.in(1);
  return {y};
}

// Training mode with running statistics: at::batch_norm updates CLONES of the running stats
// in place and the clones are outputs 1 and 2 (the IR is functional; the graph's buffer
// updates copy them into the buffers after the step).
Outs BatchNorm(const ExecContext& c) {
  const bool training = c.Bool("training", false);
  const double momentum = c.Float("momentum", 0.1), eps = c.Float("eps", 1e-5);
  if (training && c.has_input(3) && c.has_input(4)) {
    at::Tensor mean = c.in(3).clone(), var = c.in(4).clone();
    at::Tensor y = at::batch_norm(c.in(0), Opt(c, 1), Opt(c, 2), mean, var, true, momentum, eps, true);
    return {y, mean, var};
  }
  return {at::batch_norm(c.in(0), Opt(c, 1), Opt(c, 2), Opt(c, 3), Opt(c, 4), training, momentum, eps, true)};
}
// Synchronised batch norm (ops_norm.cc): batch_norm_stats sums x and x² per channel (f64);
// batch_norm_apply normalises by mean = s0 / count and var = s1 / count - mean². Their
// backwards are written out so that the statistics' gradient reaches the sums (and, through
// the GRAD_SYNC the lowering puts on the replicated stats, every rank's share of the batch).
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// 16-bit inputs are normalised in f32, as ATen's batch norm accumulates them.
at::ScalarType NormComputeType(const at::Tensor& x) {
  return x.scalar_type() == at::kBFloat16 || x.scalar_type() == at::kHalf ? at::kFloat : x.scalar_type();
}

// x · scale[c] + shift[c] by ATen's evaluation-mode batch norm with mean 0, variance 1 and eps 0
// (so its scale is exactly `scale`): one fused pass, where addcmul's broadcast is ~3x slower on CPU.
at::Tensor AffinePerChannel(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift) {
  return at::batch_norm(x, scale, shift, at::zeros_like(scale), at::ones_like(scale), /*training=*/false,
                        /*momentum=*/0.0, /*eps=*/0.0, /*cudnn_enabled=*/false);
}

// `one_group`: the sums as [1, 2, C] (one group of samples), made here so that the apply can
// see that its statistics are this function's output (BatchNormApplyFn's own-statistics case).
struct BatchNormStatsFn : torch::autograd::Function<BatchNormStatsFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, bool one_group) {
    ctx->save_for_backward({x});
    ctx->set_materialize_grads(false);  // the apply sends none when it differentiated them itself
    // One pass in x's precision by ATen's batch-norm statistics kernel (on CPU ~3x faster than
    // at::var_mean over the same dimensions); the sums are formed in f64 from the local moments.
    auto [mean, var] = at::batch_norm_update_stats(x.to(NormComputeType(x)), {}, {}, /*momentum=*/0.0);
    const double n = static_cast<double>(x.numel() / std::max<int64_t>(x.size(1), 1));
    const at::Tensor m = mean.to(at::kDouble);
    const at::Tensor sums = at::stack({m * n, (var.to(at::kDouble) + m * m) * n});
    return one_group ? sums.unsqueeze(0) : sums;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    if (!grad[0].defined()) return {at::Tensor(), at::Tensor()};
    const at::Tensor x = ctx->get_saved_variables()[0];
    const at::Tensor g = grad[0].to(NormComputeType(x)).reshape({2, -1});
    return {AffinePerChannel(x.to(g.scalar_type()), 2 * g[1], g[0]).to(x.scalar_type()), at::Tensor()};
  }
};

// True when `stats` is BatchNormStatsFn's output for this very x (the same autograd value) over
// `count` samples per channel: nothing (no all-reduce) stands between them, so the apply's
// backward can differentiate through the statistics itself, as ATen's training batch norm does.
bool StatsOfThisInput(const at::Tensor& x, const at::Tensor& stats, int64_t count) {
  if (!x.requires_grad() || !stats.requires_grad() || x.numel() != count * x.size(1)) return false;
  const auto* node = dynamic_cast<torch::autograd::CppNode<BatchNormStatsFn>*>(stats.grad_fn().get());
  if (node == nullptr || node->num_inputs() != 1) return false;
  const torch::autograd::Edge edge = torch::autograd::impl::gradient_edge(x);
  return edge.function != nullptr && node->next_edge(0) == edge;
}

// weight and bias are always tensors here (ones and zeros for an absent one: autograd cannot
// take an undefined input); their gradients are dropped where they need none. stats is [2, C]
// or one group's [1, 2, C].
struct BatchNormApplyFn : torch::autograd::Function<BatchNormApplyFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& stats,
                            const at::Tensor& weight, const at::Tensor& bias, int64_t count, double eps) {
    const at::Tensor sums = stats.reshape({2, -1});
    const at::Tensor mean = sums[0] / static_cast<double>(count);
    const at::Tensor var = (sums[1] / static_cast<double>(count) - mean * mean).clamp_min(0);
    const at::Tensor scale = weight.to(at::kDouble) * (var + eps).rsqrt();
    const at::Tensor shift = bias.to(at::kDouble) - mean * scale;
    const at::ScalarType type = NormComputeType(x);
    ctx->save_for_backward({x, weight, mean, var});
    ctx->saved_data["count"] = count;
    ctx->saved_data["eps"] = eps;
    ctx->saved_data["stats_dim"] = stats.dim();
    ctx->saved_data["own_stats"] = StatsOfThisInput(x, stats, count);
    return AffinePerChannel(x.to(type), scale.to(type), shift.to(type)).to(x.scalar_type());
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &weight = saved[1], &mean = saved[2], &var = saved[3];
    const double count = static_cast<double>(ctx->saved_data["count"].toInt());
    const double eps = ctx->saved_data["eps"].toDouble();
    const at::ScalarType type = NormComputeType(x);
    const at::Tensor gy = grad[0].to(type).contiguous();
    const at::Tensor invstd = (var + eps).rsqrt();
    if (ctx->saved_data["own_stats"].toBool()) {
      // ATen's training backward: x's whole gradient, through the mean and variance too, in one
      // kernel; the statistics get none (BatchNormStatsFn then adds nothing to x's).
      auto [dx, gw, gb] = at::native_batch_norm_backward(gy, x.to(type), weight.to(type), {}, {}, mean.to(type),
                                                         invstd.to(type), /*train=*/true, eps, {true, true, true});
      return {dx.to(x.scalar_type()), at::Tensor(), gw.to(weight.scalar_type()), gb.to(weight.scalar_type()),
              at::Tensor(), at::Tensor()};
    }
    // ATen's evaluation-mode backward: gy·w·invstd, sum(gy·(x - mean))·invstd and sum(gy), in one kernel.
    auto [dx, gw, gb] = at::native_batch_norm_backward(gy, x.to(type), weight.to(type), mean.to(type), var.to(type), {},
                                                       {}, /*train=*/false, eps, {true, true, true});
    // The statistics' share: d/dmean and d/dvar of sum(gy·y), carried to the sums.
    const at::Tensor w = weight.to(at::kDouble);
    const at::Tensor sum_gy = gb.to(at::kDouble), sum_gy_xmu = gw.to(at::kDouble) / invstd;
    const at::Tensor g_mean = -w * invstd * sum_gy;
    const at::Tensor g_var = -0.5 * w * invstd * invstd * invstd * sum_gy_xmu;
    at::Tensor g_stats = at::stack({(g_mean - 2 * mean * g_var) / count, g_var / count});
    if (ctx->saved_data["stats_dim"].toInt() == 3) g_stats = g_stats.unsqueeze(0);
    return {dx.to(x.scalar_type()), g_stats, gw.to(weight.scalar_type()), gb.to(weight.scalar_type()), at::Tensor(),
            at::Tensor()};
  }
};

// Batch norm over groups of samples (ops_norm.cc): G groups of x [N, C, ...] are the channels
// of x' [N / G, G * C, ...] (group g's channel c is x' channel g * C + c), so the ungrouped
// functions compute them; one group (what a rank holds when the batch is split in groups) is
// x itself.
at::Tensor GroupsAsChannels(const at::Tensor& x, int64_t groups) {
  std::vector<int64_t> split = {groups, x.size(0) / groups};
  for (int64_t d = 1; d < x.dim(); ++d) split.push_back(x.size(d));
  std::vector<int64_t> merged = {x.size(0) / groups, groups * x.size(1)};
  for (int64_t d = 2; d < x.dim(); ++d) merged.push_back(x.size(d));
  return x.reshape(split).transpose(0, 1).reshape(merged);
}
at::Tensor ChannelsAsGroups(const at::Tensor& y, const at::IntArrayRef shape, int64_t groups) {
  std::vector<int64_t> split = {y.size(0), groups, shape[1]};
  for (size_t d = 2; d < shape.size(); ++d) split.push_back(shape[d]);
  return y.reshape(split).transpose(0, 1).reshape(shape);
}

Outs BatchNormStats(const ExecContext& c) {
  const at::Tensor& x = c.in(0);
  const int64_t group_size = c.Int("group_size", 0);
  if (group_size <= 0) return {BatchNormStatsFn::apply(x, false)};
  const int64_t groups = x.size(0) / group_size, channels = x.size(1);
  if (groups == 1) return {BatchNormStatsFn::apply(x, true)};
  // [2, G * C] -> [G, 2, C]
  return {BatchNormStatsFn::apply(GroupsAsChannels(x, groups), false)
              .reshape({2, groups, channels})
              .transpose(0, 1)
              .contiguous()};
}

Outs BatchNormApply(const ExecContext& c) {
  const at::Tensor& x = c.in(0);
  const auto per_channel = x.options().dtype(x.scalar_type()).requires_grad(false);
  const at::Tensor weight = c.has_input(2) ? c.in(2) : at::ones({x.size(1)}, per_channel);
  const at::Tensor bias = c.has_input(3) ? c.in(3) : at::zeros({x.size(1)}, per_channel);
  const int64_t count = c.Int("count", 2);
  const double eps = c.Float("eps", 1e-5);
  const at::Tensor& stats = c.in(1);
  if (stats.dim() == 2) return {BatchNormApplyFn::apply(x, stats, weight, bias, count, eps)};
  const int64_t groups = stats.size(0);
  if (groups == 1) return {BatchNormApplyFn::apply(x, stats, weight, bias, count, eps)};
  const at::Tensor flat_stats = stats.transpose(0, 1).reshape({2, groups * x.size(1)});
  const at::Tensor y = BatchNormApplyFn::apply(GroupsAsChannels(x, groups), flat_stats, weight.repeat({groups}),
                                               bias.repeat({groups}), count, eps);
  return {ChannelsAsGroups(y, x.sizes(), groups)};
}

// The running statistics move as at::batch_norm moves them (unbiased variance), from the
// global sums; they are new tensors (the graph's buffer updates copy them in after the step).
Outs BatchNormRunningStats(const ExecContext& c) {
  at::NoGradGuard no_grad;
  const double count = static_cast<double>(c.Int("count", 2)), momentum = c.Float("momentum", 0.1);
  const at::Tensor stats = c.in(0).dim() == 3 ? c.in(0).detach().sum(0) : c.in(0).detach();  // the groups' sums added
  const at::Tensor mean = stats[0] / count;
  const at::Tensor unbiased = (stats[1] / count - mean * mean).clamp_min(0) * (count / (count - 1));
  const at::Tensor &rm = c.in(1), &rv = c.in(2);
  return {(rm.to(at::kDouble) * (1 - momentum) + mean * momentum).to(rm.scalar_type()),
          (rv.to(at::kDouble) * (1 - momentum) + unbiased * momentum).to(rv.scalar_type())};
}

Outs GroupNorm(const ExecContext& c) {
  return {at::group_norm(c.in(0), c.Int("num_groups", 1), Opt(c, 1), Opt(c, 2), c.Float("eps", 1e-5), true)};
}

c10::optional<at::ScalarType> SoftmaxDType(const ExecContext& c) {
  if (c.has("dtype")) return c.DType("dtype", at::kFloat);
  if (!at::isFloatingType(c.in(0).scalar_type())) return at::kFloat;  // as the registry infers
  return c10::nullopt;
}
Outs Softmax(const ExecContext& c) { return {at::softmax(c.in(0), c.Int("dim", -1), SoftmaxDType(c))}; }
Outs LogSoftmax(const ExecContext& c) { return {at::log_softmax(c.in(0), c.Int("dim", -1), SoftmaxDType(c))}; }

}  // namespace

void AddNormOps(ExecTable& t) {
  auto add = [&t](const char* op, ExecFn fn, const char* saved) { t.Add({op, std::move(fn), saved}); };
  add("layer_norm", LayerNorm, "x, weight, bias, and per-row mean and rstd (x.shape[:-n] + [1]*n)");
  add("rms_norm", RmsNorm,
      "x (pow and the x*r product), x^2 (full size: mean over dims keeps its input in LibTorch 1.13), "
      "r = rsqrt(mean(x^2)+eps) (x.shape[:-n] + [1]*n), y1 = x*r (full size) and weight (the *weight product)");
  add("batch_norm", BatchNorm,
      "x, weight, and per-channel save_mean and save_invstd ([C]); training also reads the running-stat clones "
      "(outputs 1, 2). Eval: x, weight, running_mean, running_var");
  add("batch_norm_stats", BatchNormStats, "x");
  add("batch_norm_apply", BatchNormApply,
      "x, weight (all ones when there is none), and per-channel f64 mean and variance ([C])");
  add("batch_norm_running_stats", BatchNormRunningStats, "nothing (no gradient)");
  add("group_norm", GroupNorm, "x, weight, and per-(sample, group) mean and rstd ([N, num_groups], x's dtype)");
  add("softmax", Softmax, "the output");
  add("log_softmax", LogSoftmax, "the output");
}

}  // namespace exec_internal
}  // namespace mapd

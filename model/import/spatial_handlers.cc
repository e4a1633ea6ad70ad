// Convolutions, pooling, resizing and the per-group normalisations as aten writes them:
// _convolution / conv1d / conv2d / conv_transpose{1,2}d, max/avg/adaptive pooling in 1-D and
// 2-D, upsample_{nearest,bilinear}2d, group_norm and instance_norm. A 1-D op becomes the 2-D op
// over [N, C, 1, L] between an unsqueeze and a squeeze — LibTorch's CPU kernels do the same
// (convolution's view1d_as_2d, max_pool1d_with_indices and avg_pool1d unsqueeze(-2)), so the
// results and what autograd keeps are theirs.
#include "common/status_macros.h"
#include "model/import/importer_internal.h"

namespace mapd {
namespace import_internal {
namespace {

// A 1-D window parameter as the 2-D op's: {fill, v} (stride [2] -> [1, 2]); [] stays [] (a
// pooling stride that defaults to the kernel).
std::vector<int64_t> AsRow(const std::vector<int64_t>& v, int64_t fill) {
  if (v.empty()) return v;
  return {fill, v[0]};
}

// Runs `emit` on x unsqueezed to [N, C, 1, L] when `one_d`, and squeezes its result back.
Result InRow(Importer& im, Node* n, bool one_d, const std::string& x,
             const std::function<absl::StatusOr<std::string>(const std::string&)>& emit) {
  std::string in = x;
  if (one_d) {
    MAPD_ASSIGN_OR_RETURN(in, EmitTensor(im, n, "unsqueeze", {x}, Attrs().Int("dim", -2)));
  }
  MAPD_ASSIGN_OR_RETURN(std::string out, emit(in));
  if (!one_d) return std::vector<AValue>{AValue::Tensor(out)};
  return One(im.Emit1(n, "squeeze", {out}, Attrs().Ints("dims", {-2})));
}

// The argument layouts of the convolution ops.
enum class ConvForm {
  kFull,        // _convolution(x, w, b, stride, padding, dilation, transposed, output_padding, groups, ...)
  kConv,        // conv1d / conv2d(x, w, b, stride, padding, dilation, groups)
  kTransposed,  // conv_transpose1d / 2d(x, w, b, stride, padding, output_padding, groups, dilation)
};

// padding as a list, or the strings 'valid' and 'same' (odd kernels only: PyTorch pads an even
// one asymmetrically, which conv2d's symmetric padding cannot say).
absl::StatusOr<std::vector<int64_t>> ConvPadding(Importer& im, Node* n, const Args& a, const Shape& w) {
  if (a[4].kind != AValue::Kind::kConst || !a[4].constant.isString()) return im.IntListArg(n, a, 4);
  const std::string mode = a[4].constant.toStringRef();
  std::vector<int64_t> padding;
  for (size_t d = 2; d < w.size(); ++d) {
    if (mode == "valid") {
      padding.push_back(0);
    } else if (w[d] % 2 == 0) {
      return im.Error(n, "padding='same' with an even kernel is not supported (pad explicitly)");
    } else {
      padding.push_back(w[d] / 2);
    }
  }
  return padding;
}

Result Conv(Importer& im, Node* n, const Args& a, ConvForm form) {
  MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
  MAPD_ASSIGN_OR_RETURN(std::string w, im.TensorArg(n, a, 1));
  MAPD_ASSIGN_OR_RETURN(std::string b, im.OptionalTensorArg(n, a, 2));
  const Shape ws = im.builder().TypeOf(w)->shape;
  if (ws.size() != 3 && ws.size() != 4) {
    return im.Error(n, absl::StrCat("only 1-D and 2-D convolutions are supported (weight of rank ", ws.size(), ")"));
  }
  const bool one_d = ws.size() == 3;
  MAPD_ASSIGN_OR_RETURN(std::vector<int64_t> stride, im.IntListArg(n, a, 3));
  MAPD_ASSIGN_OR_RETURN(std::vector<int64_t> padding, ConvPadding(im, n, a, ws));
  std::vector<int64_t> dilation, output_padding;
  int64_t groups = 1;
  bool transposed = form == ConvForm::kTransposed;
  if (form == ConvForm::kFull) {
    MAPD_ASSIGN_OR_RETURN(dilation, im.IntListArg(n, a, 5));
    MAPD_ASSIGN_OR_RETURN(transposed, im.BoolArg(n, a, 6));
    MAPD_ASSIGN_OR_RETURN(output_padding, im.IntListArg(n, a, 7));
    MAPD_ASSIGN_OR_RETURN(groups, im.IntArg(n, a, 8));
  } else if (form == ConvForm::kConv) {
    MAPD_ASSIGN_OR_RETURN(dilation, im.IntListArg(n, a, 5));
    MAPD_ASSIGN_OR_RETURN(groups, im.IntArg(n, a, 6));
  } else {
    MAPD_ASSIGN_OR_RETURN(output_padding, im.IntListArg(n, a, 5));
    MAPD_ASSIGN_OR_RETURN(groups, im.IntArg(n, a, 6));
    MAPD_ASSIGN_OR_RETURN(dilation, im.IntListArg(n, a, 7));
  }
  std::string weight = w;
  if (one_d) {
    MAPD_ASSIGN_OR_RETURN(weight, EmitTensor(im, n, "unsqueeze", {w}, Attrs().Int("dim", -2)));
    stride = AsRow(stride, 1);
    padding = AsRow(padding, 0);
    dilation = AsRow(dilation, 1);
    output_padding = AsRow(output_padding, 0);
  }
  Attrs attrs;
  attrs.Ints("stride", stride).Ints("padding", padding).Ints("dilation", dilation).Int("groups", groups);
  if (transposed) attrs.Ints("output_padding", output_padding.empty() ? std::vector<int64_t>{0} : output_padding);
  const std::string op = transposed ? "conv_transpose2d" : "conv2d";
  return InRow(im, n, one_d, x, [&](const std::string& in) { return EmitTensor(im, n, op, {in, weight, b}, attrs); });
}

// max_pool{1,2}d(x, kernel, stride, padding, dilation, ceil_mode).
Handler MaxPool(bool one_d) {
  return [one_d](Importer& im, Node* n, const Args& a) -> Result {
    MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
    MAPD_ASSIGN_OR_RETURN(std::vector<int64_t> k, im.IntListArg(n, a, 1));
    MAPD_ASSIGN_OR_RETURN(std::vector<int64_t> s, im.IntListArg(n, a, 2));
    MAPD_ASSIGN_OR_RETURN(std::vector<int64_t> p, im.IntListArg(n, a, 3));
    MAPD_ASSIGN_OR_RETURN(std::vector<int64_t> d, im.IntListArg(n, a, 4));
    MAPD_ASSIGN_OR_RETURN(bool ceil, im.BoolArg(n, a, 5));
    if (s.empty()) s = k;
    if (one_d) {
      k = AsRow(k, 1), s = AsRow(s, 1), p = AsRow(p, 0), d = AsRow(d, 1);
    }
    const Attrs attrs =
        Attrs().Ints("kernel_size", k).Ints("stride", s).Ints("padding", p).Ints("dilation", d).Bool("ceil_mode", ceil);
    return InRow(im, n, one_d, x, [&](const std::string& in) { return EmitTensor(im, n, "max_pool2d", {in}, attrs); });
  };
}

// avg_pool1d(x, kernel, stride, padding, ceil_mode, count_include_pad);
// avg_pool2d(..., count_include_pad, divisor_override).
Handler AvgPool(bool one_d) {
  return [one_d](Importer& im, Node* n, const Args& a) -> Result {
    MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
    MAPD_ASSIGN_OR_RETURN(std::vector<int64_t> k, im.IntListArg(n, a, 1));
    MAPD_ASSIGN_OR_RETURN(std::vector<int64_t> s, im.IntListArg(n, a, 2));
    MAPD_ASSIGN_OR_RETURN(std::vector<int64_t> p, im.IntListArg(n, a, 3));
    MAPD_ASSIGN_OR_RETURN(bool ceil, im.BoolArg(n, a, 4));
    MAPD_ASSIGN_OR_RETURN(bool include_pad, im.BoolArg(n, a, 5));
    std::optional<int64_t> divisor;
    if (!one_d) {
      MAPD_ASSIGN_OR_RETURN(divisor, im.OptionalIntArg(n, a, 6));
    }
    if (s.empty()) s = k;
    if (one_d) {
      k = AsRow(k, 1), s = AsRow(s, 1), p = AsRow(p, 0);
    }
    Attrs attrs;
    attrs.Ints("kernel_size", k).Ints("stride", s).Ints("padding", p).Bool("ceil_mode", ceil).Bool("count_include_pad", include_pad);
    if (divisor) attrs.Int("divisor_override", *divisor);
    return InRow(im, n, one_d, x, [&](const std::string& in) { return EmitTensor(im, n, "avg_pool2d", {in}, attrs); });
  };
}

Handler AdaptiveAvgPool(bool one_d) {
  return [one_d](Importer& im, Node* n, const Args& a) -> Result {
    MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
    MAPD_ASSIGN_OR_RETURN(std::vector<int64_t> size, im.IntListArg(n, a, 1));
    if (one_d) size = AsRow(size, 1);
    const Attrs attrs = Attrs().Ints("output_size", size);
    return InRow(im, n, one_d, x,
                 [&](const std::string& in) { return EmitTensor(im, n, "adaptive_avg_pool2d", {in}, attrs); });
  };
}

// A list of numbers (F.interpolate's scale factors); nullopt for None.
absl::StatusOr<std::optional<std::vector<double>>> OptionalDoubleListArg(Importer& im, Node* n, const Args& a, int i) {
  if (static_cast<size_t>(i) >= a.size() || a[i].is_none()) return std::optional<std::vector<double>>();
  if (a[i].kind == AValue::Kind::kConst && a[i].constant.isDoubleList()) {
    std::vector<double> v;
    for (double d : a[i].constant.toDoubleVector()) v.push_back(d);
    return std::optional<std::vector<double>>(v);
  }
  if (a[i].kind == AValue::Kind::kList || a[i].kind == AValue::Kind::kTuple) {
    std::vector<double> v;
    for (size_t k = 0; k < a[i].items.size(); ++k) {
      MAPD_ASSIGN_OR_RETURN(double d, im.DoubleArg(n, a[i].items, static_cast<int>(k)));
      v.push_back(d);
    }
    return std::optional<std::vector<double>>(v);
  }
  return im.Error(n, absl::StrCat("argument ", i, " should be a list of numbers or None"));
}

// upsample_{nearest,bilinear}2d: the .vec forms (input, output_size?, [align_corners,]
// scale_factors?) that F.interpolate traces to, and the sized forms (input, output_size,
// [align_corners,] scales_h?, scales_w?). The size is output_size, or floor(in * scale) as
// LibTorch computes it; given scales also map coordinates, as in LibTorch.
Handler Upsample(const std::string& mode) {
  return [mode](Importer& im, Node* n, const Args& a) -> Result {
    MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
    const Shape& in = im.builder().TypeOf(x)->shape;
    if (in.size() != 4) return im.Error(n, "2-D resizing needs an [N, C, H, W] input");
    const bool bilinear = mode == "bilinear";
    const int scales_at = bilinear ? 3 : 2;
    Attrs attrs;
    attrs.Str("mode", mode);
    if (bilinear) {
      MAPD_ASSIGN_OR_RETURN(bool align, im.BoolArg(n, a, 2));
      attrs.Bool("align_corners", align);
    }
    std::vector<int64_t> size;
    if (!a[1].is_none()) {
      MAPD_ASSIGN_OR_RETURN(size, im.IntListArg(n, a, 1));
    }
    std::vector<std::optional<double>> scales(2);
    const bool vec_form = a.size() == static_cast<size_t>(scales_at + 1);
    if (vec_form) {
      MAPD_ASSIGN_OR_RETURN(auto factors, OptionalDoubleListArg(im, n, a, scales_at));
      if (factors) {
        if (factors->size() != 2) return im.Error(n, "scale_factors must have two entries");
        scales = {(*factors)[0], (*factors)[1]};
      }
    } else {
      for (int i = 0; i < 2; ++i) {
        if (static_cast<size_t>(scales_at + i) < a.size() && !a[scales_at + i].is_none()) {
          MAPD_ASSIGN_OR_RETURN(double f, im.DoubleArg(n, a, scales_at + i));
          scales[i] = f;
        }
      }
    }
    if (size.empty()) {
      if (!scales[0] || !scales[1]) return im.Error(n, "needs an output size or scale factors");
      for (int i = 0; i < 2; ++i) size.push_back(static_cast<int64_t>(static_cast<double>(in[2 + i]) * *scales[i]));
    }
    attrs.Ints("output_size", size);
    if (scales[0]) attrs.Float("scale_h", *scales[0]);
    if (scales[1]) attrs.Float("scale_w", *scales[1]);
    return One(im.Emit1(n, "upsample", {x}, attrs));
  };
}

// group_norm(input, num_groups, weight?, bias?, eps, cudnn_enabled).
Result GroupNorm(Importer& im, Node* n, const Args& a) {
  MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
  MAPD_ASSIGN_OR_RETURN(int64_t groups, im.IntArg(n, a, 1));
  MAPD_ASSIGN_OR_RETURN(std::string w, im.OptionalTensorArg(n, a, 2));
  MAPD_ASSIGN_OR_RETURN(std::string b, im.OptionalTensorArg(n, a, 3));
  MAPD_ASSIGN_OR_RETURN(double eps, im.DoubleArg(n, a, 4));
  return One(im.Emit1(n, "group_norm", {x, w, b}, Attrs().Int("num_groups", groups).Float("eps", eps)));
}

// instance_norm(input, weight?, bias?, running_mean?, running_var?, use_input_stats, momentum,
// eps, cudnn_enabled) with the input's statistics is group_norm with a group per channel (the
// same statistics: per sample and channel over the spatial dimensions).
Result InstanceNorm(Importer& im, Node* n, const Args& a) {
  MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
  MAPD_ASSIGN_OR_RETURN(std::string w, im.OptionalTensorArg(n, a, 1));
  MAPD_ASSIGN_OR_RETURN(std::string b, im.OptionalTensorArg(n, a, 2));
  MAPD_ASSIGN_OR_RETURN(bool use_input_stats, im.BoolArg(n, a, 5));
  MAPD_ASSIGN_OR_RETURN(double eps, im.DoubleArg(n, a, 7));
  if (!use_input_stats || !a[3].is_none() || !a[4].is_none()) {
    return im.Error(n, "instance_norm with running statistics (track_running_stats=True) is not supported; "
                       "use InstanceNorm without them");
  }
  const Shape& shape = im.builder().TypeOf(x)->shape;
  if (shape.size() < 3) return im.Error(n, "instance_norm needs an [N, C, ...] input with spatial dimensions");
  return One(im.Emit1(n, "group_norm", {x, w, b}, Attrs().Int("num_groups", shape[1]).Float("eps", eps)));
}

Handler ConvAs(ConvForm form) {
  return [form](Importer& im, Node* n, const Args& a) { return Conv(im, n, a, form); };
}

}  // namespace

void AddSpatialHandlers(std::map<std::string, Handler>& m) {
  m["aten::_convolution"] = ConvAs(ConvForm::kFull);
  m["aten::conv1d"] = m["aten::conv2d"] = ConvAs(ConvForm::kConv);
  m["aten::conv_transpose1d"] = m["aten::conv_transpose2d"] = ConvAs(ConvForm::kTransposed);
  m["aten::max_pool1d"] = MaxPool(true);
  m["aten::max_pool2d"] = MaxPool(false);
  m["aten::avg_pool1d"] = AvgPool(true);
  m["aten::avg_pool2d"] = AvgPool(false);
  m["aten::adaptive_avg_pool1d"] = AdaptiveAvgPool(true);
  m["aten::adaptive_avg_pool2d"] = AdaptiveAvgPool(false);
  m["aten::upsample_nearest2d"] = Upsample("nearest");
  m["aten::upsample_bilinear2d"] = Upsample("bilinear");
  m["aten::group_norm"] = GroupNorm;
  m["aten::instance_norm"] = InstanceNorm;
}

}  // namespace import_internal
}  // namespace mapd

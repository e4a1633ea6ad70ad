// Creation ops (no tensor inputs): arange, zeros, ones, full, and the random bernoulli, rand, randn.
#include <cmath>

#include "common/status_macros.h"
#include "model/ops/registry.h"
#include "model/ops/shape_util.h"

namespace mapd {
namespace {

using Types = std::vector<TensorType>;

absl::StatusOr<Types> InferArange(const OpContext& ctx) {
  MAPD_ASSIGN_OR_RETURN(double start, ctx.Float("start", 0));
  MAPD_ASSIGN_OR_RETURN(double end, ctx.Float("end"));
  MAPD_ASSIGN_OR_RETURN(double step, ctx.Float("step", 1));
  if (step == 0) return ctx.Error("step must not be 0");
  const double n = std::ceil((end - start) / step);
  if (n < 0) return ctx.Error("range [", start, ", ", end, ") with step ", step, " goes the wrong way");
  bool any_float = false;
  for (const char* k : {"start", "end", "step"}) {
    const v1::AttrValue* a = ctx.Attr(k);
    any_float |= a != nullptr && a->value_case() == v1::AttrValue::kF;
  }
  MAPD_ASSIGN_OR_RETURN(DType dtype, ctx.DTypeAttr("dtype", any_float ? v1::FLOAT32 : v1::INT64));
  return Types{{dtype, {static_cast<int64_t>(n)}}};
}

absl::StatusOr<Types> InferFilled(const OpContext& ctx) {
  MAPD_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ctx.Ints("shape"));
  for (int64_t d : shape) {
    if (d < 0) return ctx.Error("shape ", ShapeToString(shape), " has a negative dimension");
  }
  DType def = v1::FLOAT32;
  if (ctx.op() == "full") {
    const v1::AttrValue* v = ctx.Attr("value");
    if (v == nullptr) return ctx.Error("missing required attribute 'value'");
    if (v->value_case() == v1::AttrValue::kI) def = v1::INT64;
    if (v->value_case() == v1::AttrValue::kB) def = v1::BOOL;
  }
  if (ctx.op() == "bernoulli") {
    MAPD_ASSIGN_OR_RETURN(double p, ctx.Float("p"));
    if (!(p >= 0 && p <= 1)) return ctx.Error("probability p = ", p, " is outside [0, 1]");
  }
  MAPD_ASSIGN_OR_RETURN(DType dtype, ctx.DTypeAttr("dtype", def));
  return Types{{dtype, shape}};
}

}  // namespace

void RegisterCreationOps(OpRegistry& r) {
  OpTraits creation;
  creation.creation = true;
  // Every output dimension splits: each device makes its own slice (arange from its offset).
  const ShardingFn creation_rule = CreationRule();
  r.Add(Op("arange", "[start, end) in steps of step")
          .Attrs({{"start", AttrKind::kNumber}, {"end", AttrKind::kNumber, true}, {"step", AttrKind::kNumber},
                     {"dtype", AttrKind::kString}})
          .Traits(creation)
          .Infer(InferArange)
          .Cost(ElementwiseCost(1, 0))
          .Saved(SavesNothing())
          .Sharding(creation_rule));
  const std::vector<AttrSpec> filled = {{"shape", AttrKind::kInts, true}, {"dtype", AttrKind::kString}};
  r.Add(Op("zeros", "tensor of zeros")
          .Attrs(filled)
          .Traits(creation)
          .Infer(InferFilled)
          .Cost(ElementwiseCost(0, 0))
          .Saved(SavesNothing())
          .Sharding(creation_rule));
  r.Add(Op("ones", "tensor of ones")
          .Attrs(filled)
          .Traits(creation)
          .Infer(InferFilled)
          .Cost(ElementwiseCost(0, 0))
          .Saved(SavesNothing())
          .Sharding(creation_rule));
  r.Add(Op("full", "tensor filled with value")
          .Attrs({{"shape", AttrKind::kInts, true}, {"value", AttrKind::kNumber, true}, {"dtype", AttrKind::kString}})
          .Traits(creation)
          .Infer(InferFilled)
          .Cost(ElementwiseCost(0, 0))
          .Saved(SavesNothing())
          .Sharding(creation_rule));
  // Stochastic depth's noise (torch.empty(shape).bernoulli_(p)): drawn every step, a split plan
  // drawing the global tensor from the step's generator and keeping each device's block.
  OpTraits random_creation = creation;
  random_creation.random = true;
  r.Add(Op("bernoulli", "1 with probability p, else 0 (drawn every step)")
          .Attrs({{"shape", AttrKind::kInts, true}, {"p", AttrKind::kFloat, true}, {"dtype", AttrKind::kString}})
          .Traits(random_creation)
          .Infer(InferFilled)
          .Cost(ElementwiseCost(2, 0))
          .Saved(SavesNothing())
          .Sharding(creation_rule));
  // A VAE's reparameterisation noise (randn_like) and uniform draws, the same way.
  r.Add(Op("randn", "standard normal draws (drawn every step)")
          .Attrs(filled)
          .Traits(random_creation)
          .Infer(InferFilled)
          .Cost(ElementwiseCost(4, 0))
          .Saved(SavesNothing())
          .Sharding(creation_rule));
  r.Add(Op("rand", "uniform draws in [0, 1) (drawn every step)")
          .Attrs(filled)
          .Traits(random_creation)
          .Infer(InferFilled)
          .Cost(ElementwiseCost(2, 0))
          .Saved(SavesNothing())
          .Sharding(creation_rule));
}

}  // namespace mapd

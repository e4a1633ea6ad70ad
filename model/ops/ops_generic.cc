// The generic ATen op ("aten", model/ops/generic_op.h): one registry entry whose inference, cost,
// saved tensors and sharding read what the importer measured into the node's attributes.
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/ops/generic_op.h"
#include "model/ops/registry.h"

namespace mapd {
namespace {

using Types = std::vector<TensorType>;

absl::StatusOr<GenericNode> NodeOf(const OpContext& ctx) {
  auto g = GenericNode::Parse(ctx.attrs(), ctx.num_inputs());
  if (!g.ok()) return ctx.Error(g.status().message());
  return g;
}

std::vector<const TensorType*> InputsOf(const OpContext& ctx) {
  std::vector<const TensorType*> in;
  for (int i = 0; i < ctx.num_inputs(); ++i) in.push_back(ctx.has_input(i) ? &ctx.input(i) : nullptr);
  return in;
}

absl::StatusOr<Types> InferGeneric(const OpContext& ctx) {
  MAPD_ASSIGN_OR_RETURN(GenericNode g, NodeOf(ctx));
  auto out = g.OutputTypes(InputsOf(ctx));
  if (!out.ok()) return ctx.Error(g.schema, ": ", out.status().message());
  return out;
}

// FLOPs by formula where generic_op.cc knows one; otherwise one per output element — a
// memory-bound guess, marked estimated (mapctl profile reports the share).
OpCost GenericCost(const CostContext& c) {
  OpCost cost;
  cost.bytes = IoBytes(c);
  cost.grad_flops.assign(c.op.num_inputs(), 0.0);
  auto g = GenericNode::Parse(c.op.attrs(), c.op.num_inputs());
  if (!g.ok()) return cost;
  const std::vector<const TensorType*> in = InputsOf(c.op);
  double flops = GenericFormulaFlops(g->Name(), in, c.outputs, g->args);
  if (flops < 0) {
    cost.flops_estimated = true;
    flops = 0;
    for (const auto& o : c.outputs) flops += static_cast<double>(o.NumElements());
  }
  cost.flops = flops;
  cost.vector_arithmetic = true;
  for (int i = 0; i < c.op.num_inputs(); ++i) {
    if (c.input_requires_grad(i)) cost.grad_flops[i] = flops;
  }
  const int64_t batch = g->BatchOf(in);
  cost.workspace_bytes = g->workspace.At(batch);
  cost.grad_workspace_bytes = g->grad_workspace.At(batch);
  return cost;
}

SavedSpec GenericSaved(const CostContext& c) {
  SavedSpec s;
  auto g = GenericNode::Parse(c.op.attrs(), c.op.num_inputs());
  if (!g.ok() || !c.any_requires_grad()) return s;
  for (int64_t i : g->saved_inputs) s.inputs.push_back(static_cast<int>(i));
  for (int64_t o : g->saved_outputs) s.outputs.push_back(static_cast<int>(o));
  s.extra_bytes = g->saved_extra.At(g->BatchOf(InputsOf(c.op)));
  return s;
}

// Per-sample (proven at import): the batch dimensions share one label, which may be split;
// every other dimension is unsplittable. Otherwise every dimension is: the node runs replicated.
absl::StatusOr<ShardingRule> GenericSharding(const CostContext& c) {
  MAPD_ASSIGN_OR_RETURN(GenericNode g, NodeOf(c.op));
  ShardingRule r = EmptyRule(c);
  LabelPool pool;
  const char batch = g.batch.batch > 0 ? pool.Fresh() : 0;
  auto label = [&](int rank, int64_t batch_dim) {
    std::string labels;
    for (int d = 0; d < rank; ++d) {
      if (d == batch_dim && batch != 0) {
        labels.push_back(batch);
      } else {
        labels.push_back(pool.Fresh());
        r.unsplittable.push_back(labels.back());
      }
    }
    return labels;
  };
  for (int i = 0; i < c.op.num_inputs(); ++i) {
    if (c.op.has_input(i)) r.inputs[i] = label(c.op.input(i).rank(), batch != 0 ? g.batch.inputs[i] : -1);
  }
  for (size_t o = 0; o < c.outputs.size(); ++o) {
    r.outputs[o] = label(c.outputs[o].rank(), batch != 0 ? g.batch.outputs[o] : -1);
  }
  MAPD_RETURN_IF_ERROR(pool.status());
  return r;
}

bool GenericIsView(const CostContext& c) {
  auto g = GenericNode::Parse(c.op.attrs(), c.op.num_inputs());
  if (!g.ok()) return false;
  for (int64_t a : g->alias) {
    if (a != 0) return false;
  }
  return true;
}

bool GenericOutputGrad(const CostContext& c, int output) {
  auto g = GenericNode::Parse(c.op.attrs(), c.op.num_inputs());
  return g.ok() && output < static_cast<int>(g->grad.size()) && g->grad[output];
}

}  // namespace

void RegisterGenericOps(OpRegistry& r) {
  std::vector<AttrSpec> attrs;
  for (const std::string& name : GenericAttrNames()) {
    AttrKind kind = AttrKind::kInts;
    if (name == "schema" || name == "measured_on") kind = AttrKind::kString;
    if (name == "args" || name == "in_dtypes" || name == "in_shapes" || name == "out_dtypes" || name == "out_shapes") {
      kind = AttrKind::kStrings;
    }
    if (name == "batch") kind = AttrKind::kInt;
    if (name == "random") kind = AttrKind::kBool;
    attrs.push_back({name, kind, name == "schema", "measured by the importer (model/ops/generic_op.h)"});
  }
  r.Add(Op(kGenericOp, "any ATen operator without an entry of its own, run by its schema (DESIGN §4a)")
            .Inputs({{"inputs", true}})
            .Variadic()
            .Attrs(attrs)
            .Infer(InferGeneric)
            .Cost(GenericCost)
            .Saved(GenericSaved)
            .Sharding(GenericSharding)
            .IsView(GenericIsView)
            .OutputGrad(GenericOutputGrad));
}

}  // namespace mapd

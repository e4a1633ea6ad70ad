// collective: one communication step of a rank program (planner/lower), as an op so that a
// rank's program can be profiled like any graph (planner/lower/local_graph.h): it reads its
// input once and writes a new tensor of the local shape `shape` (what the runtime allocates),
// saves nothing, and its backward makes an input-sized gradient. It is never planned (every
// label unsplittable) and runs only through the distributed runtime (worker/rank), which turns
// it into the real collective. Kind ZERO_GATHER is ZeRO-3's gather of a parameter's block from
// its shards (the profiler frees it after its last forward reader and makes it again for
// backward).
#include "model/ops/registry.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace mapd {

namespace {

using Types = std::vector<TensorType>;

absl::StatusOr<Types> InferCollective(const OpContext& ctx) {
  MAPD_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ctx.Ints("shape"));
  for (int64_t d : shape) {
    if (d < 0) return ctx.Error("shape ", ShapeToString(shape), " has a negative dimension");
  }
  MAPD_ASSIGN_OR_RETURN(std::string kind, ctx.Str("kind"));
  (void)kind;
  return Types{{ctx.input(0).dtype, shape}};
}

// Temporaries as worker/rank makes them: an all-gather receives every rank's piece before
// concatenating (the output's size again), a reduce-scatter all-reduces a copy of its input
// (Gloo has no CPU reduce-scatter), and in backward the all-gathers of SLICE and
// REDUCE_SCATTER do the same for the gradient (GRAD_SYNC's all-reduced copy is the input
// gradient itself). Gloo has no bf16 (LibTorch 1.13): a 16-bit reduction — ALL_REDUCE and
// REDUCE_SCATTER forward, GRAD_SYNC backward — sums an fp32 copy (4 bytes an element) besides.
// NCCL reduces bf16 itself, so on GPUs this overstates a reduction's transient by that copy.
OpCost CollectiveCost(const CostContext& c) {
  OpCost cost;
  cost.bytes = IoBytes(c);
  cost.kernels = 1;
  cost.grad_flops.assign(c.op.num_inputs(), 0.0);
  auto kind = c.op.Str("kind", "");
  const std::string k = kind.ok() ? *kind : "";
  const int64_t in = c.op.input(0).NumBytes(), out = c.outputs.empty() ? 0 : c.outputs[0].NumBytes();
  const int64_t staging = Fp32ReductionCopyBytes(c.op.input(0));
  if (k == "ALL_GATHER" || k == "ZERO_GATHER") cost.workspace_bytes = out;
  if (k == "ALL_REDUCE") cost.workspace_bytes = staging;
  if (k == "REDUCE_SCATTER") cost.workspace_bytes = in + staging, cost.grad_workspace_bytes = in;
  if (k == "GRAD_SYNC") cost.grad_workspace_bytes = staging;
  if (k == "SLICE") cost.grad_workspace_bytes = in;
  return cost;
}

absl::StatusOr<ShardingRule> CollectiveSharding(const CostContext& c) {
  ShardingRule r = EmptyRule(c);
  LabelPool pool;
  r.inputs[0] = pool.Fresh(c.op.input(0).rank());
  r.outputs[0] = pool.Fresh(c.outputs[0].rank());
  r.unsplittable = r.inputs[0] + r.outputs[0];
  MAPD_RETURN_IF_ERROR(pool.status());
  return r;
}

}  // namespace

void RegisterCommOps(OpRegistry& r) {
  r.Add(Op("collective", "a rank program's communication step (all-reduce, all-gather, ...) for profiling a rank; "
                    "runs only in the distributed runtime")
          .Inputs({{"x"}})
          .Attrs({{"kind", AttrKind::kString, true}, {"axis", AttrKind::kInt}, {"shape", AttrKind::kInts, true}})
          .Infer(InferCollective)
          .Cost(CollectiveCost)
          .Saved(SavesNothing())
          .Sharding(CollectiveSharding));
}

}  // namespace mapd

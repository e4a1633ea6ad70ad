#include "planner/lower/local_graph.h"

#include <set>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "planner/lower/zero.h"

namespace mapd {

absl::StatusOr<Graph> LocalGraph(const Graph& global, const v1::RankProgram& program) {
  const v1::Graph& g = global.proto();
  v1::Graph local;
  local.set_name(absl::StrCat(g.name(), " (rank ", program.rank(), ")"));
  std::unordered_map<std::string, const v1::Shard*> inputs, params;
  for (const auto& s : program.inputs()) inputs[s.name()] = &s;
  for (const auto& s : program.parameters()) params[s.name()] = &s;
  for (const auto& in : g.inputs()) {
    auto it = inputs.find(in.name());
    if (it == inputs.end()) continue;
    v1::GraphInput* li = local.add_inputs();
    *li = in;
    *li->mutable_type() = it->second->local_type();
  }
  for (const auto& p : g.parameters()) {
    auto it = params.find(p.name());
    if (it == params.end()) continue;
    v1::Parameter* lp = local.add_parameters();
    *lp = p;
    *lp->mutable_type() = it->second->local_type();
  }
  // ZeRO-2 runs a sharded parameter's GRAD_SYNC steps as identities (its gradient is
  // reduce-scattered instead): views here, which allocate nothing. ZeRO-3's first step of each
  // chain gathers the block from the shards: a ZERO_GATHER collective, which the profiler frees
  // after its last forward reader and makes again for backward, as the runtime does.
  std::set<int> identities, gathers;
  // Under micro-batches with ZeRO 0-1 the parameters' GRAD_SYNC chains are identities too: their
  // all-reduce runs on the accumulated gradient after the passes (rank_trainer.h).
  if (program.micro_batches() > 1 && program.zero_stage() <= 1) {
    for (const ZeroParam& z : GradSyncChains(program)) identities.insert(z.grad_syncs.begin(), z.grad_syncs.end());
  }
  // A bucketed chain over several axes: its bucket is all-reduced over each, the chain's steps
  // after the first are identities (zero.h BucketedGradSyncs).
  for (const ZeroParam& z : BucketedGradSyncs(program)) identities.insert(z.grad_syncs.begin() + 1, z.grad_syncs.end());
  if (program.zero_stage() >= 2) {
    for (const ZeroParam& z : ZeroParams(program)) {
      for (int step : z.grad_syncs) {
        if (program.zero_stage() >= 3 && program.instructions(step).communicate().input() == z.name) {
          gathers.insert(step);
        } else {
          identities.insert(step);
        }
      }
    }
  }
  for (int i = 0; i < program.instructions_size(); ++i) {
    const v1::Instruction& ins = program.instructions(i);
    v1::Node* node = local.add_nodes();
    if (ins.has_communicate()) {
      const v1::Communicate& c = ins.communicate();
      node->set_name(c.output());
      node->set_op(identities.count(i) ? "view" : "collective");
      node->add_inputs(c.input());
      node->add_outputs(c.output());
      v1::AttrValue kind, axis, shape;
      kind.set_s(gathers.count(i) ? "ZERO_GATHER" : v1::Communicate::Kind_Name(c.kind()));
      axis.set_i(c.axis());
      for (int64_t d : c.output_type().shape()) shape.mutable_ints()->add_values(d);
      (*node->mutable_attrs())["shape"] = shape;
      if (!identities.count(i)) {
        (*node->mutable_attrs())["kind"] = kind;
        (*node->mutable_attrs())["axis"] = axis;
      }
      v1::Value* v = local.add_values();
      v->set_name(c.output());
      *v->mutable_type() = c.output_type();
      continue;
    }
    const v1::Compute& c = ins.compute();
    if (c.node() < 0 || c.node() >= global.num_nodes()) {
      return absl::InvalidArgumentError(absl::StrCat("compute step names node ", c.node(), " of ", global.num_nodes()));
    }
    const v1::Node& orig = global.node(c.node());
    node->set_name(orig.name());
    node->set_op(orig.op());
    for (const auto& in : c.inputs()) node->add_inputs(in);
    *node->mutable_attrs() = c.attrs();
    for (int o = 0; o < c.outputs_size(); ++o) {
      node->add_outputs(c.outputs(o));
      v1::Value* v = local.add_values();
      v->set_name(c.outputs(o));
      *v->mutable_type() = c.output_types(o);
    }
  }
  if (!program.loss().empty()) {
    local.add_outputs(program.loss());
  } else {
    // A pipeline stage before the last: its backward starts from the gradients of what it sends,
    // profiled as the backward of a scalar that sums them (whose gradient is one of each sent
    // value's size, as the received ones are).
    auto add_scalar = [&](const std::string& op, const std::vector<std::string>& inputs, const std::string& name, v1::DType dtype) {
      v1::Node* node = local.add_nodes();
      node->set_name(name);
      node->set_op(op);
      for (const std::string& in : inputs) node->add_inputs(in);
      node->add_outputs(name);
      v1::Value* v = local.add_values();
      v->set_name(name);
      v->mutable_type()->set_dtype(dtype);
    };
    std::string total;
    for (int k = 0; k < program.outputs_size(); ++k) {
      const v1::Shard& out = program.outputs(k);
      const v1::DType dtype = out.local_type().dtype();
      const std::string sum = absl::StrCat("pipeline.sent_sum.", k);
      add_scalar("sum", {out.name()}, sum, dtype);
      if (!total.empty()) {
        const std::string next = absl::StrCat("pipeline.sent_total.", k);
        add_scalar("add", {total, sum}, next, dtype);
        total = next;
      } else {
        total = sum;
      }
    }
    if (total.empty()) return absl::InvalidArgumentError("the program has neither a loss nor outputs");
    local.add_outputs(total);
    // The values sent stay with their pass until its backward (outputs are pinned).
    for (const v1::Shard& out : program.outputs()) local.add_outputs(out.name());
  }
  for (const auto& u : g.buffer_updates()) *local.add_buffer_updates() = u;
  return Graph::Create(std::move(local));
}

}  // namespace mapd

#include "planner/profile/profiler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "model/graph/mixed_precision.h"
#include "model/graph/verifier.h"
#include "model/ops/generic_op.h"
#include "model/ops/registry.h"
#include "planner/profile/memory_ledger.h"

namespace mapd {

const char* PhaseName(Phase p) {
  switch (p) {
    case Phase::kStart: return "start";
    case Phase::kForward: return "forward";
    case Phase::kBackward: return "backward";
    case Phase::kOptimizer: return "optimizer";
  }
  return "?";
}

namespace {

// Per-value state of the simulation.
struct ValueState {
  int storage = -1;
  int grad = -1;  // storage of the value's gradient during backward
  bool requires_grad = false;
  bool contiguous = true;
  int last_use = -1;  // last forward node reading it
  bool pinned = false;  // graph outputs, buffer updates: live to the end of the step
  TensorType type;
};

// Optimizer state, FLOPs and bytes per trainable element, and temporaries of one update —
// as worker/runtime/optimizer.h implements them: in place, AdamW reusing each gradient's
// storage for its denominator, so no parameter-sized temporaries.
struct OptimizerModel {
  int state_tensors;
  double flops_per_elem;
  double bytes_per_elem;  // fp32 reads + writes
  int kernels_per_tensor;
  int temporaries;  // parameter-sized fp32 temporaries alive during one tensor's update
};

OptimizerModel ModelOf(Optimizer o) {
  switch (o) {
    case Optimizer::kSgd: return {0, 2, 12, 1, 0};
    case Optimizer::kSgdMomentum: return {1, 4, 20, 2, 0};
    case Optimizer::kAdamW: return {2, 14, 28, 8, 0};
  }
  return {0, 0, 0, 0, 0};
}

class Simulator {
 public:
  Simulator(const Graph& g, const ProfileOptions& o) : g_(g), opt_(o), reg_(OpRegistry::Global()) {}

  absl::StatusOr<ProfileReport> Run();

 private:
  // Bytes as the graph types them: under bf16 mixed precision the graph itself is the bf16
  // one (ToBf16Mixed), so nothing is scaled here.
  static int64_t Bytes(const TensorType& t) { return t.NumBytes(); }
  // A kernel's seconds on the profile's device (KernelSeconds: one model for the profiler and the
  // planner's search).
  double Seconds(double flops, double bytes, int kernels, double flops_per_product = 0, bool vector = false,
                 const std::string& op = "") const {
    return KernelSeconds(opt_.device, opt_.precision != Precision::kFp32, flops, bytes, kernels, flops_per_product, vector, op);
  }
  void Point(Phase phase, const std::string& label) {
    if (ledger_.ConsumePeakFlag()) {
      report_.peak_phase = phase;
      report_.peak_at = label;
    }
    if (opt_.timeline) report_.timeline.push_back({phase, label, ledger_.live_bytes()});
  }
  void SetUpValues();
  absl::Status Forward();
  // Forward's parts, per node n: a recomputed range that begins at n keeps its inputs until its
  // backward is done; the node's types, cost, outputs and profile; what autograd keeps for its
  // backward; what it was the last to read, freed.
  struct NodeTypes {
    std::vector<const TensorType*> inputs;  // nullptr: an absent optional input
    std::vector<bool> requires_grad, contiguous;
    std::vector<TensorType> outputs;
  };
  void HoldSegmentInputs(int n, int seg);
  NodeTypes TypesOf(const v1::Node& node) const;
  OpCost CostOf(const OpDef& def, const CostContext& ctx) const;
  void MakeOutputs(const v1::Node& node, const OpDef& def, const CostContext& ctx, bool any_rg);
  OpProfile ProfileOf(const v1::Node& node, const OpCost& cost, bool any_rg) const;
  void HoldSaved(int n, const SavedSpec& spec, int seg, int segment_start_storage, OpProfile& prof);
  void ReleaseAfter(int n);
  void Backward();
  void OptimizerStep();
  void Summarise();

  const Graph& g_;
  const ProfileOptions& opt_;
  const OpRegistry& reg_;
  MemoryLedger ledger_;
  ProfileReport report_;
  std::unordered_map<std::string, ValueState> values_;
  std::vector<std::vector<int>> held_;  // per node: storages kept for its backward
  std::vector<bool> needs_backward_;
  std::vector<int64_t> grad_workspace_;  // per node: backward temporaries
  std::vector<int> segment_of_;          // per node: its recompute range, or -1
  // Per recomputed node: what it would have kept (storage made in its range, or -1 for extra
  // bytes; bytes), made again when backward reaches the range.
  std::vector<std::vector<std::pair<int, int64_t>>> rematerialize_;
  int64_t largest_param_ = 0;
  int64_t largest_master_ = 0;  // elements of the largest fp32 master (or its ZeRO shard)
  int num_param_tensors_ = 0;
  // ZeRO-3: blocks gathered in forward (storage → bytes), freed after their last forward
  // reader whatever autograd saved; per node, the gathered storages its backward needs (made
  // again when backward reaches it, freed at the gather's backward).
  std::unordered_map<int, int64_t> gathered_;
  std::vector<std::vector<int>> needs_block_;
  std::unordered_map<int, int> regathered_;
  static bool IsZeroGather(const v1::Node& node) {
    if (node.op() != "collective") return false;
    auto it = node.attrs().find("kind");
    return it != node.attrs().end() && it->second.s() == "ZERO_GATHER";
  }

  // What reduce-scattering a whole gradient of `t` makes for a moment: its all-reduced copy,
  // and for a 16-bit one Gloo's fp32 copy too (ops_comm.cc).
  static int64_t ReduceScatterCopy(const TensorType& t) {
    return Bytes(t) + Fp32ReductionCopyBytes(t);
  }

  // Elements of a ZeRO shard of parameter `name`, 0 when it is not sharded.
  int64_t ZeroChunk(const std::string& name, int64_t numel) const {
    if (opt_.zero_stage <= 0) return 0;
    auto it = opt_.zero_ranks.find(name);
    if (it == opt_.zero_ranks.end() || it->second <= 1) return 0;
    return (numel + it->second - 1) / it->second;
  }
};

void Simulator::SetUpValues() {
  const v1::Graph& p = g_.proto();
  const OptimizerModel om = ModelOf(opt_.optimizer);
  for (const auto& par : p.parameters()) {
    ValueState v;
    v.type = TensorType::FromProto(par.type());
    v.requires_grad = par.trainable();
    int64_t bytes = Bytes(v.type);
    if (par.trainable()) {
      report_.params += v.type.NumElements();
      ++num_param_tensors_;
      largest_param_ = std::max(largest_param_, v.type.NumElements());
      const int64_t chunk = ZeroChunk(par.name(), v.type.NumElements());
      if (chunk > 0) ledger_.New(chunk * DTypeSize(v.type.dtype), StorageKind::kParameter);  // the optimizer's shard
      if (chunk > 0 && opt_.zero_stage >= 3) bytes = 0;  // the block exists only while gathered
      const int64_t state_elems = chunk > 0 ? chunk : v.type.NumElements();
      for (int s = 0; s < om.state_tensors; ++s) ledger_.New(state_elems * 4, StorageKind::kOptimizerState);
      if (HasMasterWeights(v.type.dtype)) {
        // The optimizer's fp32 master of a 16-bit parameter (its ZeRO shard, like the states).
        ledger_.New(state_elems * 4, StorageKind::kParameter);
        report_.parameter_bytes += state_elems * 4;
        largest_master_ = std::max(largest_master_, state_elems);
      }
    }
    report_.parameter_bytes += bytes;
    v.storage = ledger_.New(bytes, StorageKind::kParameter);
    // (ZeRO 2-3's buckets make their shard gradients as they reduce, in backward: not here.)
    const bool preallocated = opt_.gradients_accumulated || (opt_.bucketed_gradients.count(par.name()) > 0 && opt_.zero_stage < 2);
    if (preallocated && par.trainable()) {
      // Accumulated over the earlier passes: the whole gradient, or its ZeRO-2/3 shard.
      const int64_t chunk = opt_.zero_stage >= 2 ? ZeroChunk(par.name(), v.type.NumElements()) : 0;
      v.grad = ledger_.New(chunk > 0 ? chunk * DTypeSize(v.type.dtype) : Bytes(v.type), StorageKind::kGradient);
    }
    values_[par.name()] = v;
  }
  if (opt_.zero_staging_bytes > 0) ledger_.New(opt_.zero_staging_bytes, StorageKind::kGradient);
  for (const auto& in : p.inputs()) {
    ValueState v;
    v.type = TensorType::FromProto(in.type());
    v.storage = ledger_.New(Bytes(v.type), StorageKind::kActivation);
    v.pinned = true;  // the batch is held by the caller for the whole step
    values_[in.name()] = v;
  }
  for (const auto& o : p.outputs()) values_[o].pinned = true;
  for (const auto& u : p.buffer_updates()) values_[u.value()].pinned = true;
  for (int n = 0; n < g_.num_nodes(); ++n) {
    for (const auto& in : g_.node(n).inputs()) {
      if (!in.empty()) values_[in].last_use = n;
    }
  }
  Point(Phase::kStart, "start");
}

absl::Status Simulator::Forward() {
  const int n_nodes = g_.num_nodes();
  held_.assign(n_nodes, {});
  needs_block_.assign(n_nodes, {});
  needs_backward_.assign(n_nodes, false);
  grad_workspace_.assign(n_nodes, 0);
  report_.ops.reserve(n_nodes);
  segment_of_.assign(n_nodes, -1);
  for (size_t k = 0; k < opt_.recompute.size(); ++k) {
    for (int n = std::max(0, opt_.recompute[k].first); n <= opt_.recompute[k].second && n < n_nodes; ++n) segment_of_[n] = static_cast<int>(k);
  }
  rematerialize_.assign(n_nodes, {});
  int segment_start_storage = 0;
  for (int n = 0; n < n_nodes; ++n) {
    const v1::Node& node = g_.node(n);
    const OpDef* def = reg_.Find(node.op());
    if (def == nullptr) return absl::InvalidArgumentError(absl::StrCat("node '", node.name(), "': unknown op '", node.op(), "'"));
    const int seg = segment_of_[n];
    if (seg >= 0 && (n == 0 || segment_of_[n - 1] != seg)) {
      segment_start_storage = ledger_.num_storages();
      HoldSegmentInputs(n, seg);
    }
    const NodeTypes types = TypesOf(node);
    OpContext octx(node.name(), node.op(), types.inputs, node.attrs());
    CostContext ctx{octx, types.outputs, types.requires_grad, types.contiguous};
    const bool any_rg = ctx.any_requires_grad();
    needs_backward_[n] = any_rg;
    const OpCost cost = CostOf(*def, ctx);
    MakeOutputs(node, *def, ctx, any_rg);
    grad_workspace_[n] = cost.grad_workspace_bytes;
    if (cost.workspace_bytes > 0) ledger_.Transient(cost.workspace_bytes);
    OpProfile prof = ProfileOf(node, cost, any_rg);
    if (any_rg && def->saved) HoldSaved(n, def->saved(ctx), seg, segment_start_storage, prof);
    Point(Phase::kForward, node.name());
    ReleaseAfter(n);
    if (seg >= 0) {  // recomputed: its forward runs again in backward
      prof.backward_flops += prof.forward_flops;
      prof.backward_seconds += prof.forward_seconds;
    }
    report_.forward_flops += prof.forward_flops;
    report_.backward_flops += prof.backward_flops;
    if (prof.flops_estimated) report_.estimated_flops += prof.forward_flops + prof.backward_flops;
    if (node.op() == kGenericOp) ++report_.generic_nodes;
    report_.forward_seconds += prof.forward_seconds;
    report_.backward_seconds += prof.backward_seconds;
    report_.ops.push_back(std::move(prof));
  }
  return absl::OkStatus();
}

void Simulator::HoldSegmentInputs(int n, int seg) {
  const int n_nodes = g_.num_nodes();
  std::unordered_set<int> kept;
  int last = n;
  while (last + 1 < n_nodes && segment_of_[last + 1] == seg) ++last;
  for (int m = n; m < n_nodes && segment_of_[m] == seg; ++m) {
    for (const auto& in : g_.node(m).inputs()) {
      if (in.empty() || g_.FindValue(in)->def != ValueDef::kNode) continue;
      auto it = values_.find(in);
      if (it == values_.end() || it->second.storage < 0 || !ledger_.live(it->second.storage)) continue;
      if (gathered_.count(it->second.storage)) {  // ZeRO-3: gathered again before the rerun
        if (kept.insert(it->second.storage).second) needs_block_[last].push_back(it->second.storage);
        continue;
      }
      if (kept.insert(it->second.storage).second) {
        ledger_.Hold(it->second.storage);
        held_[n].push_back(it->second.storage);
      }
    }
  }
}

Simulator::NodeTypes Simulator::TypesOf(const v1::Node& node) const {
  NodeTypes t;
  for (const auto& in : node.inputs()) {
    if (in.empty()) {
      t.inputs.push_back(nullptr);
      t.requires_grad.push_back(false);
      t.contiguous.push_back(true);
      continue;
    }
    const ValueState& v = values_.at(in);
    t.inputs.push_back(&v.type);
    t.requires_grad.push_back(v.requires_grad);
    t.contiguous.push_back(v.contiguous);
  }
  for (const auto& o : node.outputs()) t.outputs.push_back(g_.TypeOf(o));
  return t;
}

OpCost Simulator::CostOf(const OpDef& def, const CostContext& ctx) const {
  if (def.cost) return def.cost(ctx);
  // No cost function: an element-wise pass over the outputs.
  OpCost cost;
  for (const auto& o : ctx.outputs) cost.flops += static_cast<double>(o.NumElements());
  cost.bytes = IoBytes(ctx);
  cost.grad_flops.assign(ctx.op.num_inputs(), 0.0);
  return cost;
}

void Simulator::MakeOutputs(const v1::Node& node, const OpDef& def, const CostContext& ctx, bool any_rg) {
  // Views share the input's storage unless they must copy it.
  const bool alias = IsViewNode(def, ctx);
  const bool out_contiguous = alias ? (def.layout ? def.layout(ctx) : ctx.input_contiguous(0)) : true;
  for (size_t o = 0; o < ctx.outputs.size(); ++o) {
    const TensorType& type = ctx.outputs[o];
    ValueState v;
    v.type = type;
    v.requires_grad = OutputNeedsGrad(def, ctx, static_cast<int>(o), any_rg);
    v.contiguous = out_contiguous;
    if (alias) {
      v.storage = values_.at(node.inputs(0)).storage;
      ledger_.AddRef(v.storage);
    } else if (IsZeroGather(node)) {
      v.storage = ledger_.New(Bytes(type), StorageKind::kParameter);
      gathered_[v.storage] = Bytes(type);
      if (opt_.zero_gather_bytes > 0) ledger_.Transient(opt_.zero_gather_bytes);  // its bucket's all-gather
    } else {
      v.storage = ledger_.New(Bytes(type), StorageKind::kActivation);
    }
    ValueState& slot = values_[node.outputs(o)];
    v.last_use = slot.last_use;
    v.pinned = slot.pinned;
    slot = v;
  }
}

OpProfile Simulator::ProfileOf(const v1::Node& node, const OpCost& cost, bool any_rg) const {
  OpProfile prof;
  prof.node = node.name();
  prof.op = node.op();
  prof.scope = node.scope();
  prof.forward_flops = cost.flops;
  prof.flops_estimated = cost.flops_estimated;
  prof.bytes = cost.bytes;
  const std::string rate_key = OpRateKey(node.op(), node.attrs());
  prof.forward_seconds = Seconds(cost.flops, prof.bytes, cost.kernels, cost.flops_per_product, cost.vector_arithmetic, rate_key);
  if (any_rg) {
    for (double f : cost.grad_flops) prof.backward_flops += f;
    prof.backward_seconds = Seconds(prof.backward_flops, 2.0 * prof.bytes, 2 * std::max(cost.kernels, 1), cost.flops_per_product,
                                    cost.vector_arithmetic, rate_key);
  }
  return prof;
}

void Simulator::HoldSaved(int n, const SavedSpec& spec, int seg, int segment_start_storage, OpProfile& prof) {
  const v1::Node& node = g_.node(n);
  std::unordered_set<int> seen;
  auto hold = [&](int storage) {
    if (!seen.insert(storage).second) return;
    if (gathered_.count(storage)) {  // ZeRO-3: not kept; gathered again for this backward
      needs_block_[n].push_back(storage);
      return;
    }
    if (seg >= 0) {
      // Recomputed: nothing kept now; what the range made is made again in backward.
      if (storage >= segment_start_storage) rematerialize_[n].push_back({storage, ledger_.bytes(storage)});
      return;
    }
    ledger_.Hold(storage);
    held_[n].push_back(storage);
    if (ledger_.kind(storage) == StorageKind::kActivation) prof.saved_bytes += ledger_.bytes(storage);
  };
  for (int i : spec.inputs) {
    if (i < static_cast<int>(node.inputs_size()) && !node.inputs(i).empty()) hold(values_.at(node.inputs(i)).storage);
  }
  for (int o : spec.outputs) {
    if (o < node.outputs_size()) hold(values_.at(node.outputs(o)).storage);
  }
  if (spec.extra_bytes > 0 && seg >= 0) {
    rematerialize_[n].push_back({-1, spec.extra_bytes});
  } else if (spec.extra_bytes > 0) {
    const int64_t extra = spec.extra_bytes;
    const int s = ledger_.New(extra, StorageKind::kActivation);
    ledger_.Hold(s);
    ledger_.Release(s);  // only the hold keeps it
    held_[n].push_back(s);
    prof.saved_bytes += extra;
  }
}

void Simulator::ReleaseAfter(int n) {
  const v1::Node& node = g_.node(n);
  // Free what this node was the last to read, and outputs nobody reads.
  std::unordered_set<std::string> released;
  for (const auto& in : node.inputs()) {
    if (in.empty() || !released.insert(in).second) continue;
    ValueState& v = values_.at(in);
    if (v.last_use == n && !v.pinned && g_.FindValue(in)->def == ValueDef::kNode) ledger_.Release(v.storage);
  }
  for (const auto& o : node.outputs()) {
    ValueState& v = values_.at(o);
    if (v.last_use < 0 && !v.pinned) ledger_.Release(v.storage);
  }
}

void Simulator::Backward() {
  const v1::Graph& p = g_.proto();
  if (p.outputs_size() == 0) return;
  ValueState& loss = values_.at(p.outputs(0));
  if (!loss.requires_grad) return;
  loss.grad = ledger_.New(Bytes(loss.type), StorageKind::kActivationGrad);
  // An accumulated parameter gradient reached from several nodes (a tied weight): autograd keeps
  // the contributions that come first in its input buffer until the last one arrives, and only
  // then adds their sum into the gradient — the first is held that long, beside the gradient.
  std::unordered_map<std::string, int> contributions;  // backward contributions still to come
  std::unordered_map<std::string, int> in_buffer;      // the held first contribution's storage
  // (Only a preallocated gradient is reached this way: none without micro-batches or buckets.)
  const bool preallocates = opt_.gradients_accumulated || !opt_.bucketed_gradients.empty();
  for (int n = 0; preallocates && n < g_.num_nodes(); ++n) {
    if (!needs_backward_[n]) continue;
    std::unordered_set<std::string> seen;
    for (const auto& in : g_.node(n).inputs()) {
      if (!in.empty() && seen.insert(in).second && values_.at(in).requires_grad && g_.FindValue(in)->def == ValueDef::kParameter) {
        ++contributions[in];
      }
    }
  }
  for (int n = g_.num_nodes() - 1; n >= 0; --n) {
    const v1::Node& node = g_.node(n);
    const int seg = segment_of_[n];
    if (seg >= 0 && (n + 1 == g_.num_nodes() || segment_of_[n + 1] != seg)) {
      // Backward reaches a recomputed range: its forward runs again and keeps what it keeps
      // (one new storage per storage it made the first time).
      std::unordered_map<int, int> remade;
      std::vector<int> made;
      for (int m = n; m >= 0 && segment_of_[m] == seg; --m) {
        for (const auto& [orig, bytes] : rematerialize_[m]) {
          int id;
          auto it = orig >= 0 ? remade.find(orig) : remade.end();
          if (it != remade.end()) {
            id = it->second;
          } else {
            id = ledger_.New(bytes, StorageKind::kActivation);
            made.push_back(id);
            if (orig >= 0) remade[orig] = id;
          }
          ledger_.Hold(id);
          held_[m].push_back(id);
        }
      }
      for (int id : made) ledger_.Release(id);  // only the holds keep them
      Point(Phase::kBackward, absl::StrCat("recompute ", node.name()));
    }
    for (int s : needs_block_[n]) {
      if (regathered_.count(s)) continue;
      regathered_[s] = ledger_.New(gathered_.at(s), StorageKind::kParameter);
      // The pieces received before they are copied in (its bucket's, when bucketed).
      ledger_.Transient(std::max(gathered_.at(s), opt_.zero_gather_bytes));
    }
    bool has_out_grad = false;
    for (const auto& o : node.outputs()) has_out_grad |= values_.at(o).grad >= 0;
    if (needs_backward_[n] && has_out_grad) {
      const OpDef* def = reg_.Find(node.op());
      const bool alias_grad = def->traits.grad_aliases_output_grad;
      std::unordered_set<std::string> done;
      for (const auto& in : node.inputs()) {
        if (in.empty() || !done.insert(in).second) continue;
        ValueState& v = values_.at(in);
        if (!v.requires_grad) continue;
        const bool is_param = g_.FindValue(in)->def == ValueDef::kParameter;
        if (v.grad >= 0) {
          // A second contribution, added into the first — made as a new tensor, except that an
          // accumulated parameter gradient reached through an identity (a deferred GRAD_SYNC,
          // ZeRO 0-1) is added in place from the consumer's gradient, which is already counted
          // (under ZeRO 2-3 the identity leads to a reduce-scatter, which copies).
          const bool preallocated = opt_.gradients_accumulated || opt_.bucketed_gradients.count(in) > 0;
          if (preallocated && is_param && alias_grad && opt_.zero_stage <= 1) continue;
          const bool scattered = is_param && opt_.zero_stage >= 2 && ZeroChunk(in, v.type.NumElements()) > 0;
          if (preallocated && is_param && !scattered) {
            int& left = contributions[in];
            auto buffered = in_buffer.find(in);
            if (buffered == in_buffer.end() && left > 1) {  // the first of several: held until the last
              in_buffer[in] = ledger_.New(Bytes(v.type), StorageKind::kActivationGrad);
              --left;
              continue;
            }
            if (buffered != in_buffer.end()) {
              ledger_.Transient(Bytes(v.type));  // made, then added into the buffer
              if (--left <= 0) {
                ledger_.Release(buffered->second);  // the sum added into the gradient
                in_buffer.erase(buffered);
              }
              continue;
            }
          }
          if (scattered && preallocated) {
            ledger_.Transient(Fp32ReductionCopyBytes(v.type));  // copied into its bucket's staging buffer
          } else {
            ledger_.Transient(scattered ? ReduceScatterCopy(v.type) : Bytes(v.type));
          }
          continue;
        }
        const int64_t chunk = is_param && opt_.zero_stage >= 2 ? ZeroChunk(in, v.type.NumElements()) : 0;
        if (chunk > 0) {
          // Reduce-scattered as it is made: its all-reduced copy for a moment, beside the whole
          // gradient (already live: its GRAD_SYNC's output gradient, the same tensor at run time),
          // and for a 16-bit gradient Gloo's fp32 copy of it too (ops_comm.cc). A ZeRO bucket's
          // parameter is copied into its staging buffer instead, and its shard made when the
          // bucket's reduction is done — counted from here, which is no later.
          const bool zero_bucketed = opt_.bucketed_gradients.count(in) > 0;
          ledger_.Transient(zero_bucketed ? Fp32ReductionCopyBytes(v.type) : ReduceScatterCopy(v.type));
          v.grad = ledger_.New(chunk * DTypeSize(v.type.dtype), StorageKind::kGradient);
        } else if (is_param) {
          v.grad = ledger_.New(Bytes(v.type), StorageKind::kGradient);
        } else if (alias_grad && values_.at(node.outputs(0)).grad >= 0) {
          v.grad = values_.at(node.outputs(0)).grad;
          ledger_.AddRef(v.grad);
        } else {
          v.grad = ledger_.New(Bytes(v.type), StorageKind::kActivationGrad);
        }
      }
      if (grad_workspace_[n] > 0) ledger_.Transient(grad_workspace_[n]);
      Point(Phase::kBackward, node.name());
    }
    // The node's backward is done (or never runs): its kept tensors and its outputs'
    // gradients go (and a ZeRO-3 gather's block, gathered again for its readers' backward).
    if (IsZeroGather(node)) {
      auto it = regathered_.find(values_.at(node.outputs(0)).storage);
      if (it != regathered_.end()) {
        ledger_.Release(it->second);
        regathered_.erase(it);
      }
    }
    for (int s : held_[n]) ledger_.Unhold(s);
    held_[n].clear();
    for (const auto& o : node.outputs()) {
      ValueState& v = values_.at(o);
      if (v.grad >= 0) {
        ledger_.Release(v.grad);
        v.grad = -2;  // consumed
      }
    }
  }
  for (const auto& [name, storage] : in_buffer) ledger_.Release(storage);  // a contribution that never came
}

void Simulator::OptimizerStep() {
  const OptimizerModel om = ModelOf(opt_.optimizer);
  int64_t temp = om.temporaries * largest_param_ * 4;
  // ZeRO: stage 1 cuts each whole gradient to its shard; both stages gather the updated shards
  // back (the received pieces and their concatenation).
  int64_t gather = 0;
  for (const auto& [name, ranks] : opt_.zero_ranks) {
    auto it = values_.find(name);
    if (it == values_.end() || !it->second.requires_grad) continue;
    ValueState& v = it->second;
    const int64_t chunk = ZeroChunk(name, v.type.NumElements());
    if (opt_.zero_stage == 1 && v.grad >= 0) {
      const int shard = ledger_.New(chunk * DTypeSize(v.type.dtype), StorageKind::kGradient);
      if (opt_.bucketed_gradients.count(name) == 0) ledger_.Release(v.grad);  // a bucket's stays
      v.grad = shard;
    }
    // A bucketed parameter is gathered with its bucket (zero_gather_bytes).
    if (opt_.bucketed_gradients.count(name) == 0) gather = std::max(gather, 2 * ranks * chunk * DTypeSize(v.type.dtype));
  }
  gather = std::max(gather, opt_.zero_gather_bytes);
  temp = std::max(temp, gather);
  temp += largest_master_ * 4;  // a 16-bit gradient's fp32 copy, made for its master's update
  ledger_.Transient(temp);
  Point(Phase::kOptimizer, "optimizer");
  const double elems = static_cast<double>(report_.params);
  report_.optimizer_flops = om.flops_per_elem * elems;
  report_.optimizer_seconds =
      Seconds(report_.optimizer_flops, om.bytes_per_elem * elems, om.kernels_per_tensor * num_param_tensors_);
}

void Simulator::Summarise() {
  report_.predicted_peak_bytes = ledger_.peak();
  report_.peak_breakdown = ledger_.peak_breakdown();
  std::map<std::string, LayerProfile> layers;
  std::vector<std::string> order;
  for (const auto& op : report_.ops) {
    const std::string key = LayerOfScope(op.scope);
    auto it = layers.find(key);
    if (it == layers.end()) {
      order.push_back(key);
      it = layers.emplace(key, LayerProfile{key}).first;
    }
    LayerProfile& l = it->second;
    ++l.nodes;
    l.flops += op.forward_flops + op.backward_flops;
    l.seconds += op.forward_seconds + op.backward_seconds;
    l.saved_bytes += op.saved_bytes;
  }
  // A parameter belongs to the layer of the first node that reads it.
  std::unordered_set<std::string> counted;
  for (int n = 0; n < g_.num_nodes(); ++n) {
    for (const auto& in : g_.node(n).inputs()) {
      const v1::Parameter* par = in.empty() ? nullptr : g_.FindParameter(in);
      if (par == nullptr || !counted.insert(in).second) continue;
      layers[LayerOfScope(g_.node(n).scope())].parameter_bytes += Bytes(TensorType::FromProto(par->type()));
    }
  }
  for (const auto& k : order) report_.layers.push_back(layers[k]);
}

absl::StatusOr<ProfileReport> Simulator::Run() {
  report_.options = opt_;
  SetUpValues();
  if (auto st = Forward(); !st.ok()) return st;
  // 1F1B's earlier micro-batches, each holding what this one holds now, alive throughout.
  const MemoryBreakdown& end_of_forward = ledger_.current();
  report_.kept_per_pass_bytes = end_of_forward.saved_activations + end_of_forward.transients;
  const int64_t in_flight = std::max<int64_t>(0, opt_.passes_in_flight - 1) * report_.kept_per_pass_bytes;
  Backward();
  OptimizerStep();
  Summarise();
  report_.predicted_peak_bytes += in_flight;
  report_.peak_breakdown.saved_activations += in_flight;
  return std::move(report_);
}

}  // namespace

absl::StatusOr<Graph> GraphAtPrecision(const Graph& graph, Precision precision) {
  if (precision != Precision::kBf16Mixed || IsBf16Mixed(graph.proto())) return graph;
  auto converted = ToBf16Mixed(graph.proto());
  if (!converted.ok()) return converted.status();
  return MakeVerifiedGraph(*std::move(converted));
}

absl::StatusOr<ProfileReport> ProfileTrainingStep(const Graph& graph, const ProfileOptions& options) {
  if (auto st = options.Validate(); !st.ok()) return st;
  const auto start = std::chrono::steady_clock::now();
  if (graph.proto().outputs_size() == 0) return absl::InvalidArgumentError("the graph has no outputs to train on");
  const TensorType& loss = graph.TypeOf(graph.proto().outputs(0));
  if (loss.rank() != 0 || !IsFloating(loss.dtype)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "output 0 of '", graph.name(), "' is ", loss.ToString(),
        ", not a scalar loss; profile a model that returns its loss (zoo models do; for an imported model, "
        "return the loss from forward())"));
  }
  // bf16 mixed precision profiles the graph that runs (model/graph/mixed_precision.h).
  std::optional<Graph> mixed;
  if (options.precision == Precision::kBf16Mixed && !IsBf16Mixed(graph.proto())) {
    auto converted = GraphAtPrecision(graph, options.precision);
    if (!converted.ok()) return converted.status();
    mixed.emplace(*std::move(converted));
  }
  Simulator sim(mixed ? *mixed : graph, options);
  auto report = sim.Run();
  if (!report.ok()) return report.status();
  report->profile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace mapd

// RankTrainer's creation and its step: Create and the steps it takes (the parameters' blocks,
// the last readers, the recompute segments, the optimizer; the ZeRO layout and the gradient
// buckets are rank_grad_sync.cc's), the rank program's instructions run forward (recompute
// segments as autograd functions, dropout drawn as one device draws it), backward from the loss,
// the loss summed with the running-statistics tail, Step and Evaluate. Checkpoints and resharding
// are rank_checkpoint.cc's; the gradients' reduction, clipping and the update rank_grad_sync.cc's.
#include "worker/rank/rank_trainer.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/autograd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "planner/lower/lowering.h"
#include "planner/plan/micro_batch.h"
#include "worker/rank/collectives.h"
#include "worker/rank/rank_trainer_internal.h"
#include "worker/runtime/exec_table.h"
#include "worker/runtime/parameters.h"
#include "worker/runtime/seed.h"

namespace mapd {

using rank_trainer_internal::Narrow;

namespace {

// Where the instructions that only move batch norms' running statistics begin, after the loss
// (batch_norm_groups.h puts them last: the groups' sums, their all-reduce, the update): a step
// runs them after backward, once the ranks have met at the gradient buckets, so their small
// all-reduces do not wait for the slowest rank's forward. The program's size when the tail has
// anything else, or for pipeline stages and micro-batches (whose passes Forward serves alone).
int RunningStatisticsTail(const v1::RankProgram& program, const Graph& graph) {
  const int n = program.instructions_size();
  if (program.loss().empty() || program.micro_batches() > 1 || program.pipeline().stages() > 1) return n;
  int after_loss = -1;
  for (int i = 0; i < n && after_loss < 0; ++i) {
    for (const std::string& w : InstructionWrites(program.instructions(i))) {
      if (w == program.loss()) after_loss = i + 1;
    }
  }
  if (after_loss < 0) return n;
  bool running = false;
  for (int i = after_loss; i < n; ++i) {
    const v1::Instruction& ins = program.instructions(i);
    if (ins.has_communicate()) {
      // Sums: all-reduces, and reduce-scatters (a plan that splits the running statistics by
      // channel), which the tail makes as all-reduces too, each rank keeping its chunk.
      const v1::Communicate::Kind kind = ins.communicate().kind();
      if (kind != v1::Communicate::ALL_REDUCE && kind != v1::Communicate::REDUCE_SCATTER) return n;
      continue;
    }
    const std::string& op = graph.node(ins.compute().node()).op();
    if (op != "sum" && op != "batch_norm_running_stats") return n;
    running = running || op == "batch_norm_running_stats";
  }
  return running ? after_loss : n;
}

}  // namespace

namespace rank_trainer_internal {

// The block of `t` starting at `start` with `shape`.
at::Tensor Narrow(at::Tensor t, const std::vector<int64_t>& start, const std::vector<int64_t>& shape) {
  for (size_t d = 0; d < shape.size(); ++d) {
    if (t.size(static_cast<int64_t>(d)) != shape[d]) t = t.narrow(static_cast<int64_t>(d), start[d], shape[d]);
  }
  return t;
}

}  // namespace rank_trainer_internal

double RankTrainer::LearningRate() const { return optimizer_->learning_rate(); }

at::Tensor RankTrainer::DropoutNoiseBlock(const v1::Node& node, const v1::Compute& c, const at::Tensor& like, double p,
                                          at::Generator& generator) const {
  // The noise one device draws, as ATen's CPU dropout does (bernoulli(1 - p) / (1 - p)), over
  // the global tensor dropped: the dropout's output, or attention's probabilities
  // [..., l, s] (the output [..., l, f] with s for f: f-blocks share the whole softmax).
  Shape global = graph_.TypeOf(node.outputs(0)).shape;
  std::vector<int64_t> offsets(c.output_offsets(0).start().begin(), c.output_offsets(0).start().end());
  if (micro_graph_ != nullptr) {
    // The offsets are within the pass's micro-batch: shift them to its slice of the whole batch
    // (the dimension the micro-batch graph divides).
    const Shape& micro = micro_graph_->TypeOf(node.outputs(0)).shape;
    for (size_t d = 0; d < micro.size() && d < offsets.size(); ++d) {
      if (micro[d] != global[d]) {
        offsets[d] += pass_ * micro[d];
        break;
      }
    }
  }
  if (node.op() == "scaled_dot_product_attention") {
    const Shape& k = graph_.TypeOf(node.inputs(1)).shape;
    global.back() = k[k.size() - 2];
    offsets.back() = 0;
  }
  if (like.dim() != static_cast<int64_t>(global.size()) || like.size(-1) > global.back()) {
    throw std::invalid_argument(absl::StrCat("dropout noise for ", DescribeTensor(like), " does not fit the global [",
                                             absl::StrJoin(global, ", "), "]"));
  }
  at::Tensor noise = at::empty(global, like.options()).bernoulli_(1 - p, generator);
  noise.div_(1 - p);
  at::Tensor block = Narrow(noise, offsets, std::vector<int64_t>(like.sizes().begin(), like.sizes().end()));
  // A copy when it is a part: autograd saves the noise for backward, and a view would keep the
  // whole global tensor alive until then.
  return block.numel() == noise.numel() ? block : block.clone();
}

absl::StatusOr<at::Tensor> RankTrainer::Block(const at::Tensor& global, const v1::Shard& shard) const {
  const TensorType local = TensorType::FromProto(shard.local_type());
  if (global.dim() != static_cast<int64_t>(local.shape.size())) {
    return absl::InvalidArgumentError(absl::StrCat("'", shard.name(), "' has ", global.dim(), " dimensions; the program's block has ",
                                                   local.shape.size()));
  }
  std::vector<int64_t> start(shard.offsets().start().begin(), shard.offsets().start().end());
  at::Tensor block = Narrow(global, start, local.shape);
  // A part is copied: a view would keep the whole global tensor alive.
  return block.numel() == global.numel() ? block.contiguous() : block.clone(at::MemoryFormat::Contiguous);
}

absl::StatusOr<std::unique_ptr<RankTrainer>> RankTrainer::Create(Graph graph, v1::RankProgram program,
                                                                  std::vector<Communicator*> groups,
                                                                  const RankTrainerOptions& options) {
  if (groups.size() != static_cast<size_t>(program.mesh_size())) {
    return absl::InvalidArgumentError(absl::StrCat(groups.size(), " communicators for a ", program.mesh_size(), "-axis mesh"));
  }
  bool random = false;
  for (const auto& node : graph.proto().nodes()) random |= DrawsRandomNumbers(node);
  std::unique_ptr<RankTrainer> t(new RankTrainer(std::move(graph)));
  t->random_ = random;
  // One step per concern, in this order: each reads what the ones before it filled (the ZeRO
  // layout the parameters' blocks, the buckets the layout, the recompute segments ZeRO-3's
  // reads, the optimizer what the layout says it updates).
  MAPD_RETURN_IF_ERROR(t->SetUpMicroBatches(program.micro_batches()));
  t->seed_ = options.seed;
  t->program_ = std::move(program);
  t->groups_ = std::move(groups);
  MAPD_RETURN_IF_ERROR(t->MakeParameters(options.seed));
  t->FindLastReaders();
  MAPD_RETURN_IF_ERROR(t->CountBlockCopies());
  t->LayOutZero();
  const std::unordered_map<std::string, int> block_of_chain = t->MapZero3Reads();
  t->DeferMicroBatchReductions();
  MAPD_RETURN_IF_ERROR(t->MakeGradBuckets(options.bucket_bytes));
  MAPD_RETURN_IF_ERROR(t->MakeZeroBuckets(options.bucket_bytes));
  t->tail_start_ = RunningStatisticsTail(t->program_, t->graph_);
  MAPD_RETURN_IF_ERROR(t->MapRecomputeSegments(block_of_chain));
  MAPD_RETURN_IF_ERROR(t->MakeOptimizer(options.optimizer));
  return t;
}

absl::Status RankTrainer::SetUpMicroBatches(int64_t micro_batches) {
  micro_batches_ = std::max<int64_t>(1, micro_batches);
  if (micro_batches_ > 1) {
    auto micro = MicroBatchGraph(graph_, micro_batches_);
    if (!micro.ok()) return micro.status();
    auto info = AnalyzeMicroBatching(graph_);
    if (!info.ok()) return info.status();
    micro_graph_ = std::make_unique<Graph>(*std::move(micro));
    pass_loss_scale_ = info->averaged ? 1.0 / static_cast<double>(micro_batches_) : 1.0;
  }
  return absl::OkStatus();
}

absl::Status RankTrainer::MakeParameters(uint64_t seed) {
  // Parameter by parameter: the global tensor from the seed (what one device makes), this
  // rank's block kept, the rest freed — a rank never holds more than its blocks and one whole
  // parameter (and, for an imported model, its archive, loaded once for all of them).
  ArchiveScope archives;
  for (const v1::Shard& shard : program_.parameters()) {
    const v1::Parameter* p = graph_.FindParameter(shard.name());
    if (p == nullptr) return absl::InvalidArgumentError(absl::StrCat("the program's parameter '", shard.name(), "' is not in the graph"));
    auto global = MakeParameterTensor(*p, seed);
    if (!global.ok()) return global.status();
    auto block = Block(*global, shard);
    if (!block.ok()) return block.status();
    at::Tensor local = block->clone().detach();
    if (p != nullptr && p->trainable()) {
      local.requires_grad_(true);
      trainable_.emplace_back(shard.name(), local);
    }
    leaves_[shard.name()] = local;
  }
  return absl::OkStatus();
}

void RankTrainer::FindLastReaders() {
  // Last readers: every name read by an instruction, except the loss and buffer updates.
  std::unordered_map<std::string, int> last;
  const auto& ins = program_.instructions();
  for (int i = 0; i < ins.size(); ++i) {
    for (const std::string& name : InstructionReads(ins[i])) last[name] = i;
  }
  last.erase(program_.loss());
  for (const auto& u : graph_.proto().buffer_updates()) last.erase(u.value());
  for (const v1::Shard& out : program_.outputs()) last.erase(out.name());  // a pipeline stage sends them after
  for (const v1::StageTransfer& r : program_.pipeline().receives()) received_.insert(r.value());
  release_.resize(ins.size());
  for (const auto& [name, i] : last) {
    if (!leaves_.count(name)) release_[i].push_back(name);
  }
}

absl::Status RankTrainer::MapRecomputeSegments(const std::unordered_map<std::string, int>& block_of_chain) {
  // Recompute segments: what flows in and out of each.
  segment_at_.assign(program_.instructions_size(), -1);
  std::set<std::string> kept_after;  // the loss and buffer updates are read "after" the program
  kept_after.insert(program_.loss());
  for (const auto& u : graph_.proto().buffer_updates()) kept_after.insert(u.value());
  for (const v1::Shard& out : program_.outputs()) kept_after.insert(out.name());
  for (int s = 0; s < program_.recompute_size(); ++s) {
    const v1::RecomputeSegment& seg = program_.recompute(s);
    if (seg.first() < 0 || seg.last() < seg.first() || seg.last() >= program_.instructions_size()) {
      return absl::InvalidArgumentError(absl::StrCat("recompute segment ", s, " [", seg.first(), ", ", seg.last(), "] is outside the program"));
    }
    SegmentIo io;
    std::set<std::string> made, read_in;
    auto reads = [&](int i) { return InstructionReads(program_.instructions(i)); };
    auto writes = [&](int i) { return InstructionWrites(program_.instructions(i)); };
    for (int i = seg.first(); i <= seg.last(); ++i) {
      for (const auto& r : reads(i)) {
        if (!made.count(r) && !leaves_.count(r) && read_in.insert(r).second) io.inputs.push_back(r);
      }
      for (const auto& w : writes(i)) made.insert(w);
    }
    std::set<std::string> needed = kept_after;
    for (int i = seg.last() + 1; i < program_.instructions_size(); ++i) {
      for (const auto& r : reads(i)) needed.insert(r);
    }
    for (int i = seg.first(); i <= seg.last(); ++i) {
      for (const auto& w : writes(i)) {
        if (needed.count(w)) io.outputs.push_back(w);
      }
    }
    segment_at_[seg.first()] = s;
    std::vector<int> blocks;
    for (const std::string& in : io.inputs) {
      auto b = block_of_chain.find(in);
      if (b != block_of_chain.end()) blocks.push_back(b->second);
    }
    segment_blocks_.push_back(std::move(blocks));
    segments_.push_back(std::move(io));
  }
  return absl::OkStatus();
}

absl::Status RankTrainer::MakeOptimizer(const OptimizerOptions& options) {
  // Clipping needs the norm over every shard: the trainer computes it across ranks and scales
  // the gradients itself; the optimizer does not clip.
  max_grad_norm_ = options.max_grad_norm;
  OptimizerOptions local = options;
  local.max_grad_norm = 0;
  auto optimizer = Optimizer::Create(local, updated_);
  if (!optimizer.ok()) return optimizer.status();
  optimizer_ = *std::move(optimizer);
  return absl::OkStatus();
}

absl::Status RankTrainer::RunInstruction(int index, Env& env, at::Generator& generator) const {
  const v1::Instruction& ins = program_.instructions(index);
  if (ins.has_communicate()) return RunCommunicate(index, env);
  return RunCompute(index, env, generator);
}

absl::Status RankTrainer::RunCommunicate(int index, Env& env) const {
  const v1::Communicate& c = program_.instructions(index).communicate();
  if (const auto [set, slot] = bucket_of_step_[index]; set >= 0) {  // its bucket all-reduces it
    try {
      env[c.output()] = BucketedGradSync(env.at(c.input()), buckets_[set].get(), slot);
    } catch (const std::exception& e) {
      return TorchError(absl::StatusCode::kInternal, absl::StrCat("'", c.input(), "' on rank ", program_.rank()), e);
    }
    return absl::OkStatus();
  }
  if (deferred_step_[index]) {  // its all-reduce waits for the last pass (Step)
    env[c.output()] = env.at(c.input());
    return absl::OkStatus();
  }
  if (identity_step_[index]) {
    // ZeRO-2 reduce-scatters this parameter's gradient itself. The autograd node is made
    // here, at the parameter's use, not before the forward: the engine runs ready nodes
    // latest-made first, so a node made early would hold every whole gradient to the end.
    auto z = zero_step_param_.find(index);
    if (z == zero_step_param_.end()) {
      env[c.output()] = env.at(c.input());
    } else {
      const auto [set, slot] = zero_bucket_of_[z->second];
      ZeroBuckets* buckets = set >= 0 ? zero_buckets_[set].get() : nullptr;
      const bool gathered = program_.zero_stage() >= 3;
      try {
        env[c.output()] = ZeroParameter(updated_[z->second].second, trainable_[z->second].second,
                                        &zero_[zero_of_[z->second]], &groups_, gathered, buckets, slot);
      } catch (const std::exception& e) {
        return TorchError(absl::StatusCode::kUnavailable, absl::StrCat("gathering '", c.input(), "' on rank ", program_.rank()), e);
      }
    }
    return absl::OkStatus();
  }
  auto out = ApplyCommunicate(c, env.at(c.input()), *groups_.at(c.axis()));
  if (!out.ok()) return out.status();
  env[c.output()] = *std::move(out);
  return absl::OkStatus();
}

absl::Status RankTrainer::RunCompute(int index, Env& env, at::Generator& generator) const {
  const ExecTable& table = ExecTable::Global();
  const v1::Compute& c = program_.instructions(index).compute();
  v1::Node node = graph_.node(c.node());
  *node.mutable_attrs() = c.attrs();
  const ExecEntry* entry = table.Find(node.op());
  if (entry == nullptr) return absl::UnimplementedError(absl::StrCat("node '", node.name(), "': no execution entry for ", node.op()));
  std::vector<at::Tensor> inputs;
  for (const std::string& name : c.inputs()) inputs.push_back(name.empty() ? at::Tensor() : env.at(name));
  std::vector<TensorType> types;
  for (const auto& t : c.output_types()) types.push_back(TensorType::FromProto(t));
  std::vector<at::Tensor> outs;
  try {
    ExecContext ctx(node, std::move(inputs), types, c10::Device(c10::kCPU), /*training=*/!evaluating_);
    if (random_ && !evaluating_) {
      ctx.set_dropout_noise([&](const at::Tensor& like, double p) { return DropoutNoiseBlock(node, c, like, p, generator); });
      ctx.set_generator(generator);
    }
    outs = entry->fn(ctx);
  } catch (const std::exception& e) {
    return TorchError(absl::StatusCode::kInternal,
                      absl::StrCat("node '", node.name(), "' (", node.op(), ") on rank ", program_.rank()), e);
  }
  for (size_t k = 0; k < outs.size() && k < types.size(); ++k) {
    // Creation ops build the global tensor: keep this rank's block.
    if (!MatchesType(outs[k], types[k]) && k < static_cast<size_t>(c.output_offsets_size())) {
      std::vector<int64_t> off(c.output_offsets(k).start().begin(), c.output_offsets(k).start().end());
      if (outs[k].dim() == static_cast<int64_t>(types[k].shape.size())) outs[k] = Narrow(outs[k], off, types[k].shape);
    }
    if (!MatchesType(outs[k], types[k])) {
      return absl::InternalError(absl::StrCat("node '", node.name(), "' (", node.op(), ") on rank ", program_.rank(),
                                              ": output ", k, " is ", DescribeTensor(outs[k]), ", the program says ",
                                              types[k].ToString()));
    }
    if (c.output_scale() != 1 && c.output_scale() != 0) outs[k] = outs[k] * c.output_scale();
    env[c.outputs(static_cast<int>(k))] = outs[k];
  }
  // ZeRO-3: a block freed after forward is gathered again when backward reaches this node (its
  // outputs' gradients are ready just before its backward runs).
  for (int i : reads_block_[index]) {
    for (at::Tensor& out : outs) {
      if (!out.defined() || !out.requires_grad()) continue;
      out.register_hook([this, i](const at::Tensor& grad) {
        if (auto st = GatherBlocks({i}); !st.ok()) throw std::runtime_error(std::string(st.ToString()));
        return grad;
      });
    }
  }
  return absl::OkStatus();
}

// A recompute segment as an autograd function: forward runs it without recording (so it keeps
// only its inputs, saved here); backward reruns it with recording from the saved inputs — the
// dropout generator restored to its state at the segment's start, so the masks are the same —
// and backpropagates through the rerun (parameters' gradients accumulate there, as in
// torch.utils.checkpoint's reentrant form), returning the inputs' gradients.
struct SegmentFn : torch::autograd::Function<SegmentFn> {
  // `inputs` is a TensorList: autograd sees each element as an input (a std::vector would pass
  // as an opaque argument, and nothing would flow back through the segment).
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, at::TensorList inputs,
                                                const RankTrainer* t, int64_t s, at::Generator* generator) {
    ctx->saved_data["trainer"] = reinterpret_cast<int64_t>(t);
    ctx->saved_data["segment"] = s;
    if (generator->defined()) ctx->saved_data["rng"] = generator->clone();
    c10::List<bool> needs;
    for (const auto& x : inputs) needs.push_back(x.requires_grad());
    ctx->saved_data["needs"] = needs;
    ctx->save_for_backward(inputs.vec());
    at::NoGradGuard no_grad;
    auto outs = t->RunSegmentBody(static_cast<int>(s), inputs.vec(), *generator);
    if (!outs.ok()) throw std::runtime_error(std::string(outs.status().ToString()));
    return *std::move(outs);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    const auto* t = reinterpret_cast<const RankTrainer*>(ctx->saved_data["trainer"].toInt());
    const int s = static_cast<int>(ctx->saved_data["segment"].toInt());
    const c10::List<bool> needs = ctx->saved_data["needs"].toBoolList();
    at::Generator generator;
    if (ctx->saved_data.count("rng")) generator = ctx->saved_data["rng"].toGenerator().clone();
    torch::autograd::variable_list inputs;
    for (const auto& x : ctx->get_saved_variables()) inputs.push_back(x.detach());
    for (size_t i = 0; i < inputs.size(); ++i) inputs[i].requires_grad_(needs.get(i));
    torch::autograd::variable_list outs;
    {
      // ZeRO-3 blocks the segment reads were freed after forward: gathered again for the rerun
      // (the saved inputs are views of their storage).
      if (auto st = t->GatherBlocks(t->segment_blocks_[s]); !st.ok()) throw std::runtime_error(std::string(st.ToString()));
      at::AutoGradMode grad_mode(true);
      auto rerun = t->RunSegmentBody(s, inputs, generator);
      if (!rerun.ok()) throw std::runtime_error(std::string(rerun.status().ToString()));
      outs = *std::move(rerun);
    }
    torch::autograd::variable_list with_grad, their_grads;
    for (size_t k = 0; k < outs.size(); ++k) {
      if (outs[k].requires_grad() && grads[k].defined()) {
        with_grad.push_back(outs[k]);
        their_grads.push_back(grads[k]);
      }
    }
    if (!with_grad.empty()) torch::autograd::backward(with_grad, their_grads);
    torch::autograd::variable_list result;
    for (auto& x : inputs) result.push_back(x.requires_grad() ? x.grad() : at::Tensor());
    result.push_back(at::Tensor());  // trainer
    result.push_back(at::Tensor());  // segment
    result.push_back(at::Tensor());  // generator
    return result;
  }
};

absl::StatusOr<std::vector<at::Tensor>> RankTrainer::RunSegmentBody(int s, const std::vector<at::Tensor>& inputs,
                                                                   at::Generator& generator) const {
  const v1::RecomputeSegment& seg = program_.recompute(s);
  const SegmentIo& io = segments_[s];
  Env env = leaves_;
  for (size_t i = 0; i < io.inputs.size(); ++i) env[io.inputs[i]] = inputs[i];
  for (int i = seg.first(); i <= seg.last(); ++i) {
    if (auto st = RunInstruction(i, env, generator); !st.ok()) return st;
    for (const std::string& name : release_[i]) env.erase(name);  // as the main loop does
  }
  std::vector<at::Tensor> outs;
  for (const std::string& name : io.outputs) outs.push_back(env.at(name));
  return outs;
}

absl::Status RankTrainer::RunSegment(int s, Env& env, at::Generator& generator) const {
  const SegmentIo& io = segments_[s];
  torch::autograd::variable_list inputs;
  for (const std::string& name : io.inputs) inputs.push_back(env.at(name));
  torch::autograd::variable_list outs;
  try {
    outs = SegmentFn::apply(at::TensorList(inputs), this, static_cast<int64_t>(s), &generator);
  } catch (const std::exception& e) {
    return TorchError(absl::StatusCode::kInternal,
                      absl::StrCat("recompute segment ", program_.recompute(s).layer(), " on rank ", program_.rank()), e);
  }
  for (size_t k = 0; k < io.outputs.size(); ++k) env[io.outputs[k]] = outs[k];
  return absl::OkStatus();
}

absl::StatusOr<RankTrainer::Pass> RankTrainer::Forward(const TensorMap& blocks, int64_t index) {
  Pass pass;
  pass.index = index;
  pass_ = index;
  Env& env = pass.env;
  env = leaves_;
  for (const auto& [name, block] : blocks) env[name] = block;
  // Dropout draws as one device does: a generator seeded like the single-device trainer's for
  // this step, the global mask drawn in node order, this rank's block kept (every pass draws the
  // whole batch's masks again from the same seed and keeps its slice).
  at::Generator generator;
  if (random_) generator = at::make_generator<at::CPUGeneratorImpl>(DeriveSeed(seed_, absl::StrCat("step:", steps_ + 1)));
  for (int index = 0; index < tail_start_; ++index) {
    if (index > 0) {
      for (const std::string& name : release_[index - 1]) env.erase(name);
    }
    const int seg = segment_at_[index];
    if (seg < 0) {
      if (auto st = RunInstruction(index, env, generator); !st.ok()) return st;
      for (int i : free_after_[index]) FreeBlock(trainable_[i].second);
      continue;
    }
    if (auto st = RunSegment(seg, env, generator); !st.ok()) return st;
    const int last = program_.recompute(seg).last();
    for (int i = index; i < last; ++i) {
      for (const std::string& name : release_[i]) env.erase(name);
    }
    for (int i = index; i <= last; ++i) {
      for (int p : free_after_[i]) FreeBlock(trainable_[p].second);
    }
    index = last;
  }
  // What the last instruction read last goes before backward, as after every other one.
  if (tail_start_ > 0) {
    for (const std::string& name : release_[tail_start_ - 1]) env.erase(name);
  }
  return pass;
}

bool RankTrainer::LossSummedAlone() const {
  if (program_.loss_partial_axes_size() != 1) return false;
  for (int i = tail_start_; i < program_.instructions_size(); ++i) {
    if (program_.instructions(i).has_communicate()) return false;
  }
  return true;
}

absl::StatusOr<at::Tensor> RankTrainer::SumLossAndRunTail(Pass& pass, at::Tensor loss) {
  at::NoGradGuard no_grad;  // the running statistics have no gradient; backward is done
  at::Generator generator;  // (no random op in the tail)
  const int n = program_.instructions_size();
  std::vector<bool> ran(n, false), waits(n, false);
  std::map<int, std::vector<int>> waiting;  // per axis, the all-reduces whose input is there
  bool loss_summed_on_first_axis = false;
  auto ready = [&](int i) {
    for (const std::string& r : InstructionReads(program_.instructions(i))) {
      if (!r.empty() && !pass.env.count(r)) return false;
    }
    return true;
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (int i = tail_start_; i < n; ++i) {
      if (ran[i] || waits[i] || !ready(i)) continue;
      progress = true;
      const v1::Instruction& ins = program_.instructions(i);
      if (ins.has_communicate()) {
        waiting[ins.communicate().axis()].push_back(i);
        waits[i] = true;
        continue;
      }
      if (auto st = RunInstruction(i, pass.env, generator); !st.ok()) return st;
      ran[i] = true;
    }
    if (progress || waiting.empty()) continue;
    for (const auto& [axis, all_reduces] : waiting) {  // nothing else can run: sum what waits
      std::vector<at::Tensor> inputs;
      for (int i : all_reduces) inputs.push_back(pass.env.at(program_.instructions(i).communicate().input()));
      const bool with_loss = loss.defined() && !loss_summed_on_first_axis && program_.loss_partial_axes_size() > 0 &&
                             program_.loss_partial_axes(0) == axis;
      if (with_loss) inputs.push_back(loss);
      Communicator& group = *groups_.at(axis);
      auto sums = AllReduceSumCoalesced(inputs, group);
      if (!sums.ok()) return sums.status();
      for (size_t k = 0; k < all_reduces.size(); ++k) {
        const v1::Communicate& step = program_.instructions(all_reduces[k]).communicate();
        // A reduce-scatter's sum is the whole tensor's: this rank keeps its chunk (six of them a
        // step, one per batch norm, had cost a 4-rank ResNet 2.3-2.8 ms as separate collectives).
        pass.env[step.output()] = step.kind() == v1::Communicate::REDUCE_SCATTER ? ChunkOf((*sums)[k], group, step.dim()) : (*sums)[k];
        ran[all_reduces[k]] = true;
      }
      if (with_loss) loss = sums->back();
      loss_summed_on_first_axis |= with_loss;
    }
    waiting.clear();
    progress = true;
  }
  for (int i = tail_start_; i < n; ++i) {
    if (!ran[i]) return absl::InternalError(absl::StrCat("rank ", program_.rank(), "'s instruction ", i, " after the loss never got its inputs"));
    for (const std::string& name : release_[i]) pass.env.erase(name);
  }
  for (int k = loss_summed_on_first_axis ? 1 : 0; loss.defined() && k < program_.loss_partial_axes_size(); ++k) {
    if (auto st = groups_.at(program_.loss_partial_axes(k))->AllReduceSum(loss); !st.ok()) return st;
  }
  return loss;
}

absl::StatusOr<at::Tensor> RankTrainer::PassLoss(const Pass& pass) const {
  auto it = pass.env.find(program_.loss());
  if (program_.loss().empty() || it == pass.env.end()) return absl::InternalError("the program's loss was not computed");
  return it->second;
}

absl::StatusOr<at::Tensor> RankTrainer::BackwardFromLocalLoss(Pass& pass) {
  pass_ = pass.index;  // a recomputed segment's dropout keeps this pass's slice
  auto found = PassLoss(pass);
  if (!found.ok()) return found.status();
  at::Tensor loss = *found;
  try {
    if (pass_loss_scale_ == 1) {
      loss.backward();
    } else {
      (loss * pass_loss_scale_).backward();
    }
  } catch (const std::exception& e) {
    return TorchError(absl::StatusCode::kUnavailable, absl::StrCat("backward on rank ", program_.rank()), e);
  }
  return loss.detach().to(at::kDouble).clone();
}

absl::StatusOr<double> RankTrainer::BackwardFromLoss(Pass& pass) {
  auto local = BackwardFromLocalLoss(pass);
  if (!local.ok()) return local.status();
  at::Tensor global_loss = *std::move(local);
  for (int a : program_.loss_partial_axes()) {
    if (auto st = groups_.at(a)->AllReduceSum(global_loss); !st.ok()) return st;
  }
  return global_loss.item<double>();
}

absl::Status RankTrainer::Backward(Pass& pass, const std::vector<std::string>& outputs, const std::vector<at::Tensor>& grads) {
  pass_ = pass.index;
  torch::autograd::variable_list with_grad, their_grads;
  for (size_t k = 0; k < outputs.size() && k < grads.size(); ++k) {
    auto it = pass.env.find(outputs[k]);
    if (it == pass.env.end()) return absl::InternalError(absl::StrCat("the pass has no value '", outputs[k], "' to backpropagate from"));
    if (!it->second.requires_grad() || !grads[k].defined()) continue;
    with_grad.push_back(it->second);
    their_grads.push_back(grads[k]);
  }
  if (with_grad.empty()) return absl::OkStatus();
  try {
    torch::autograd::backward(with_grad, their_grads);
  } catch (const std::exception& e) {
    return TorchError(absl::StatusCode::kUnavailable, absl::StrCat("backward on rank ", program_.rank()), e);
  }
  return absl::OkStatus();
}

absl::StatusOr<RankTrainer::LocalBatch> RankTrainer::TakeBlocks(const TensorMap& global_batch) const {
  LocalBatch passes(micro_batches_);
  for (int64_t pass = 0; pass < micro_batches_; ++pass) {
    // The pass's slice of every batched input (dimension 0, divided in the micro-batch graph).
    TensorMap slice;
    const TensorMap* batch = &global_batch;
    if (micro_graph_ != nullptr) {
      for (const auto& [name, tensor] : global_batch) {
        const ValueInfo* vi = micro_graph_->FindValue(name);
        const bool batched = vi != nullptr && !vi->type.shape.empty() && tensor.dim() > 0 && tensor.size(0) != vi->type.shape[0];
        if (batched && tensor.size(0) != vi->type.shape[0] * micro_batches_) {
          return absl::InvalidArgumentError(absl::StrCat("input '", name, "' has ", tensor.size(0), " samples; ", micro_batches_,
                                                         " micro-batches of ", vi->type.shape[0], " need ",
                                                         vi->type.shape[0] * micro_batches_));
        }
        slice[name] = batched ? tensor.narrow(0, pass * vi->type.shape[0], vi->type.shape[0]) : tensor;
      }
      batch = &slice;
    }
    for (const v1::Shard& shard : program_.inputs()) {
      if (received_.count(shard.name())) continue;  // another stage sends it
      auto it = batch->find(shard.name());
      if (it == batch->end()) return absl::InvalidArgumentError(absl::StrCat("the batch has no input '", shard.name(), "'"));
      auto block = Block(it->second, shard);
      if (!block.ok()) return block.status();
      passes[pass][shard.name()] = *std::move(block);
    }
  }
  return passes;
}

absl::StatusOr<StepResult> RankTrainer::Step(const TensorMap& global_batch) {
  auto blocks = TakeBlocks(global_batch);
  if (!blocks.ok()) return blocks.status();
  return Step(*blocks);
}

absl::StatusOr<StepResult> RankTrainer::Step(const LocalBatch& batch) {
  if (static_cast<int64_t>(batch.size()) != micro_batches_) {
    return absl::InvalidArgumentError(absl::StrCat("a step of ", micro_batches_, " micro-batches was given ", batch.size()));
  }
  const auto start = std::chrono::steady_clock::now();
  Pass pass;
  at::Tensor local_loss;  // this rank's share of the step's loss, summed over the ranks once, at the end
  for (int64_t k = 0; k < micro_batches_; ++k) {
    pass = Pass();  // the previous pass's values go before this one runs
    auto forward = Forward(batch[k], k);
    if (!forward.ok()) return forward.status();
    pass = *std::move(forward);
    auto loss = BackwardFromLocalLoss(pass);
    if (!loss.ok()) return loss.status();
    local_loss = k == 0 ? *loss * pass_loss_scale_ : local_loss + *loss * pass_loss_scale_;
  }
  pass_ = 0;
  std::unique_ptr<PendingCollective> loss_sum;
  if (LossSummedAlone()) {
    local_loss = local_loss.detach().clone();
    auto started = groups_.at(program_.loss_partial_axes(0))->AllReduceSumAsync(local_loss);
    if (!started.ok()) return started.status();
    loss_sum = *std::move(started);
  }
  if (auto st = ReduceGradients(); !st.ok()) return st;
  auto loss = SumLossAndRunTail(pass, loss_sum ? at::Tensor() : local_loss);
  if (!loss.ok()) return loss.status();
  if (auto st = ApplyGradients({}, pass); !st.ok()) return st;
  if (loss_sum) {
    if (auto st = loss_sum->Wait(); !st.ok()) return st;
    *loss = local_loss;
  }
  StepResult r;
  r.step = steps_;
  r.loss = loss->item<double>();
  r.lr = LearningRate();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

absl::StatusOr<double> RankTrainer::Evaluate(const LocalBatch& batch) {
  if (static_cast<int64_t>(batch.size()) != micro_batches_) {
    return absl::InvalidArgumentError(absl::StrCat("an evaluation of ", micro_batches_, " micro-batches was given ", batch.size()));
  }
  at::NoGradGuard no_grad;
  evaluating_ = true;
  absl::Cleanup done = [this] {
    evaluating_ = false;
    pass_ = 0;
  };
  at::Tensor local;
  for (int64_t k = 0; k < micro_batches_; ++k) {
    auto pass = Forward(batch[k], k);
    if (!pass.ok()) return pass.status();
    auto loss = PassLoss(*pass);
    if (!loss.ok()) return loss.status();
    const at::Tensor scaled = loss->detach().to(at::kDouble) * pass_loss_scale_;
    local = k == 0 ? scaled : local + scaled;
  }
  for (int a : program_.loss_partial_axes()) {
    if (auto st = groups_.at(a)->AllReduceSum(local); !st.ok()) return st;
  }
  return local.item<double>();
}
}  // namespace mapd

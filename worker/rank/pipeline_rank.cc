#include "worker/rank/pipeline_rank.h"

#include <ATen/ATen.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "worker/memory/counting_allocator.h"
#include "worker/runtime/torch_types.h"

namespace mapd {

namespace {

// Tags of the tied weights' gradient sums: above every transfer's (tag · m + k).
constexpr int kTiedTagBase = 1 << 30;

}  // namespace

std::vector<int64_t> PipelineWorldMesh(const v1::RankProgram& program) {
  std::vector<int64_t> mesh{std::max(1, program.pipeline().stages())};
  mesh.insert(mesh.end(), program.mesh().begin(), program.mesh().end());
  return mesh;
}

int PipelineGlobalRank(const v1::RankProgram& program) {
  return program.pipeline().stage() * program.pipeline().stage_ranks() + program.rank();
}

absl::StatusOr<std::unique_ptr<PipelineRank>> PipelineRank::Create(const Graph& graph, v1::RankProgram program,
                                                                  std::vector<Communicator*> groups, const RankTrainerOptions& options) {
  const v1::PipelineRole& role = program.pipeline();
  if (role.stages() < 2 || role.stage() < 0 || role.stage() >= role.stages()) {
    return absl::FailedPreconditionError(absl::StrCat("rank ", program.rank(), "'s program is not a pipeline stage's (stage ", role.stage(),
                                                      " of ", role.stages(), ")"));
  }
  const int chunks = std::max(1, role.chunks());
  const std::string want = chunks > 1 ? "interleaved 1F1B" : "1F1B";
  if (role.schedule() != want) {
    return absl::UnimplementedError(absl::StrCat("pipeline schedule '", role.schedule(), "' with ", chunks, " chunk(s) a stage: only 1F1B "
                                                 "and interleaved 1F1B (2 chunks or more) are built"));
  }
  if (program.later_chunks_size() != chunks - 1) {
    return absl::InvalidArgumentError(absl::StrCat("stage ", role.stage(), "'s program has ", program.later_chunks_size() + 1,
                                                   " chunk program(s) for ", chunks, " chunks a stage"));
  }
  if (groups.size() != static_cast<size_t>(program.mesh_size()) + 1) {
    return absl::InvalidArgumentError(absl::StrCat(groups.size(), " communicators for a pipeline of ", program.mesh_size(), "-axis stages"));
  }
  auto sequence = FindLayerSequence(graph);
  if (!sequence.ok()) return sequence.status();
  std::unique_ptr<PipelineRank> r(new PipelineRank());
  r->pipeline_ = groups.front();
  r->stage_ = role.stage();
  r->stages_ = role.stages();
  r->rank_ = program.rank();
  r->micro_batches_ = std::max<int64_t>(1, program.micro_batches());
  r->schedule_ = InterleavedSchedule(role.stage(), role.stages(), chunks, r->micro_batches_);
  if (const char* trace = std::getenv("MAPD_PIPELINE_TRACE"); trace != nullptr) r->trace_path_ = trace;
  std::vector<v1::RankProgram> later(program.later_chunks().begin(), program.later_chunks().end());
  program.clear_later_chunks();
  const std::vector<Communicator*> stage_groups(groups.begin() + 1, groups.end());
  if (auto st = r->AddChunk(graph, *sequence, std::move(program), stage_groups, options); !st.ok()) return st;
  for (v1::RankProgram& p : later) {
    if (auto st = r->AddChunk(graph, *sequence, std::move(p), stage_groups, options); !st.ok()) return st;
  }
  return r;
}

absl::Status PipelineRank::AddChunk(const Graph& graph, const LayerSequence& sequence, v1::RankProgram program,
                                    std::vector<Communicator*> groups, const RankTrainerOptions& options) {
  Chunk c;
  c.role = program.pipeline();
  const int index = static_cast<int>(chunks_.size());
  if (c.role.stage() != stage_ || c.role.stages() != stages_ || std::max(0, c.role.chunk()) != index || program.rank() != rank_) {
    return absl::InvalidArgumentError(absl::StrCat("chunk ", index, " of stage ", stage_, " rank ", rank_, " was given stage ", c.role.stage(),
                                                   "'s chunk ", c.role.chunk(), " rank ", program.rank()));
  }
  auto stage_graph = StageGraph(graph, sequence, c.role.first_layer(), c.role.end_layer());
  if (!stage_graph.ok()) return stage_graph.status();
  if (stage_graph->num_nodes() != c.role.stage_graph_nodes()) {
    return absl::InvalidArgumentError(absl::StrCat("stage ", stage_, " chunk ", index, "'s graph here has ", stage_graph->num_nodes(),
                                                   " nodes; its program was lowered from one of ", c.role.stage_graph_nodes(),
                                                   " (another graph?)"));
  }
  const int chunks = std::max(1, c.role.chunks());
  c.last = stage_ + 1 == stages_ && index + 1 == chunks;
  c.keeps_last_pass = stage_graph->proto().buffer_updates_size() > 0;
  auto trainer = RankTrainer::Create(*std::move(stage_graph), std::move(program), std::move(groups), options);
  if (!trainer.ok()) return trainer.status();
  c.trainer = *std::move(trainer);
  for (const v1::TiedParameter& t : c.role.tied()) c.trainer->CountHeldBy(t.name(), 2);  // one weight, two stages
  chunks_.push_back(std::move(c));
  return absl::OkStatus();
}

absl::StatusOr<PipelineRank::LocalBatch> PipelineRank::TakeBlocks(const TensorMap& global_batch) const {
  LocalBatch out;
  for (const Chunk& c : chunks_) {
    auto blocks = c.trainer->TakeBlocks(global_batch);
    if (!blocks.ok()) return blocks.status();
    out.push_back(*std::move(blocks));
  }
  return out;
}

absl::StatusOr<at::Tensor> PipelineRank::EmptyLike(const Chunk& c, const google::protobuf::RepeatedPtrField<v1::Shard>& shards,
                                                   const std::string& name) const {
  for (const v1::Shard& s : shards) {
    if (s.name() != name) continue;
    const TensorType t = TensorType::FromProto(s.local_type());
    return at::empty(t.shape, at::TensorOptions().dtype(ToScalarType(t.dtype)));
  }
  return absl::InternalError(absl::StrCat("stage ", stage_, " chunk ", c.role.chunk(), " rank ", rank_, " holds no '", name, "'"));
}

absl::Status PipelineRank::RunForward(Chunk& c, int64_t k, const TensorMap& blocks) {
  TensorMap inputs = blocks;
  std::vector<at::Tensor>& received = c.received[k];
  for (const v1::StageTransfer& t : c.role.receives()) {
    auto tensor = EmptyLike(c, c.trainer->program().inputs(), t.value());
    if (!tensor.ok()) return tensor.status();
    if (auto st = pipeline_->Recv(*tensor, t.peer_stage(), Tag(t, k)); !st.ok()) return st;
    if (t.gradient()) tensor->requires_grad_(true);
    inputs[t.value()] = *tensor;
    received.push_back(*tensor);
  }
  auto pass = c.trainer->Forward(inputs, k);
  if (!pass.ok()) return pass.status();
  for (const v1::StageTransfer& t : c.role.sends()) {
    auto it = pass->env.find(t.value());
    if (it == pass->env.end()) return absl::InternalError(absl::StrCat("stage ", stage_, " did not make '", t.value(), "' to send"));
    auto sent = pipeline_->Send(it->second.detach(), t.peer_stage(), Tag(t, k));
    if (!sent.ok()) return sent.status();
    sends_.push_back(*std::move(sent));
  }
  c.passes[k] = *std::move(pass);
  return absl::OkStatus();
}

absl::Status PipelineRank::RunBackward(Chunk& c, int64_t k) {
  if (!c.passes[k]) return absl::InternalError(absl::StrCat("backward of micro-batch ", k, " before its forward"));
  RankTrainer::Pass& pass = *c.passes[k];
  if (c.last) {
    auto loss = c.trainer->BackwardFromLoss(pass);
    if (!loss.ok()) return loss.status();
    loss_sum_ += c.trainer->pass_loss_scale() * *loss;
  } else {
    // The gradients of what this chunk sent, summed over the chunks that read each value.
    std::map<std::string, at::Tensor> grads;
    for (const v1::StageTransfer& t : c.role.sends()) {
      if (!t.gradient()) continue;
      auto g = EmptyLike(c, c.trainer->program().outputs(), t.value());
      if (!g.ok()) return g.status();
      if (auto st = pipeline_->Recv(*g, t.peer_stage(), Tag(t, k)); !st.ok()) return st;
      auto [it, fresh] = grads.emplace(t.value(), *g);
      if (!fresh) it->second.add_(*g);
    }
    std::vector<std::string> names;
    std::vector<at::Tensor> values;
    for (auto& [name, g] : grads) names.push_back(name), values.push_back(g);
    if (auto st = c.trainer->Backward(pass, names, values); !st.ok()) return st;
  }
  // The gradients of what this chunk received go back to the chunks that sent it.
  for (int j = 0; j < c.role.receives_size(); ++j) {
    const v1::StageTransfer& t = c.role.receives(j);
    if (!t.gradient()) continue;
    const at::Tensor& in = c.received[k][j];
    at::Tensor g = in.grad().defined() ? in.grad() : at::zeros_like(in);
    auto sent = pipeline_->Send(g, t.peer_stage(), Tag(t, k));
    if (!sent.ok()) return sent.status();
    sends_.push_back(*std::move(sent));
  }
  c.received[k].clear();
  if (k + 1 < micro_batches_ || !c.keeps_last_pass) c.passes[k].reset();
  return absl::OkStatus();
}

void PipelineRank::Trace(const PassAction& a) const {
  if (trace_path_.empty()) return;
  FILE* f = std::fopen(trace_path_.c_str(), "a");
  if (f == nullptr) return;  // a debugging aid: a path that cannot be written traces nothing
  const CountingCpuAllocator& memory = CountingCpuAllocator::Install();
  std::fprintf(f, "stage %d rank %d: %s%lld.%d done, live %lld peak %lld\n", stage_, rank_, a.forward ? "F" : "B",
               static_cast<long long>(a.micro_batch), a.chunk, static_cast<long long>(memory.live_bytes()),
               static_cast<long long>(memory.peak_bytes()));
  std::fclose(f);
}

absl::Status PipelineRank::WaitForSends() {
  for (auto& s : sends_) {
    if (auto st = s->Wait(); !st.ok()) return st;
  }
  sends_.clear();
  return absl::OkStatus();
}

absl::Status PipelineRank::SumTiedGradients(Chunk& c) {
  // Both stages send their gradient, then receive the other's and add it: the same sum at both.
  // Held alike, block against block; otherwise the whole gradients, each stage keeping its part.
  for (int j = 0; j < c.role.tied_size(); ++j) {
    const v1::TiedParameter& t = c.role.tied(j);
    at::Tensor mine;
    if (t.same_layout()) {
      at::Tensor* grad = c.trainer->UpdateGradient(t.name());
      if (grad == nullptr) return absl::InternalError(absl::StrCat("tied weight '", t.name(), "' has no gradient on stage ", stage_));
      mine = *grad;
    } else {
      auto whole = c.trainer->WholeGradient(t.name());
      if (!whole.ok()) return whole.status();
      mine = *std::move(whole);
    }
    auto sent = pipeline_->Send(mine.clone(), t.peer_stage(), kTiedTagBase + t.tag());
    if (!sent.ok()) return sent.status();
    at::Tensor other = at::empty_like(mine);
    if (auto st = pipeline_->Recv(other, t.peer_stage(), kTiedTagBase + t.tag()); !st.ok()) return st;
    if (auto st = (*sent)->Wait(); !st.ok()) return st;
    at::NoGradGuard no_grad;
    mine.add_(other);
    if (!t.same_layout()) {
      if (auto st = c.trainer->SetWholeGradient(t.name(), mine); !st.ok()) return st;
    }
  }
  return absl::OkStatus();
}

absl::Status PipelineRank::ApplyGradients() {
  // One clipping norm over every chunk of every stage: the chunks' squares summed here, then over
  // the stage's groups and the pipeline group.
  at::Tensor sumsq = at::zeros({}, at::kDouble);
  for (const Chunk& c : chunks_) {
    if (c.trainer->clips()) sumsq += c.trainer->GradientSquares();
  }
  auto scale = chunks_.front().trainer->ClipScale(sumsq, {pipeline_});
  if (!scale.ok()) return scale.status();
  for (Chunk& c : chunks_) {
    const RankTrainer::Pass none;
    const std::optional<RankTrainer::Pass>& last = c.passes.back();
    if (auto st = c.trainer->ApplyScaledGradients(*scale, last ? *last : none); !st.ok()) return st;
    c.passes.clear();
  }
  return absl::OkStatus();
}

absl::StatusOr<StepResult> PipelineRank::Step(const LocalBatch& batch) {
  if (batch.size() != chunks_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("a step of ", chunks_.size(), " chunks was given blocks for ", batch.size()));
  }
  for (const RankTrainer::LocalBatch& b : batch) {
    if (static_cast<int64_t>(b.size()) != micro_batches_) {
      return absl::InvalidArgumentError(absl::StrCat("a step of ", micro_batches_, " micro-batches was given ", b.size()));
    }
  }
  const auto start = std::chrono::steady_clock::now();
  for (Chunk& c : chunks_) {
    c.passes.assign(micro_batches_, std::nullopt);
    c.received.assign(micro_batches_, {});
  }
  loss_sum_ = 0;
  for (const PassAction& a : schedule_) {
    Chunk& c = chunks_[a.chunk];
    auto st = a.forward ? RunForward(c, a.micro_batch, batch[a.chunk][a.micro_batch]) : RunBackward(c, a.micro_batch);
    Trace(a);
    if (!st.ok()) {
      return absl::Status(st.code(), absl::StrCat("stage ", stage_, chunks_.size() > 1 ? absl::StrCat(" chunk ", a.chunk) : "", ", ",
                                                  a.forward ? "forward" : "backward", " of micro-batch ", a.micro_batch, ": ", st.message()));
    }
  }
  if (auto st = WaitForSends(); !st.ok()) return st;
  for (Chunk& c : chunks_) {
    if (auto st = c.trainer->ReduceGradients(); !st.ok()) return st;
  }
  for (Chunk& c : chunks_) {
    if (auto st = SumTiedGradients(c); !st.ok()) return st;
  }
  if (auto st = ApplyGradients(); !st.ok()) return st;
  // The loss is the last stage's: summed over the pipeline group, every stage reports it.
  at::Tensor loss = at::full({}, chunks_.back().last ? loss_sum_ : 0.0, at::kDouble);
  if (auto st = pipeline_->AllReduceSum(loss); !st.ok()) return st;
  StepResult r;
  r.step = chunks_.front().trainer->steps();
  r.loss = loss.item<double>();
  r.lr = chunks_.front().trainer->LearningRate();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

absl::StatusOr<v1::RankCheckpoint> PipelineRank::Save() const {
  v1::RankCheckpoint out;
  for (const Chunk& c : chunks_) {
    auto saved = c.trainer->Save();
    if (!saved.ok()) return saved.status();
    if (&c == &chunks_.front()) {
      out = *std::move(saved);
      continue;
    }
    for (v1::TensorData& d : *saved->mutable_parameters()) *out.add_parameters() = std::move(d);
    for (v1::OptimizerSlot& s : *saved->mutable_optimizer()) *out.add_optimizer() = std::move(s);
  }
  return out;
}

absl::Status PipelineRank::Restore(const v1::RankCheckpoint& c) {
  if (chunks_.size() == 1) return chunks_.front().trainer->Restore(c);
  // Each chunk takes the blocks and slots of its own parameters.
  size_t taken = 0;
  for (const Chunk& chunk : chunks_) {
    std::set<std::string> mine;
    for (const v1::Shard& s : chunk.trainer->program().parameters()) mine.insert(s.name());
    v1::RankCheckpoint part = c;
    part.clear_parameters();
    part.clear_optimizer();
    for (const v1::TensorData& d : c.parameters()) {
      if (mine.count(d.name())) *part.add_parameters() = d;
    }
    for (const v1::OptimizerSlot& s : c.optimizer()) {
      if (mine.count(s.name())) *part.add_optimizer() = s;
    }
    taken += part.parameters_size();
    if (auto st = chunk.trainer->Restore(part); !st.ok()) return st;
  }
  if (taken != static_cast<size_t>(c.parameters_size())) {
    return absl::InvalidArgumentError(absl::StrCat("the checkpoint has ", c.parameters_size(), " blocks; this rank's chunks hold ", taken,
                                                   " of them (another plan?)"));
  }
  return absl::OkStatus();
}

absl::Status PipelineRank::RestoreWhole(const v1::RankCheckpoint& whole) {
  for (Chunk& c : chunks_) {
    if (auto st = c.trainer->RestoreWhole(whole); !st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::pair<std::string, at::Tensor>>> PipelineRank::Blocks() const {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const Chunk& c : chunks_) {
    auto blocks = c.trainer->Blocks();
    if (!blocks.ok()) return blocks.status();
    out.insert(out.end(), blocks->begin(), blocks->end());
  }
  return out;
}

}  // namespace mapd

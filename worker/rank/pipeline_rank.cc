#include "worker/rank/pipeline_rank.h"

#include <ATen/ATen.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "absl/strings/str_cat.h"
#include "planner/plan/stages.h"
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
  if (role.schedule() != "1F1B") return absl::UnimplementedError(absl::StrCat("pipeline schedule '", role.schedule(), "': only 1F1B is built"));
  if (groups.size() != static_cast<size_t>(program.mesh_size()) + 1) {
    return absl::InvalidArgumentError(absl::StrCat(groups.size(), " communicators for a pipeline of ", program.mesh_size(), "-axis stages"));
  }
  auto sequence = FindLayerSequence(graph);
  if (!sequence.ok()) return sequence.status();
  auto stage_graph = StageGraph(graph, *sequence, role.first_layer(), role.end_layer());
  if (!stage_graph.ok()) return stage_graph.status();
  if (stage_graph->num_nodes() != role.stage_graph_nodes()) {
    return absl::InvalidArgumentError(absl::StrCat("stage ", role.stage(), "'s graph here has ", stage_graph->num_nodes(),
                                                   " nodes; its program was lowered from one of ", role.stage_graph_nodes(),
                                                   " (another graph?)"));
  }
  std::unique_ptr<PipelineRank> r(new PipelineRank());
  r->pipeline_ = groups.front();
  r->role_ = role;
  r->micro_batches_ = std::max<int64_t>(1, program.micro_batches());
  r->schedule_ = OneFOneBSchedule(role.stage(), role.stages(), r->micro_batches_);
  if (const char* trace = std::getenv("MAPD_PIPELINE_TRACE"); trace != nullptr) r->trace_path_ = trace;
  std::vector<Communicator*> stage_groups(groups.begin() + 1, groups.end());
  auto trainer = RankTrainer::Create(*std::move(stage_graph), std::move(program), std::move(stage_groups), options);
  if (!trainer.ok()) return trainer.status();
  r->trainer_ = *std::move(trainer);
  for (const v1::TiedParameter& t : role.tied()) r->trainer_->CountHeldBy(t.name(), 2);  // one weight, two stages
  return r;
}

absl::StatusOr<at::Tensor> PipelineRank::EmptyLike(const google::protobuf::RepeatedPtrField<v1::Shard>& shards,
                                                   const std::string& name) const {
  for (const v1::Shard& s : shards) {
    if (s.name() != name) continue;
    const TensorType t = TensorType::FromProto(s.local_type());
    return at::empty(t.shape, at::TensorOptions().dtype(ToScalarType(t.dtype)));
  }
  return absl::InternalError(absl::StrCat("stage ", role_.stage(), " rank ", program().rank(), " holds no '", name, "'"));
}

absl::Status PipelineRank::RunForward(int64_t k, const TensorMap& blocks) {
  TensorMap inputs = blocks;
  std::vector<at::Tensor>& received = received_[k];
  for (const v1::StageTransfer& t : role_.receives()) {
    auto tensor = EmptyLike(program().inputs(), t.value());
    if (!tensor.ok()) return tensor.status();
    if (auto st = pipeline_->Recv(*tensor, t.peer_stage(), Tag(t, k)); !st.ok()) return st;
    if (t.gradient()) tensor->requires_grad_(true);
    inputs[t.value()] = *tensor;
    received.push_back(*tensor);
  }
  auto pass = trainer_->Forward(inputs, k);
  if (!pass.ok()) return pass.status();
  for (const v1::StageTransfer& t : role_.sends()) {
    auto it = pass->env.find(t.value());
    if (it == pass->env.end()) return absl::InternalError(absl::StrCat("stage ", role_.stage(), " did not make '", t.value(), "' to send"));
    auto sent = pipeline_->Send(it->second.detach(), t.peer_stage(), Tag(t, k));
    if (!sent.ok()) return sent.status();
    sends_.push_back(*std::move(sent));
  }
  passes_[k] = *std::move(pass);
  return absl::OkStatus();
}

absl::Status PipelineRank::RunBackward(int64_t k) {
  if (!passes_[k]) return absl::InternalError(absl::StrCat("backward of micro-batch ", k, " before its forward"));
  RankTrainer::Pass& pass = *passes_[k];
  if (role_.stage() + 1 == role_.stages()) {
    auto loss = trainer_->BackwardFromLoss(pass);
    if (!loss.ok()) return loss.status();
    loss_sum_ += trainer_->pass_loss_scale() * *loss;
  } else {
    // The gradients of what this stage sent, summed over the stages that read each value.
    std::map<std::string, at::Tensor> grads;
    for (const v1::StageTransfer& t : role_.sends()) {
      if (!t.gradient()) continue;
      auto g = EmptyLike(program().outputs(), t.value());
      if (!g.ok()) return g.status();
      if (auto st = pipeline_->Recv(*g, t.peer_stage(), Tag(t, k)); !st.ok()) return st;
      auto [it, fresh] = grads.emplace(t.value(), *g);
      if (!fresh) it->second.add_(*g);
    }
    std::vector<std::string> names;
    std::vector<at::Tensor> values;
    for (auto& [name, g] : grads) names.push_back(name), values.push_back(g);
    if (auto st = trainer_->Backward(pass, names, values); !st.ok()) return st;
  }
  // The gradients of what this stage received go back to the stages that sent it.
  for (int j = 0; j < role_.receives_size(); ++j) {
    const v1::StageTransfer& t = role_.receives(j);
    if (!t.gradient()) continue;
    const at::Tensor& in = received_[k][j];
    at::Tensor g = in.grad().defined() ? in.grad() : at::zeros_like(in);
    auto sent = pipeline_->Send(g, t.peer_stage(), Tag(t, k));
    if (!sent.ok()) return sent.status();
    sends_.push_back(*std::move(sent));
  }
  received_[k].clear();
  if (k + 1 < micro_batches_) passes_[k].reset();  // the last pass's values stay for the buffer updates
  return absl::OkStatus();
}

void PipelineRank::Trace(const PassAction& a) const {
  if (trace_path_.empty()) return;
  FILE* f = std::fopen(trace_path_.c_str(), "a");
  if (f == nullptr) return;  // a debugging aid: a path that cannot be written traces nothing
  const CountingCpuAllocator& memory = CountingCpuAllocator::Install();
  std::fprintf(f, "stage %d rank %d: %s%lld done, live %lld peak %lld\n", role_.stage(), program().rank(), a.forward ? "F" : "B",
               static_cast<long long>(a.micro_batch), static_cast<long long>(memory.live_bytes()),
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

absl::Status PipelineRank::SumTiedGradients() {
  // Both stages send their gradient, then receive the other's and add it: the same sum at both.
  // Held alike, block against block; otherwise the whole gradients, each stage keeping its part.
  for (int j = 0; j < role_.tied_size(); ++j) {
    const v1::TiedParameter& t = role_.tied(j);
    at::Tensor mine;
    if (t.same_layout()) {
      at::Tensor* grad = trainer_->UpdateGradient(t.name());
      if (grad == nullptr) return absl::InternalError(absl::StrCat("tied weight '", t.name(), "' has no gradient on stage ", role_.stage()));
      mine = *grad;
    } else {
      auto whole = trainer_->WholeGradient(t.name());
      if (!whole.ok()) return whole.status();
      mine = *std::move(whole);
    }
    auto sent = pipeline_->Send(mine.clone(), t.peer_stage(), kTiedTagBase + j);
    if (!sent.ok()) return sent.status();
    at::Tensor other = at::empty_like(mine);
    if (auto st = pipeline_->Recv(other, t.peer_stage(), kTiedTagBase + j); !st.ok()) return st;
    if (auto st = (*sent)->Wait(); !st.ok()) return st;
    at::NoGradGuard no_grad;
    mine.add_(other);
    if (!t.same_layout()) {
      if (auto st = trainer_->SetWholeGradient(t.name(), mine); !st.ok()) return st;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<StepResult> PipelineRank::Step(const RankTrainer::LocalBatch& batch) {
  if (static_cast<int64_t>(batch.size()) != micro_batches_) {
    return absl::InvalidArgumentError(absl::StrCat("a step of ", micro_batches_, " micro-batches was given ", batch.size()));
  }
  const auto start = std::chrono::steady_clock::now();
  passes_.assign(micro_batches_, std::nullopt);
  received_.assign(micro_batches_, {});
  loss_sum_ = 0;
  for (const PassAction& a : schedule_) {
    auto st = a.forward ? RunForward(a.micro_batch, batch[a.micro_batch]) : RunBackward(a.micro_batch);
    Trace(a);
    if (!st.ok()) {
      return absl::Status(st.code(), absl::StrCat("stage ", role_.stage(), ", ", a.forward ? "forward" : "backward", " of micro-batch ",
                                                  a.micro_batch, ": ", st.message()));
    }
  }
  if (auto st = WaitForSends(); !st.ok()) return st;
  if (auto st = trainer_->ReduceGradients(); !st.ok()) return st;
  if (auto st = SumTiedGradients(); !st.ok()) return st;
  if (auto st = trainer_->ApplyGradients({pipeline_}, *passes_.back()); !st.ok()) return st;
  passes_.clear();
  // The loss is the last stage's: summed over the pipeline group, every stage reports it.
  at::Tensor loss = at::full({}, role_.stage() + 1 == role_.stages() ? loss_sum_ : 0.0, at::kDouble);
  if (auto st = pipeline_->AllReduceSum(loss); !st.ok()) return st;
  StepResult r;
  r.step = trainer_->steps();
  r.loss = loss.item<double>();
  r.lr = trainer_->LearningRate();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace mapd

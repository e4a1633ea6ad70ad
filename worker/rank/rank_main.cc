#include "worker/rank/rank_main.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/checkpoint/checkpoint_commit.h"
#include "common/checkpoint/gather.h"
#include "common/bytes.h"
#include "common/escaped_exception.h"
#include "common/file_io.h"
#include "common/store_secret.h"
#include "model/ir/serialize.h"
#include "worker/transport/gloo_communicator.h"
#include "worker/transport/store_gate.h"
#include "worker/rank/pipeline_rank.h"
#include "worker/rank/rank_trainer.h"
#include "worker/transport/timed_communicator.h"
#include "worker/launch/rank_command.h"
#include "worker/launch/rank_events.h"
#include "worker/local/trainer_factory.h"
#include "worker/memory/counting_allocator.h"

namespace mapd {

namespace {

// MAPD_FAULT=crash:RANK:STEP | hang:RANK:STEP
void MaybeFault(int rank, int64_t step) {
  const char* fault = std::getenv("MAPD_FAULT");
  if (fault == nullptr) return;
  std::vector<std::string> parts = absl::StrSplit(fault, ':');
  if (parts.size() != 3 || std::atoi(parts[1].c_str()) != rank || std::atoll(parts[2].c_str()) != step) return;
  std::fprintf(stderr, "rank %d: injected fault %s at step %lld\n", rank, parts[0].c_str(), static_cast<long long>(step));
  std::fflush(stderr);
  if (parts[0] == "crash") std::abort();
  if (parts[0] == "hang") {
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
  }
}

// The launcher reads events from this process's stdout; anything else written there (a library's
// print) would corrupt them, so fd 1 becomes a copy of stderr and events go to a private copy
// of the original stdout.
class EventChannel {
 public:
  EventChannel() : fd_(dup(1)) { dup2(2, 1); }
  ~EventChannel() {
    if (fd_ >= 0) close(fd_);
  }
  absl::Status Emit(int rank, const std::function<void(v1::RankEvent&)>& fill) {
    v1::RankEvent e;
    e.set_rank(rank);
    fill(e);
    return WriteRankEvent(fd_, e);
  }

 private:
  int fd_;
};

absl::StatusOr<LocalTrainingOptions> TrainingOptionsOf(const v1::RankJob& job) {
  LocalTrainingOptions t;
  t.training = WithTrainingDefaults(job.training());
  t.device = job.device();
  t.memory_cap = job.memory_cap();
  if (auto st = t.Validate(); !st.ok()) return st;
  return t;
}

// What a rank holds open for the job's rendezvous: rank 0 its store (on loopback) and the gate
// in front of it; a peer its tunnel to that gate. Declared so the gate goes before the store.
struct RendezvousHold {
  std::unique_ptr<StoreServer> store;
  std::unique_ptr<StoreGate> gate;
  std::unique_ptr<StoreTunnel> tunnel;
};

// Joins the job's rendezvous (store_gate.h): rank 0 hosts the store on loopback, a gate for it on
// the job's address, and reports the gate's port; a peer reaches the store through a tunnel that
// presents the job's secret. Either way this rank's own TCPStore client connects on loopback.
absl::StatusOr<RendezvousOptions> JoinRendezvous(const RankProcessOptions& o, const v1::RankJob& job, EventChannel& events,
                                                 RendezvousHold* hold) {
  RendezvousOptions ro;
  ro.local_host = job.local_host().empty() ? "127.0.0.1" : job.local_host();
  ro.timeout = std::chrono::milliseconds(1000LL * std::max(1, job.timeout_seconds()));
  if (job.device() == "cuda") ro.cuda_device = o.cuda_device >= 0 ? o.cuda_device : o.rank;  // NCCL, one GPU per rank
  if (auto st = ApplySharedMemoryEnvironment(ro); !st.ok()) return st;
  if (auto st = CheckStoreSecret(o.store_secret); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(kStoreSecretEnv, ": ", st.message(),
                                                   " (mapd-worker and `mapctl run` give each rank its job's secret)"));
  }
  ro.host = "127.0.0.1";
  if (o.store.empty()) {
    if (o.rank != 0) return absl::InvalidArgumentError(absl::StrCat("rank ", o.rank, " was given no --store; only rank 0 hosts it"));
    auto store = StoreServer::Start(ro.host, 0);
    if (!store.ok()) return store.status();
    ro.port = (*store)->port();
    hold->store = *std::move(store);
    auto gate = StoreGate::Start(ro.local_host, ro.port, o.store_secret);
    if (!gate.ok()) return gate.status();
    hold->gate = *std::move(gate);
    const int gate_port = hold->gate->port();
    if (auto st = events.Emit(o.rank, [&](v1::RankEvent& e) { e.mutable_store_ready()->set_port(gate_port); }); !st.ok()) return st;
    return ro;
  }
  const size_t colon = o.store.rfind(':');
  int gate_port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(o.store.substr(colon + 1), &gate_port)) {
    return absl::InvalidArgumentError(absl::StrCat("--store '", o.store, "' is not host:port"));
  }
  auto tunnel = StoreTunnel::Start(o.store.substr(0, colon), gate_port, o.store_secret);
  if (!tunnel.ok()) return tunnel.status();
  hold->tunnel = *std::move(tunnel);
  ro.port = hold->tunnel->port();
  return ro;
}

// What a rank's training loop uses besides its trainer.
struct RankContext {
  const RankProcessOptions& options;
  const v1::RankJob& job;
  const LocalTrainingOptions& run;     // its training config, device and cap
  const v1::TrainingConfig& training;  // run.training
  const Graph& graph;                  // the whole training graph (its batches)
  EventChannel& events;
  CountingCpuAllocator& memory;
  CollectiveStats& collectives;
  const RendezvousOptions& rendezvous;
  int world = 1;
};

// The mean global loss over the evaluation batches (every rank draws the same and keeps its
// blocks, as for training's).
template <typename RankT>
absl::StatusOr<double> EvaluateRank(RankT& trainer, RankContext& c) {
  return MeanEvaluationLoss(c.graph.proto(), c.run, c10::Device(c10::kCPU), [&trainer](TensorMap batch) -> absl::StatusOr<double> {
    auto blocks = trainer.TakeBlocks(batch);
    batch.clear();  // the global batch goes before the evaluation, as before a step
    if (!blocks.ok()) return blocks.status();
    return trainer.Evaluate(*blocks);
  });
}

// The steps, checkpoints and final blocks of a rank: a RankTrainer, or a PipelineRank (the same
// calls).
template <typename RankT>
absl::Status TrainRank(RankT& trainer, RankContext& c) {
  const RankProcessOptions& o = c.options;
  // Every rank draws the same global batches (the single-device run's) and keeps its block.
  auto source = MakeSource(c.graph.proto(), c.run, c10::Device(c10::kCPU));
  if (!source.ok()) return source.status();
  int64_t first = 1;
  const int64_t resume_step = c.job.resume_step();
  const std::string& checkpoint_dir = c.job.checkpoint_dir();
  if (resume_step > 0 && c.job.resume_resharded()) {
    // Written under another plan: the whole tensors, of which this rank takes its blocks.
    auto gathered = GatherCheckpoint({checkpoint_dir}, resume_step);
    if (!gathered.ok()) return gathered.status();
    if (auto st = trainer.RestoreWhole(gathered->whole); !st.ok()) return st;
    std::fprintf(stderr, "[rank %d] resumed from step %lld, resharded from %d rank(s) (%s)\n", o.rank, static_cast<long long>(resume_step),
                 gathered->meta.ranks(), gathered->meta.plan().c_str());
  } else if (resume_step > 0) {
    auto bytes = ReadFileToString(absl::StrCat(CheckpointStepDir(checkpoint_dir, resume_step), "/rank_", o.rank, ".pb"));
    if (!bytes.ok()) return bytes.status();
    v1::RankCheckpoint checkpoint;
    if (!checkpoint.ParseFromString(*bytes)) return absl::DataLossError(absl::StrCat("rank ", o.rank, "'s checkpoint does not parse"));
    if (auto st = trainer.Restore(checkpoint); !st.ok()) return st;
  }
  if (resume_step > 0) {
    for (int64_t s = 0; s < resume_step; ++s) {  // the batches already trained on
      if (auto b = (*source)->Next(); !b.ok()) return b.status();
    }
    first = resume_step + 1;
  }
  int64_t peak = 0;
  // The rank's own log (stderr; its worker keeps it and the coordinator serves it: `mapctl logs
  // ID --rank R`), a line a step as a training script prints.
  std::fprintf(stderr, "[rank %d] of %d ranks: steps %lld to %lld\n", o.rank, c.world, static_cast<long long>(first),
               static_cast<long long>(c.training.steps()));
  for (int64_t s = first; s <= c.training.steps(); ++s) {
    // Progress before the step too: a rank that never begins a step the others began is the
    // one they are waiting for.
    MaybeFault(o.rank, s);
    if (auto st = c.events.Emit(o.rank, [&](v1::RankEvent& e) { e.mutable_step_begun()->set_step(s); }); !st.ok()) return st;
    absl::StatusOr<typename RankT::LocalBatch> blocks = absl::UnknownError("no batch");
    {
      // The global batch, released once this rank's blocks are taken (the step holds these).
      auto batch = (*source)->Next();
      if (!batch.ok()) return batch.status();
      blocks = trainer.TakeBlocks(*batch);
      if (!blocks.ok()) return blocks.status();
    }
    c.memory.ResetPeak();
    c.collectives.clear();
    auto r = trainer.Step(*blocks);
    if (!r.ok()) return r.status();
    peak = std::max(peak, c.memory.peak_bytes());
    auto done = c.events.Emit(o.rank, [&](v1::RankEvent& e) {
      v1::StepDone* d = e.mutable_step_done();
      d->set_step(s);
      d->set_loss(r->loss);
      d->set_seconds(r->seconds);
      d->set_lr(r->lr);
      d->set_peak_bytes(c.memory.peak_bytes());
      d->set_live_bytes(c.memory.live_bytes());
      for (const auto& [kind, use] : c.collectives) {
        v1::CollectiveUse& u = (*d->mutable_collectives())[kind];
        u.set_seconds(use.seconds);
        u.set_bytes(use.bytes);
        u.set_calls(use.calls);
      }
    });
    if (!done.ok()) return done;
    std::fprintf(stderr, "[rank %d] step %lld/%lld loss %.4f lr %.3g %.3f s peak %s\n", o.rank, static_cast<long long>(s),
                 static_cast<long long>(c.training.steps()), r->loss, r->lr, r->seconds, FormatBytes(c.memory.peak_bytes()).c_str());
    if (EvaluatesAfter(c.training, s)) {
      c.memory.ResetPeak();
      auto loss = EvaluateRank(trainer, c);
      if (!loss.ok()) return loss.status();
      auto evaluated = c.events.Emit(o.rank, [&](v1::RankEvent& e) {
        v1::Evaluated* v = e.mutable_evaluated();
        v->set_step(s);
        v->set_loss(*loss);
        v->set_batches(c.training.eval_batches());
        v->set_peak_bytes(c.memory.peak_bytes());
      });
      if (!evaluated.ok()) return evaluated;
      std::fprintf(stderr, "[rank %d] eval after step %lld: loss %.4f (%lld batches)\n", o.rank, static_cast<long long>(s), *loss,
                   static_cast<long long>(c.training.eval_batches()));
    }
    if (!checkpoint_dir.empty() && CheckpointsAfter(c.training, s)) {
      auto checkpoint = trainer.Save();
      if (!checkpoint.ok()) return checkpoint.status();
      checkpoint->set_step(s);
      const std::string tmp = CheckpointStagingDir(checkpoint_dir, s, c.job.attempt());
      std::error_code ec;
      std::filesystem::create_directories(tmp, ec);
      if (ec) return absl::InternalError(absl::StrCat("cannot make ", tmp, ": ", ec.message()));
      if (auto st = WriteStringToFileAtomic(absl::StrCat(tmp, "/rank_", o.rank, ".pb"), checkpoint->SerializeAsString()); !st.ok()) return st;
      if (auto st = c.events.Emit(o.rank, [&](v1::RankEvent& e) { e.mutable_checkpoint_written()->set_step(s); }); !st.ok()) return st;
      std::fprintf(stderr, "[rank %d] checkpoint step %lld written\n", o.rank, static_cast<long long>(s));
    }
  }
  if (c.job.write_final_parameters()) {
    auto checkpoint = trainer.Save();
    if (!checkpoint.ok()) return checkpoint.status();
    if (auto st = WriteStringToFileAtomic(FinalParametersPath(o.run_dir, o.rank), checkpoint->SerializeAsString()); !st.ok()) return st;
  }
  if (auto st = FinishRendezvous(c.rendezvous, o.rank, c.world); !st.ok()) return st;
  return c.events.Emit(o.rank, [&](v1::RankEvent& e) { e.mutable_done()->set_peak_bytes(peak); });
}

// The rank's job under its memory cap, from its graph to its last step.
absl::Status RunCappedRankJob(const RankProcessOptions& o, const v1::RankJob& job, const LocalTrainingOptions& training,
                              EventChannel& events, CountingCpuAllocator& memory) {
  auto graph_proto = ReadGraphFile(GraphPath(o.run_dir));
  if (!graph_proto.ok()) return graph_proto.status();
  auto graph = Graph::Create(*std::move(graph_proto));
  if (!graph.ok()) return graph.status();
  auto program = ReadRankProgram(o.run_dir, o.rank);
  if (!program.ok()) return program.status();
  // A pipeline stage's rank joins the world mesh [stages] + its stage's mesh (pipeline_rank.h).
  const bool pipeline = program->pipeline().stages() > 1;
  if (pipeline && PipelineGlobalRank(*program) != o.rank) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", o.rank, " was given stage ", program->pipeline().stage(), "'s rank ",
                                                   program->rank(), "'s program (global rank ", PipelineGlobalRank(*program), ")"));
  }

  RendezvousHold hold;
  auto ro = JoinRendezvous(o, job, events, &hold);
  if (!ro.ok()) return ro.status();
  const std::vector<int64_t> mesh = pipeline ? PipelineWorldMesh(*program) : std::vector<int64_t>(program->mesh().begin(), program->mesh().end());
  auto groups = ConnectMeshGroups(*ro, mesh, o.rank);
  if (!groups.ok()) return groups.status();
  // Each step reports its time and bytes in collectives, by kind.
  CollectiveStats collectives;
  std::vector<Communicator*> raw;
  for (auto& g : *groups) {
    g = TimeCollectives(std::move(g), &collectives);
    raw.push_back(g.get());
  }
  int64_t world = 1;
  for (int64_t d : mesh) world *= d;
  RankContext context{o, job, training, training.training, *graph, events, memory, collectives, *ro, static_cast<int>(world)};

  RankTrainerOptions to;
  to.seed = training.training.seed();
  to.optimizer = MakeOptimizerOptions(training.training);
  if (job.gradient_bucket_bytes() != 0) to.bucket_bytes = std::max<int64_t>(job.gradient_bucket_bytes(), 0);
  auto named = [&](const absl::Status& st) { return absl::Status(st.code(), absl::StrCat("rank ", o.rank, ": ", st.message())); };
  if (pipeline) {
    auto rank = PipelineRank::Create(*graph, *program, raw, to);
    if (!rank.ok()) return named(rank.status());
    return TrainRank(**rank, context);
  }
  auto trainer = RankTrainer::Create(*graph, *program, raw, to);
  if (!trainer.ok()) return named(trainer.status());
  return TrainRank(**trainer, context);
}

}  // namespace

absl::Status RunRankJob(const RankProcessOptions& o) {
  EventChannel events;
  auto job = ReadRankJob(o.run_dir);
  if (!job.ok()) return job.status();
  auto training = TrainingOptionsOf(*job);
  if (!training.ok()) return training.status();
  CountingCpuAllocator& memory = CountingCpuAllocator::Install();
  memory.SetLimit(job->memory_cap());
  const int64_t refused_before = memory.refused();
  absl::Status st;
  try {
    st = RunCappedRankJob(o, *job, *training, events, memory);
  } catch (const std::exception& e) {  // meant to be a status (a stray LibTorch exception): one line, never an abort
    st = EscapedExceptionStatus(e);
  }
  // A failure the memory cap caused is also reported as an event, with the figures, for the
  // launcher's message (what to give instead).
  if (!st.ok() && memory.refused() > refused_before) {
    const CountingCpuAllocator::Refusal r = memory.last_refusal();
    (void)events.Emit(o.rank, [&](v1::RankEvent& e) {
      v1::OutOfMemory* m = e.mutable_out_of_memory();
      m->set_attempted_bytes(r.bytes);
      m->set_live_bytes(r.live);
      m->set_cap_bytes(r.cap);
    });
  }
  return st;
}

}  // namespace mapd

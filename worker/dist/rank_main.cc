#include "worker/dist/rank_main.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cstdio>
#include <filesystem>
#include <cstdlib>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "planner/ir/serialize.h"
#include "worker/dist/gloo_communicator.h"
#include "worker/dist/rank_trainer.h"
#include "worker/dist/timed_communicator.h"
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

}  // namespace

std::string FinalParametersPath(const std::string& run_dir, int rank) {
  return absl::StrCat(run_dir, "/final_rank_", rank, ".pb");
}

absl::Status RunRankJob(const RankJobOptions& o) {
  if (auto st = o.training.Validate(); !st.ok()) return st;
  CountingCpuAllocator& memory = CountingCpuAllocator::Install();
  memory.SetLimit(o.memory_cap);
  auto graph_proto = ReadGraphFile(absl::StrCat(o.run_dir, "/graph.pb"));
  if (!graph_proto.ok()) return graph_proto.status();
  auto graph = Graph::Create(*std::move(graph_proto));
  if (!graph.ok()) return graph.status();
  auto bytes = ReadFileToString(absl::StrCat(o.run_dir, "/rank_", o.rank, ".pb"));
  if (!bytes.ok()) return bytes.status();
  v1::RankProgram program;
  if (!program.ParseFromString(*bytes)) return absl::DataLossError(absl::StrCat("rank_", o.rank, ".pb is not a rank program"));

  RendezvousOptions ro;
  ro.host = o.host;
  ro.port = o.port;
  ro.timeout = std::chrono::milliseconds(1000LL * o.timeout_seconds);
  if (o.training.device == "cuda") ro.cuda_device = o.cuda_device >= 0 ? o.cuda_device : o.rank;  // NCCL, one GPU per rank
  const std::vector<int64_t> mesh(program.mesh().begin(), program.mesh().end());
  auto groups = ConnectMeshGroups(ro, mesh, o.rank);
  if (!groups.ok()) return groups.status();
  // Each step reports its time and bytes in collectives, by kind.
  CollectiveStats collectives;
  std::vector<Communicator*> raw;
  for (auto& g : *groups) {
    g = TimeCollectives(std::move(g), &collectives);
    raw.push_back(g.get());
  }

  RankTrainerOptions to;
  to.seed = o.training.seed;
  to.optimizer = MakeOptimizerOptions(o.training);
  auto trainer = RankTrainer::Create(*graph, program, raw, to);
  if (!trainer.ok()) return absl::Status(trainer.status().code(), absl::StrCat("rank ", o.rank, ": ", trainer.status().message()));
  // Every rank draws the same global batches (the single-device run's) and keeps its block.
  auto source = MakeSource(graph->proto(), o.training, c10::Device(c10::kCPU));
  if (!source.ok()) return source.status();
  int64_t first = 1;
  if (o.resume_step > 0) {
    auto bytes = ReadFileToString(absl::StrCat(CheckpointStepDir(o.checkpoint_dir, o.resume_step), "/rank_", o.rank, ".pb"));
    if (!bytes.ok()) return bytes.status();
    v1::RankCheckpoint c;
    if (!c.ParseFromString(*bytes)) return absl::DataLossError(absl::StrCat("rank ", o.rank, "'s checkpoint does not parse"));
    if (auto st = (*trainer)->Restore(c); !st.ok()) return st;
    for (int64_t s = 0; s < o.resume_step; ++s) {  // the batches already trained on
      if (auto b = (*source)->Next(); !b.ok()) return b.status();
    }
    first = o.resume_step + 1;
  }
  int64_t peak = 0;
  for (int64_t s = first; s <= o.training.steps; ++s) {
    // Progress before the step too: a rank that never begins a step the others began is the
    // one they are waiting for.
    MaybeFault(o.rank, s);
    std::printf("{\"rank\": %d, \"begin\": %lld}\n", o.rank, static_cast<long long>(s));
    std::fflush(stdout);
    absl::StatusOr<RankTrainer::LocalBatch> blocks = absl::UnknownError("no batch");
    {
      // The global batch, released once this rank's blocks are taken (the step holds these).
      auto batch = (*source)->Next();
      if (!batch.ok()) return batch.status();
      blocks = (*trainer)->TakeBlocks(*batch);
      if (!blocks.ok()) return blocks.status();
    }
    memory.ResetPeak();
    collectives.clear();
    auto r = (*trainer)->Step(*blocks);
    if (!r.ok()) return r.status();
    peak = std::max(peak, memory.peak_bytes());
    std::string by_kind;
    for (const auto& [kind, c] : collectives) {
      absl::StrAppend(&by_kind, by_kind.empty() ? "" : ", ", "\"", kind, "\": {\"seconds\": ", absl::StrFormat("%.6f", c.seconds),
                      ", \"bytes\": ", absl::StrFormat("%.0f", c.bytes), "}");
    }
    std::printf("{\"rank\": %d, \"step\": %lld, \"loss\": %.17g, \"seconds\": %.6f, \"peak_bytes\": %lld, \"live_bytes\": %lld, "
                "\"collectives\": {%s}}\n",
                o.rank, static_cast<long long>(s), r->loss, r->seconds, static_cast<long long>(memory.peak_bytes()),
                static_cast<long long>(memory.live_bytes()), by_kind.c_str());
    std::fflush(stdout);
    if (o.checkpoint_every > 0 && !o.checkpoint_dir.empty() && (s % o.checkpoint_every == 0 || s == o.training.steps)) {
      auto c = (*trainer)->Save();
      if (!c.ok()) return c.status();
      c->set_step(s);
      const std::string tmp = CheckpointStepDir(o.checkpoint_dir, s) + ".tmp";
      std::error_code ec;
      std::filesystem::create_directories(tmp, ec);
      if (ec) return absl::InternalError(absl::StrCat("cannot make ", tmp, ": ", ec.message()));
      if (auto st = WriteStringToFileAtomic(absl::StrCat(tmp, "/rank_", o.rank, ".pb"), c->SerializeAsString()); !st.ok()) return st;
      std::printf("{\"rank\": %d, \"checkpoint\": %lld}\n", o.rank, static_cast<long long>(s));
      std::fflush(stdout);
    }
  }
  if (o.write_final_parameters) {
    auto c = (*trainer)->Save();
    if (!c.ok()) return c.status();
    if (auto st = WriteStringToFileAtomic(FinalParametersPath(o.run_dir, o.rank), c->SerializeAsString()); !st.ok()) return st;
  }
  std::printf("{\"rank\": %d, \"done\": true, \"peak_bytes\": %lld}\n", o.rank, static_cast<long long>(peak));
  std::fflush(stdout);
  return absl::OkStatus();
}

}  // namespace mapd

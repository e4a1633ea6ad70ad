// libFuzzer harness: a submitted job's spec through admission up to the planner's search —
// validation, defaults, the job's graph (a zoo model built from its spec string, or the
// submitted graph verified) and the planning request (device type, mesh, budget, ZeRO,
// recompute, micro-batches, stages). The search itself is left out: it takes seconds, and its
// input is what this harness checks is well formed. No input may crash or trip a sanitizer.
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_seeds.h"
#include "proto/mapd/v1/jobs.pb.h"
#include "server/jobs/job_graph.h"
#include "server/jobs/job_spec.h"

namespace {

std::vector<std::string> JobSpecSeeds() {
  std::vector<std::string> seeds;
  mapd::v1::JobSpec zoo;
  zoo.set_name("fuzz");
  zoo.set_model("gpt2:layers=1,hidden=32,heads=2,vocab=64,seq=8,batch=4");
  zoo.mutable_training()->set_steps(10);
  zoo.set_ranks(4);
  zoo.mutable_training()->set_optimizer("adamw");
  zoo.mutable_training()->set_lr(1e-3);
  zoo.mutable_training()->set_data("text:corpus.txt");
  zoo.mutable_training()->set_checkpoint_every(5);
  seeds.push_back(zoo.SerializeAsString());

  mapd::v1::JobSpec pinned = zoo;
  pinned.add_mesh(2);
  pinned.add_mesh(2);
  pinned.set_zero("2");
  pinned.set_recompute("all");
  pinned.mutable_training()->set_micro_batches("auto");
  pinned.mutable_training()->set_precision("bf16");
  pinned.set_device_type("h100-80g");
  pinned.set_memory_per_device(int64_t{1} << 30);
  seeds.push_back(pinned.SerializeAsString());

  mapd::v1::JobSpec staged = zoo;
  staged.set_model("llama2-7b:layers=2,hidden=32,heads=4,kv_heads=2,ffn=64,vocab=64,seq=8,batch=4");
  staged.set_pipeline_stages("2");
  staged.mutable_training()->set_micro_batches("2");
  staged.mutable_training()->set_data("tokens:train.bin");
  seeds.push_back(staged.SerializeAsString());

  for (const std::string& graph : mapd::fuzz::SmallZooGraphs()) {
    mapd::v1::JobSpec submitted;
    submitted.mutable_training()->set_steps(3);
    submitted.set_ranks(2);
    submitted.mutable_graph()->ParseFromString(graph);
    seeds.push_back(submitted.SerializeAsString());
  }
  return seeds;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  mapd::fuzz::WriteSeedsIfAsked(JobSpecSeeds);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mapd::v1::JobSpec spec;
  if (!spec.ParseFromArray(data, static_cast<int>(size))) return 0;
  if (!mapd::ValidateJobSpec(spec).ok()) return 0;
  spec = mapd::WithDefaults(std::move(spec));
  if (!mapd::ValidateJobSpec(spec).ok()) return 0;
  auto graph = mapd::BuildJobGraph(spec);
  auto request = mapd::JobPlanRequest(spec);
  (void)graph;
  (void)request;
  return 0;
}

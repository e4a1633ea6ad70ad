// Planner benchmark (docs/planner.md).
//
//   plan_bench            solve time of the whole search (every 1-D/2-D mesh shape, ZeRO
//                         stages, one ILP per shape, plus the baselines) for llama2-70b,
//                         llama3-70b and gpt3-175b on 64 and 512 H100s, as a ratio to the 5 s
//                         target; then the grid below.
//   plan_bench --grid     only the grid: gpt2-xl, llama2-7b, llama2-70b × 8 and 64 devices ×
//                         40 and 80 GiB × a small and a large global batch (sequence 1024); per cell MAP's
//                         predicted step time against the best baseline that fits (ratio > 1:
//                         MAP faster), as the markdown table in docs/planner.md.
//   plan_bench --solve    only the solve times.
//   plan_bench --production  the foundation-model workloads at production batches (bf16, 80 GiB
//                         H100s, micro-batches chosen): search time against 5 s, MAP against the
//                         best fitting baseline — the table in docs/planner.md.
//   plan_bench --scale [--write FILE] [--against FILE]
//                         the whole grid (ScaleGrid): 24 workloads, 1B-1T parameters, 8-4096
//                         devices, bf16, production batches, the defaults of `mapctl plan`; wall
//                         time and peak memory of each search against the 5 s / 1 GB bars and
//                         the 2 s median; --write saves the predicted steps, --against compares.
//   plan_bench --pipelines  the pipeline workloads (gpt3-175b on 1024 A100s, llama2-70b on 512
//                         and llama3-70b on 1024 H100s, bf16, 80 GiB): search time against 5 s,
//                         MAP against the fastest fitting Megatron TP × PP × DP or TP × DP plan.
//   plan_bench --sweep    the budget sweep of docs/planner.md: llama2-7b (8 × 4096 tokens) and
//                         gpt2-xl (32 × 1024) on 8 H100s as memory per device shrinks from 80
//                         to 12 GiB — MAP's plan (mesh, ZeRO stage, recomputed layers), its step
//                         and peak, beside every baseline's.
//   plan_bench --targets  llama2-7b on 8 × 40 GiB and llama2-70b on 64 × 80 GiB (4096-token
//                         sequences, a batch that splits over every data-parallel degree): MAP's
//                         plan must fit and be no slower than any baseline that fits.
//
// Exits 1 if MAP's plan is slower than a baseline that fits anywhere in the grid. (Within the
// search's accepted gap a fitting baseline can be the faster plan; MAP then takes it, and the
// row says "a baseline's: within the gap".)
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "common/allocator.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/bytes.h"
#include "model/graph/loss.h"
#include "model/graph/verifier.h"
#include "planner/plan/planner.h"
#include "planner/profile/profiler.h"
#include "model/zoo/zoo.h"

namespace {

absl::StatusOr<mapd::Graph> TrainingGraph(const std::string& spec) {
  auto proto = mapd::BuildZooModel(spec);
  if (!proto.ok()) return proto.status();
  auto trainable = mapd::WithTrainingLoss(*std::move(proto), mapd::LossKind::kAuto);
  if (!trainable.ok()) return trainable.status();
  return mapd::MakeVerifiedGraph(*std::move(trainable));
}

mapd::PlannerOptions Options(int64_t devices, int64_t memory_gib) {
  mapd::PlannerOptions o;
  o.micro_batches = 0;  // the search chooses
  o.cluster.devices = devices;
  o.cluster.device_type = "h100-80g";
  o.cluster.memory_per_device = memory_gib << 30;
  return o;
}

int SolveTimes() {
  std::printf("%-12s %8s %10s %8s %6s %10s %12s %10s\n", "model", "devices", "search_s", "ratio_5s", "mesh", "zero",
              "step_ms", "status");
  int failures = 0;
  for (const char* model : {"llama2-70b", "llama3-70b", "gpt3-175b"}) {
    auto graph = TrainingGraph(model);
    if (!graph.ok()) {
      std::printf("%s: %s\n", model, std::string(graph.status().message()).c_str());
      ++failures;
      continue;
    }
    for (int64_t devices : {64, 512}) {
      auto r = mapd::SearchPlan(*graph, Options(devices, 80));
      if (!r.ok()) {
        std::printf("%s on %lld: %s\n", model, static_cast<long long>(devices), std::string(r.status().message()).c_str());
        ++failures;
        continue;
      }
      std::printf("%-12s %8lld %10.2f %8.3f %6s %10d %12.1f %10s\n", model, static_cast<long long>(devices),
                  r->search_seconds, r->search_seconds / 5.0, absl::StrJoin(r->plan.mesh, "x").c_str(), r->plan.zero_stage,
                  r->plan.cost.step_seconds * 1e3, r->fits ? "fits" : "no fit");
    }
  }
  return failures;
}

int Grid() {
  // Sequence length 1024 for all three: without activation checkpointing (the memory-aware
  // search issue) llama's 4096 tokens leave little of the grid that any plan fits.
  struct Model {
    const char* name;
    int64_t seq, small_batch, large_batch;
  };
  const Model models[] = {{"gpt2-xl", 1024, 16, 256}, {"llama2-7b", 1024, 8, 64}, {"llama2-70b", 1024, 8, 64}};
  std::printf("| model | devices | memory | batch × seq | MAP plan | MAP step | best fitting baseline | baseline step | baseline / MAP |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  int violations = 0, cells = 0, no_baseline = 0;
  for (const Model& m : models) {
    for (int64_t devices : {8, 64}) {
      for (int64_t gib : {40, 80}) {
        for (int64_t batch : {m.small_batch, m.large_batch}) {
          auto graph = TrainingGraph(absl::StrFormat("%s:batch=%d,seq=%d", m.name, batch, m.seq));
          if (!graph.ok()) return 1;
          auto r = mapd::SearchPlan(*graph, Options(devices, gib));
          if (!r.ok()) {
            std::printf("| %s | %lld | %lld GiB | %lld × %lld | error: %s |\n", m.name, static_cast<long long>(devices),
                        static_cast<long long>(gib), static_cast<long long>(batch), static_cast<long long>(m.seq),
                        std::string(r.status().message()).c_str());
            ++violations;
            continue;
          }
          ++cells;
          const mapd::PlanCandidate* best = nullptr;
          for (const auto& b : r->baselines) {
            if (b.applicable && b.fits && (best == nullptr || b.cost.step_seconds < best->cost.step_seconds)) best = &b;
          }
          std::string map_plan, map_step;
          if (r->fits) {
            map_plan = absl::StrFormat("mesh %s, ZeRO %d%s", absl::StrJoin(r->plan.mesh, "x"), r->plan.zero_stage,
                                       r->adopted_note.empty() ? "" : " (a baseline's: within the gap)");
            map_step = absl::StrFormat("%.1f ms", r->plan.cost.step_seconds * 1e3);
          } else {
            map_plan = absl::StrFormat("no plan fits: needs %s per device",
                                       mapd::FormatBytes(static_cast<int64_t>(r->min_memory_bytes)));
            map_step = "-";
          }
          std::string base = "none fits", base_step = "-", ratio = "-";
          if (best != nullptr) {
            base = absl::StrFormat("%s (%s)", best->name, mapd::FormatBytes(static_cast<int64_t>(best->cost.peak_bytes())));
            base_step = absl::StrFormat("%.1f ms", best->cost.step_seconds * 1e3);
            if (r->fits) {
              const double q = best->cost.step_seconds / r->plan.cost.step_seconds;
              ratio = absl::StrFormat("%.2f", q);
              if (q < 1 - 1e-9) ++violations;
            } else {
              ++violations;  // a baseline fits where MAP found nothing
            }
          } else {
            ++no_baseline;
          }
          std::printf("| %s | %lld | %lld GiB | %lld × %lld | %s | %s | %s | %s | %s |\n", m.name,
                      static_cast<long long>(devices), static_cast<long long>(gib), static_cast<long long>(batch),
                      static_cast<long long>(m.seq), map_plan.c_str(), map_step.c_str(),
                      base.c_str(), base_step.c_str(), ratio.c_str());
          std::fflush(stdout);
        }
      }
    }
  }
  std::printf("\n%d cells; %d where no baseline fits; %d where MAP is slower than a fitting baseline\n", cells, no_baseline,
              violations);
  return violations;
}

std::string Describe(const mapd::PlanCandidate& c) {
  std::string s = absl::StrFormat("mesh %s, ZeRO %d", absl::StrJoin(c.mesh, "x"), c.zero_stage);
  if (!c.recomputed_layers.empty()) absl::StrAppend(&s, absl::StrFormat(", %d layers recomputed", c.recomputed_layers.size()));
  return s;
}

const mapd::PlanCandidate* BestFittingBaseline(const mapd::PlanResult& r) {
  const mapd::PlanCandidate* best = nullptr;
  for (const auto& b : r.baselines) {
    if (b.applicable && b.fits && (best == nullptr || b.cost.step_seconds < best->cost.step_seconds)) best = &b;
  }
  return best;
}

int Sweep() {
  int violations = 0;
  for (const char* spec : {"llama2-7b:batch=8,seq=4096", "gpt2-xl:batch=32,seq=1024"}) {
    auto graph = TrainingGraph(spec);
    if (!graph.ok()) return 1;
    std::printf("\n%s on 8 h100-80g\n\n", spec);
    std::printf("| memory per device | MAP plan | MAP step | MAP peak | best fitting baseline | baseline step | baseline / MAP | search |\n");
    std::printf("|---|---|---|---|---|---|---|---|\n");
    for (int64_t gib : {80, 64, 48, 40, 32, 24, 16, 12}) {
      auto r = mapd::SearchPlan(*graph, Options(8, gib));
      if (!r.ok()) {
        std::printf("| %lld GiB | error: %s |\n", static_cast<long long>(gib), std::string(r.status().message()).c_str());
        ++violations;
        continue;
      }
      const mapd::PlanCandidate* base = BestFittingBaseline(*r);
      std::string map_plan = "no plan fits", map_step = "-", map_peak = "-", ratio = "-";
      if (r->fits) {
        map_plan = Describe(r->plan) + (r->adopted_note.empty() ? "" : " (a baseline's: within the gap)");
        map_step = absl::StrFormat("%.0f ms", r->plan.cost.step_seconds * 1e3);
        map_peak = mapd::FormatBytes(static_cast<int64_t>(r->plan.cost.peak_bytes()));
      } else {
        map_plan = absl::StrFormat("no plan fits (needs %s)", mapd::FormatBytes(static_cast<int64_t>(r->min_memory_bytes)));
      }
      std::string base_name = "none fits", base_step = "-";
      if (base != nullptr) {
        base_name = base->name;
        base_step = absl::StrFormat("%.0f ms", base->cost.step_seconds * 1e3);
        if (r->fits) {
          ratio = absl::StrFormat("%.2f", base->cost.step_seconds / r->plan.cost.step_seconds);
          if (base->cost.step_seconds < r->plan.cost.step_seconds * (1 - 1e-9)) ++violations;
        } else {
          ++violations;
        }
      }
      std::printf("| %lld GiB | %s | %s | %s | %s | %s | %s | %.1f s |\n", static_cast<long long>(gib), map_plan.c_str(),
                  map_step.c_str(), map_peak.c_str(), base_name.c_str(), base_step.c_str(), ratio.c_str(), r->search_seconds);
      std::fflush(stdout);
    }
  }
  return violations;
}

int Targets() {
  struct Target {
    const char* spec;
    int64_t devices, gib;
  };
  int failures = 0;
  for (const Target& t : {Target{"llama2-7b:batch=8,seq=4096", 8, 40}, Target{"llama2-70b:batch=64,seq=4096", 64, 80}}) {
    auto graph = TrainingGraph(t.spec);
    if (!graph.ok()) return 1;
    auto r = mapd::SearchPlan(*graph, Options(t.devices, t.gib));
    if (!r.ok()) {
      std::printf("%s: %s\n", t.spec, std::string(r.status().message()).c_str());
      ++failures;
      continue;
    }
    std::printf("\n%s on %lld h100-80g with %lld GiB each (search %.1f s)\n", t.spec, static_cast<long long>(t.devices),
                static_cast<long long>(t.gib), r->search_seconds);
    std::printf("  %-24s %-44s %12s %12s %s\n", "plan", "configuration", "step", "peak", "fits");
    auto row = [&](const mapd::PlanCandidate& c, const std::string& name) {
      if (!c.applicable) {
        std::printf("  %-24s %-44s %12s %12s n/a (%s)\n", name.c_str(), absl::StrJoin(c.mesh, "x").c_str(), "-", "-", c.note.c_str());
        return;
      }
      std::printf("  %-24s %-44s %9.1f ms %12s %s\n", name.c_str(), Describe(c).c_str(), c.cost.step_seconds * 1e3,
                  mapd::FormatBytes(static_cast<int64_t>(c.cost.peak_bytes())).c_str(), c.fits ? "yes" : "no");
    };
    row(r->plan, "MAP");
    for (const auto& b : r->baselines) row(b, b.name);
    const mapd::PlanCandidate* base = BestFittingBaseline(*r);
    if (!r->fits) {
      std::printf("  FAIL: MAP's plan does not fit\n");
      ++failures;
    } else if (base != nullptr && base->cost.step_seconds < r->plan.cost.step_seconds * (1 - 1e-9)) {
      std::printf("  FAIL: %s is faster\n", base->name.c_str());
      ++failures;
    } else {
      std::printf("  MAP fits; %s\n", base == nullptr ? "no baseline fits"
                                                       : absl::StrFormat("%.2fx faster than the best fitting baseline (%s)",
                                                                         base->cost.step_seconds / r->plan.cost.step_seconds,
                                                                         base->name).c_str());
    }
  }
  return failures;
}

// The production batches of the foundation-model issue (docs/planner.md, "Production batches"):
// bf16 on H100s with 80 GiB each, micro-batches chosen by the search. Per workload: the whole
// search's wall time and its ratio to the 5 s bar, MAP's plan, and the best fitting baseline's
// step over MAP's. Fails a workload that does not fit, takes 5 s or more, or loses to a baseline.
int Production() {
  struct Workload {
    const char* spec;
    int64_t devices;
  };
  const Workload workloads[] = {{"gpt3-175b:batch=1536,seq=2048", 64},  {"gpt3-175b:batch=1536,seq=2048", 512},
                                {"llama3-70b:batch=128,seq=8192", 64},  {"llama3-70b:batch=128,seq=8192", 512},
                                {"llama2-70b:batch=64,seq=4096", 64},   {"llama2-7b:batch=256,seq=4096", 8}};
  std::printf("| workload | devices | search | / 5 s | MAP plan | MAP step | MAP peak | best fitting baseline | baseline step | baseline / MAP |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  int failures = 0;
  for (const Workload& w : workloads) {
    auto fp32 = TrainingGraph(w.spec);
    if (!fp32.ok()) return 1;
    mapd::PlannerOptions o = Options(w.devices, 80);
    o.profile.precision = mapd::Precision::kBf16Mixed;
    // The bf16 graph, as `mapctl plan --precision bf16` makes it; its making counts in the search.
    const auto converting = std::chrono::steady_clock::now();
    auto graph = mapd::GraphAtPrecision(*fp32, o.profile.precision);
    if (!graph.ok()) return 1;
    const double convert_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - converting).count();
    auto r = mapd::SearchPlan(*graph, o);
    if (r.ok()) r->search_seconds += convert_seconds;
    if (!r.ok()) {
      std::printf("| %s | %lld | error: %s |\n", w.spec, static_cast<long long>(w.devices), std::string(r.status().message()).c_str());
      ++failures;
      continue;
    }
    const mapd::PlanCandidate* base = BestFittingBaseline(*r);
    std::string plan = "no plan fits", step = "-", peak = "-", ratio = "-", base_name = "none fits", base_step = "-";
    if (r->fits) {
      plan = absl::StrFormat("%s, %lld x %lld micro-batches%s", Describe(r->plan), static_cast<long long>(r->plan.micro_batches),
                             static_cast<long long>(r->global_batch / r->plan.micro_batches),
                             r->adopted_note.empty() ? "" : " (a baseline's: within the gap)");
      step = absl::StrFormat("%.0f ms", r->plan.cost.step_seconds * 1e3);
      peak = mapd::FormatBytes(static_cast<int64_t>(r->plan.cost.peak_bytes()));
    }
    if (base != nullptr) {
      base_name = absl::StrFormat("%s, %lld micro-batches", base->name, static_cast<long long>(base->micro_batches));
      base_step = absl::StrFormat("%.0f ms", base->cost.step_seconds * 1e3);
      if (r->fits) ratio = absl::StrFormat("%.2f", base->cost.step_seconds / r->plan.cost.step_seconds);
    }
    const bool slower = base != nullptr && r->fits && base->cost.step_seconds < r->plan.cost.step_seconds * (1 - 1e-9);
    failures += !r->fits || r->search_seconds >= 5 || slower;
    std::printf("| %s | %lld | %.2f s | %.2f | %s | %s | %s | %s | %s | %s |\n", w.spec, static_cast<long long>(w.devices),
                r->search_seconds, r->search_seconds / 5, plan.c_str(), step.c_str(), peak.c_str(), base_name.c_str(),
                base_step.c_str(), ratio.c_str());
    std::fflush(stdout);
  }
  std::printf("\n%d of %zu workloads fail (no fit, search >= 5 s, or slower than a fitting baseline)\n", failures,
              sizeof(workloads) / sizeof(workloads[0]));
  return failures;
}

// The pipeline issue's workloads (docs/planner.md, "Pipeline stages"): bf16, 80 GiB devices,
// stage counts and micro-batches chosen. Per workload: the whole search's wall time against 5 s,
// MAP's plan, and the fastest fitting Megatron plan — TP × PP × DP, or TP × DP without stages —
// over MAP's. Fails a workload that does not fit, takes 5 s or more, or loses to one.
int Pipelines() {
  struct Workload {
    const char* spec;
    int64_t devices;
    const char* device_type;
  };
  const Workload workloads[] = {{"gpt3-175b:batch=1536,seq=2048", 1024, "a100-80g"},
                                {"llama2-70b:batch=1024,seq=4096", 512, "h100-80g"},
                                {"llama3-70b:batch=512,seq=8192", 1024, "h100-80g"}};
  std::printf("| workload | devices | search | / 5 s | MAP plan | MAP step | MAP peak | fastest fitting Megatron | its step | it / MAP |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  int failures = 0;
  for (const Workload& w : workloads) {
    auto fp32 = TrainingGraph(w.spec);
    if (!fp32.ok()) return 1;
    mapd::PlannerOptions o = Options(w.devices, 80);
    o.cluster.device_type = w.device_type;
    o.profile.precision = mapd::Precision::kBf16Mixed;
    o.pipeline_stages = 0;  // auto
    const auto start = std::chrono::steady_clock::now();
    auto graph = mapd::GraphAtPrecision(*fp32, o.profile.precision);
    if (!graph.ok()) return 1;
    auto r = mapd::SearchPlan(*graph, o);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!r.ok()) {
      std::printf("| %s | %lld | error: %s |\n", w.spec, static_cast<long long>(w.devices), std::string(r.status().message()).c_str());
      ++failures;
      continue;
    }
    const bool fits = r->fits || r->pipeline.has_value();
    const double step = r->pipeline ? r->pipeline->step_seconds : r->plan.cost.step_seconds;
    std::string plan = "no plan fits", peak = "-";
    if (r->pipeline) {
      const mapd::PipelinePlan& p = *r->pipeline;
      plan = absl::StrFormat("%d stages x mesh %s, %lld micro-batches, bubble %.1f%%", p.stages, absl::StrJoin(p.stage_mesh, "x"),
                             static_cast<long long>(p.micro_batches), 100 * p.bubble_fraction);
      peak = mapd::FormatBytes(static_cast<int64_t>(p.peak_bytes));
    } else if (r->fits) {
      plan = absl::StrFormat("%s, %lld micro-batches", Describe(r->plan), static_cast<long long>(r->plan.micro_batches));
      peak = mapd::FormatBytes(static_cast<int64_t>(r->plan.cost.peak_bytes()));
    }
    std::string base_name = "none fits";
    double base_step = 0;
    for (const mapd::PipelinePlan& b : r->pipeline_baselines) {
      if (b.applicable && b.fits && (base_step == 0 || b.step_seconds < base_step)) {
        base_step = b.step_seconds;
        base_name = absl::StrFormat("%s, %lld micro-batches", b.name, static_cast<long long>(b.micro_batches));
      }
    }
    for (const mapd::PlanCandidate& b : r->baselines) {
      if (b.applicable && b.fits && b.name.rfind("Megatron", 0) == 0 && (base_step == 0 || b.cost.step_seconds < base_step)) {
        base_step = b.cost.step_seconds;
        base_name = absl::StrFormat("%s, %lld micro-batches", b.name, static_cast<long long>(b.micro_batches));
      }
    }
    const bool slower = base_step > 0 && fits && base_step < step * (1 - 1e-9);
    failures += !fits || seconds >= 5 || slower;
    std::printf("| %s | %lld %s | %.2f s | %.2f | %s | %.0f ms | %s | %s | %s | %s |\n", w.spec, static_cast<long long>(w.devices),
                w.device_type, seconds, seconds / 5, plan.c_str(), step * 1e3, peak.c_str(), base_name.c_str(),
                base_step > 0 ? absl::StrFormat("%.0f ms", base_step * 1e3).c_str() : "-",
                base_step > 0 && fits ? absl::StrFormat("%.2f", base_step / step).c_str() : "-");
    std::fflush(stdout);
  }
  std::printf("\n%d of %zu workloads fail (no fit, search >= 5 s, or slower than a fitting Megatron plan)\n", failures,
              sizeof(workloads) / sizeof(workloads[0]));
  return failures;
}

// The whole grid of the planner-over-the-grid issue (docs/planner.md, "Search time over the
// grid"): GPT-3, LLaMA-2/3 and Megatron-LM's Table 1 rows, 1B to 1T parameters, 8 to 4096
// devices, production batches, bf16 on 80 GiB devices, searched with the defaults a user of
// `mapctl plan` gets (micro-batches and pipeline stages auto). Each workload runs in a child
// process, so its peak resident memory is its own. Per workload: wall time of the bf16
// conversion and the search, its ratio to the 5 s bar, peak memory and the plan. Fails a workload
// at 5 s or more, at 1 GB or more, or that does not fit; and the whole grid when the median
// reaches 2 s. `--write FILE` saves each workload's predicted step; `--against FILE` fails a
// workload whose plan is slower than the saved one by the cost model (beyond the 1% gap).
struct ScaleWorkload {
  std::string spec;
  int64_t devices;
  const char* device_type;
};

std::vector<ScaleWorkload> ScaleGrid() {
  // Megatron-LM's Table 1 (Narayanan et al., SC'21): heads, hidden, layers, GPUs, global batch.
  struct MegatronRow {
    int heads, hidden, layers, gpus, batch;
  };
  const MegatronRow megatron[] = {{24, 2304, 24, 32, 512},       {32, 3072, 30, 64, 512},      {32, 4096, 36, 128, 512},
                                  {48, 6144, 40, 256, 1024},     {64, 8192, 48, 512, 1536},    {80, 10240, 60, 1024, 1792},
                                  {96, 12288, 80, 1536, 2304},   {128, 16384, 96, 1920, 2160}, {128, 20480, 105, 2520, 2520},
                                  {160, 25600, 128, 3072, 3072}};
  std::vector<ScaleWorkload> grid;
  for (const MegatronRow& r : megatron) {
    grid.push_back({absl::StrFormat("gpt3-175b:layers=%d,hidden=%d,heads=%d,vocab=51200,seq=2048,batch=%d", r.layers,
                                    r.hidden, r.heads, r.batch),
                    r.gpus, "a100-80g"});
  }
  const ScaleWorkload others[] = {
      {"gpt3-175b:layers=24,hidden=2048,heads=16,batch=512,seq=2048", 8, "h100-80g"},
      {"gpt3-175b:batch=1536,seq=2048", 64, "h100-80g"},
      {"gpt3-175b:batch=1536,seq=2048", 512, "h100-80g"},
      {"gpt3-175b:batch=1536,seq=2048", 1024, "a100-80g"},
      {"gpt3-175b:batch=3072,seq=2048", 4096, "h100-80g"},
      {"llama2-7b:batch=256,seq=4096", 8, "h100-80g"},
      {"llama2-13b:batch=512,seq=4096", 64, "h100-80g"},
      {"llama2-70b:batch=64,seq=4096", 64, "h100-80g"},
      {"llama2-70b:batch=1024,seq=4096", 512, "h100-80g"},
      {"llama3-8b:batch=128,seq=8192", 8, "h100-80g"},
      {"llama3-8b:batch=512,seq=8192", 256, "h100-80g"},
      {"llama3-70b:batch=128,seq=8192", 64, "h100-80g"},
      {"llama3-70b:batch=512,seq=8192", 1024, "h100-80g"},
      {"llama3-70b:batch=2048,seq=8192", 4096, "h100-80g"},
  };
  grid.insert(grid.end(), std::begin(others), std::end(others));
  return grid;
}

// What a child reports of its search: the plan's step (0: none fits), wall seconds and the plan.
struct ScaleRow {
  double step_seconds = 0;
  double wall_seconds = 0;
  char plan[400] = {};
};

// In the child: the search as `mapctl plan <spec> --devices N --device-type T --precision bf16`
// runs it (the graph's making included).
ScaleRow SearchScaleWorkload(const ScaleWorkload& w) {
  ScaleRow row;
  const auto start = std::chrono::steady_clock::now();
  auto fp32 = TrainingGraph(w.spec);
  mapd::PlannerOptions o = Options(w.devices, 80);
  o.cluster.device_type = w.device_type;
  o.profile.precision = mapd::Precision::kBf16Mixed;
  o.pipeline_stages = 0;  // auto, as `mapctl plan` asks
  absl::StatusOr<mapd::PlanResult> r = absl::UnknownError("not searched");
  if (!fp32.ok()) {
    r = fp32.status();
  } else if (auto graph = mapd::GraphAtPrecision(*fp32, o.profile.precision); !graph.ok()) {
    r = graph.status();
  } else {
    r = mapd::SearchPlan(*graph, o);
  }
  row.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::string plan;
  if (!r.ok()) {
    plan = "error: " + std::string(r.status().message());
  } else if (r->pipeline) {
    const mapd::PipelinePlan& p = *r->pipeline;
    row.step_seconds = p.step_seconds;
    plan = absl::StrFormat("%d stages x mesh %s, %lld micro-batches, peak %s", p.stages, absl::StrJoin(p.stage_mesh, "x"),
                           static_cast<long long>(p.micro_batches), mapd::FormatBytes(static_cast<int64_t>(p.peak_bytes)));
  } else if (r->fits) {
    row.step_seconds = r->plan.cost.step_seconds;
    plan = absl::StrFormat("%s, %lld micro-batches, peak %s", Describe(r->plan), static_cast<long long>(r->plan.micro_batches),
                           mapd::FormatBytes(static_cast<int64_t>(r->plan.cost.peak_bytes())));
  } else {
    plan = "no plan fits";
  }
  std::snprintf(row.plan, sizeof(row.plan), "%s", plan.c_str());
  return row;
}

// Runs one workload in a child process; its peak resident bytes from wait4.
bool RunScaleWorkload(const ScaleWorkload& w, ScaleRow* row, int64_t* peak_bytes) {
  std::fflush(stdout);  // the child must not print what the parent buffered
  int fds[2];
  if (pipe(fds) != 0) return false;
  const pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    close(fds[0]);
    const ScaleRow r = SearchScaleWorkload(w);
    const bool written = write(fds[1], &r, sizeof(r)) == static_cast<ssize_t>(sizeof(r));
    _exit(written ? 0 : 1);
  }
  close(fds[1]);
  const bool read_all = read(fds[0], row, sizeof(*row)) == static_cast<ssize_t>(sizeof(*row));
  close(fds[0]);
  int status = 0;
  struct rusage usage {};
  if (wait4(pid, &status, 0, &usage) != pid) return false;
  *peak_bytes = static_cast<int64_t>(usage.ru_maxrss) * 1024;
  return read_all && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// The predicted steps a `--write` saved: one "<devices> <device type> <step seconds> <spec>"
// line per workload.
std::map<std::string, double> ReadSavedSteps(const char* path) {
  std::map<std::string, double> steps;
  std::ifstream in(path);
  std::string devices, type, spec;
  double step = 0;
  while (in >> devices >> type >> step >> spec) steps[devices + " " + type + " " + spec] = step;
  return steps;
}

int ScaleGridBench(const char* write_path, const char* against_path) {
  const std::vector<ScaleWorkload> grid = ScaleGrid();
  const std::map<std::string, double> saved = against_path ? ReadSavedSteps(against_path) : std::map<std::string, double>{};
  if (against_path != nullptr && saved.empty()) {
    std::fprintf(stderr, "--against %s: no saved steps read (write them with --write)\n", against_path);
    return 1;
  }
  std::FILE* out = write_path ? std::fopen(write_path, "w") : nullptr;
  if (write_path != nullptr && out == nullptr) {
    std::fprintf(stderr, "--write %s: cannot open\n", write_path);
    return 1;
  }
  std::printf("| workload | devices | search | / 5 s | peak memory | MAP plan | MAP step |%s\n", against_path ? " saved step | ratio |" : "");
  std::printf("|---|---|---|---|---|---|---|%s\n", against_path ? "---|---|" : "");
  int failures = 0;
  std::vector<double> walls;
  for (const ScaleWorkload& w : grid) {
    ScaleRow row;
    int64_t peak = 0;
    const bool ran = RunScaleWorkload(w, &row, &peak);
    const std::string key = absl::StrFormat("%lld %s %s", static_cast<long long>(w.devices), w.device_type, w.spec);
    std::string comparison;
    bool worse = false;
    if (against_path != nullptr) {
      auto it = saved.find(key);
      if (it == saved.end() || it->second <= 0) {
        comparison = " - | - |";
      } else {
        worse = row.step_seconds <= 0 || row.step_seconds > it->second * 1.01;
        comparison = absl::StrFormat(" %.0f ms | %.3f%s |", it->second * 1e3, row.step_seconds / it->second, worse ? " (worse)" : "");
      }
    }
    const bool slow = row.wall_seconds >= 5, big = peak >= (int64_t{1} << 30);
    failures += !ran || row.step_seconds <= 0 || slow || big || worse;
    walls.push_back(row.wall_seconds);
    std::printf("| %s | %lld %s | %.2f s | %.2f | %s | %s | %s |%s\n", w.spec.c_str(), static_cast<long long>(w.devices),
                w.device_type, row.wall_seconds, row.wall_seconds / 5, mapd::FormatBytes(peak).c_str(),
                ran ? row.plan : "the child failed", row.step_seconds > 0 ? absl::StrFormat("%.0f ms", row.step_seconds * 1e3).c_str() : "-",
                comparison.c_str());
    std::fflush(stdout);
    if (out != nullptr) std::fprintf(out, "%s %.9g %s\n", absl::StrFormat("%lld %s", static_cast<long long>(w.devices), w.device_type).c_str(), row.step_seconds, w.spec.c_str());
  }
  if (out != nullptr) std::fclose(out);
  std::sort(walls.begin(), walls.end());
  const double median = walls.size() % 2 ? walls[walls.size() / 2] : (walls[walls.size() / 2 - 1] + walls[walls.size() / 2]) / 2;
  std::printf("\n%zu workloads; median search %.2f s (bar 2 s), slowest %.2f s (bar 5 s); %d fail (no fit, >= 5 s, >= 1 GB%s)\n",
              walls.size(), median, walls.back(), failures, against_path ? ", or slower than saved" : "");
  return failures + (median >= 2);
}

}  // namespace

int main(int argc, char** argv) {
  mapd::RetainFreedMemory();  // planning frees and reuses cost graphs by the hundred
  if (argc > 1 && std::strcmp(argv[1], "--scale") == 0) {
    const char* write_path = nullptr;
    const char* against_path = nullptr;
    for (int i = 2; i + 1 < argc; i += 2) {
      if (std::strcmp(argv[i], "--write") == 0) write_path = argv[i + 1];
      else if (std::strcmp(argv[i], "--against") == 0) against_path = argv[i + 1];
    }
    return ScaleGridBench(write_path, against_path) == 0 ? 0 : 1;
  }
  if (argc > 1 && std::strcmp(argv[1], "--pipelines") == 0) return Pipelines() == 0 ? 0 : 1;
  if (argc > 1 && std::strcmp(argv[1], "--production") == 0) return Production() == 0 ? 0 : 1;
  if (argc > 1 && std::strcmp(argv[1], "--sweep") == 0) return Sweep() == 0 ? 0 : 1;
  if (argc > 1 && std::strcmp(argv[1], "--targets") == 0) return Targets() == 0 ? 0 : 1;
  const bool grid_only = argc > 1 && std::strcmp(argv[1], "--grid") == 0;
  const bool solve_only = argc > 1 && std::strcmp(argv[1], "--solve") == 0;
  int failures = 0;
  if (!grid_only) failures += SolveTimes();
  if (!solve_only) {
    if (!grid_only) std::printf("\n");
    failures += Grid();
  }
  return failures == 0 ? 0 : 1;
}

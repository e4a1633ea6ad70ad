#include "planner/lower/lowered_plan.h"

#include <algorithm>
#include <iterator>
#include <vector>

#include "absl/strings/str_split.h"
#include "planner/lower/collective_order.h"
#include "planner/lower/lowering.h"
#include "planner/lower/recompute.h"
#include "planner/plan/micro_batch.h"
#include "planner/profile/bucket_size.h"
#include "planner/profile/layers.h"
#include "planner/profile/profiler.h"

namespace mapd {

int64_t LoweredPlan::WorstPeak() const {
  int64_t worst = 0;
  for (const auto& p : predicted) worst = std::max(worst, p.peak_bytes);
  return worst;
}

std::vector<std::string> LayersToRecompute(const std::string& mode, const std::vector<std::string>& planned, const Graph& graph) {
  if (mode == "auto") return planned;
  if (mode == "off" || mode.empty()) return {};
  if (mode == "all") return RepeatedLayers(graph);
  return absl::StrSplit(mode, ',', absl::SkipEmpty());
}

absl::StatusOr<LoweredPlan> LowerAndPredict(const Graph& graph, const std::vector<int64_t>& mesh, const std::vector<Strategy>& strategies,
                                            int zero_stage, const std::vector<std::string>& recompute, const std::string& device_type,
                                            const ProfileOptions& profile, int64_t micro_batches, int64_t memory_budget) {
  // Micro-batches: the programs are the micro-batch graph's, marked with the count, and profiled
  // as a later pass (rank_cost.h).
  std::optional<Graph> micro;
  if (micro_batches > 1) {
    auto g = MicroBatchGraph(graph, micro_batches);
    if (!g.ok()) return g.status();
    micro = *std::move(g);
  }
  const Graph& lowered = micro ? *micro : graph;
  ClusterOptions co;
  co.mesh = mesh;
  co.device_type = device_type;
  auto cluster = MakeCluster(co);
  if (!cluster.ok()) return cluster.status();
  ProfileOptions po = profile;
  po.timeline = false;
  int world = 1;
  for (int64_t d : mesh) world *= static_cast<int>(d);
  LoweredPlan out;
  for (int r = 0; r < world; ++r) {
    auto program = LowerForRank(lowered, mesh, strategies, r, zero_stage);
    if (!program.ok()) return program.status();
    if (micro_batches > 1) program->set_micro_batches(micro_batches);
    if (!recompute.empty()) {
      if (auto st = MarkRecompute(lowered, recompute, &*program); !st.ok()) return st;
    }
    auto p = PredictRank(lowered, *program, *cluster, po);
    if (!p.ok()) return p.status();
    out.predicted.push_back(*p);
    out.programs.push_back(*std::move(program));
  }
  // Smaller ZeRO buckets, then none, while a rank's program is over the budget: the fewest that
  // fit (the demo's GPT on 4 ranks at 12 MiB: sixths, 8 collectives in backward, where eighths
  // made 12 and none 104).
  std::vector<int> fit(std::begin(kZeroBucketFitParts), std::end(kZeroBucketFitParts));
  fit.push_back(-1);
  for (int parts : fit) {
    if (memory_budget <= 0 || zero_stage < 2 || out.WorstPeak() <= memory_budget) break;
    for (int r = 0; r < world; ++r) {
      out.programs[r].set_zero_bucket_parts(parts);
      auto p = PredictRank(lowered, out.programs[r], *cluster, po);
      if (!p.ok()) return p.status();
      out.predicted[r] = *p;
    }
  }
  // Every group's ranks issue the same collectives in the same order (or the run would hang).
  if (auto st = VerifyCollectiveOrder(out.programs, mesh); !st.ok()) return st;
  return out;
}

}  // namespace mapd

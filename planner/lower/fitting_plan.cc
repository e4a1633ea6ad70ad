#include "planner/lower/fitting_plan.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/bytes.h"
#include "planner/lower/collective_order.h"
#include "planner/lower/lowering.h"
#include "planner/lower/recompute.h"
#include "planner/plan/micro_batch.h"
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
                                            const ProfileOptions& profile, int64_t micro_batches) {
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
  // Every group's ranks issue the same collectives in the same order (or the run would hang).
  if (auto st = VerifyCollectiveOrder(out.programs, mesh); !st.ok()) return st;
  return out;
}

absl::StatusOr<FittingPlan> SearchFittingPlan(const Graph& graph, PlannerOptions o, const std::string& recompute_mode) {
  o.recompute = recompute_mode == "auto";  // an explicit choice is the user's, not the search's
  auto r = SearchPlan(graph, o);
  if (!r.ok()) return r.status();
  FittingPlan out;
  const int64_t budget = o.cluster.memory_per_device;
  for (int attempt = 0; budget > 0 && r->fits && attempt < 4; ++attempt) {
    const PlanCandidate& p = r->plan;
    std::vector<std::string> recompute = LayersToRecompute(recompute_mode, p.recomputed_layers, graph);
    auto lowered = LowerAndPredict(graph, p.mesh, p.strategies, p.zero_stage, recompute, o.cluster.device_type, o.profile, p.micro_batches);
    if (!lowered.ok()) return lowered.status();
    const int64_t worst = lowered->WorstPeak();
    if (worst <= budget) {
      out.lowered = *std::move(lowered);
      break;
    }
    o.cluster.memory_per_device = static_cast<int64_t>(static_cast<double>(o.cluster.memory_per_device) * static_cast<double>(budget) /
                                                       static_cast<double>(worst) * 0.99);
    auto again = SearchPlan(graph, o);
    if (!again.ok()) return again.status();
    if (!again->fits) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "MAP's plan for %s per rank needs %s on a rank as its program profiles, and no plan fits %s by the planner's model; "
          "give more memory per rank or more ranks",
          FormatBytes(budget), FormatBytes(worst), FormatBytes(o.cluster.memory_per_device)));
    }
    r = std::move(again);
  }
  out.recompute = LayersToRecompute(recompute_mode, r->plan.recomputed_layers, graph);
  out.result = *std::move(r);
  return out;
}

}  // namespace mapd

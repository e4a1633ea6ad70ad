// A pipeline stage's plans, for the pipeline search (pipeline_search.cc) and nothing else: the
// stage graphs of a layer sequence built and solved — by MAP's search (SearchPlan) or as one stage
// of a Megatron TP × PP × DP baseline — memoised on what their cost depends on, and the lower
// bounds the search prunes with (a layer alone, unconstrained).
#ifndef MAPD_PLANNER_PLAN_STAGE_SOLVER_H_
#define MAPD_PLANNER_PLAN_STAGE_SOLVER_H_

#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "model/ir/graph.h"
#include "planner/plan/cost_graph_cache.h"
#include "planner/plan/planner.h"
#include "planner/plan/stages.h"
#include "planner/sharding/cluster.h"

namespace mapd {

// One stage of a Megatron TP × PP × DP baseline: the Megatron TP × DP family (baselines.h) on
// `graph` with the options' pinned mesh ({dp, tp}, {tp} or {dp}: `tp` says which axis is tensor
// parallel) and micro-batch count — its fastest plan under the budget, or with every repeated
// layer recomputed when only that fits (`fits` false when neither does).
absl::StatusOr<PlanCandidate> SolveMegatronStage(const Graph& graph, const PlannerOptions& options, int64_t tp,
                                                 CostGraphCache* cache = nullptr);

// One stage's plan on one submesh at one micro-batch count and depth, memoised.
struct StageSolve {
  PlanCandidate plan;
  bool fits = false;
  double pass_seconds = 0;  // per micro-batch, without the send
  double once_seconds = 0;
  double send_seconds = 0;  // to the next stage and back (0 for the last)
  double u() const { return fits ? pass_seconds + send_seconds : std::numeric_limits<double>::infinity(); }
};

// Builds stage graphs and solves them, memoised on what their cost depends on: whether the stage
// holds the prologue or the epilogue, the kinds of its layers, the micro-batches it keeps, the
// submesh, the micro-batch count and the plan family (MAP's search, or a Megatron TP degree).
class StageSolver {
 public:
  // `coarse`: stages solved within a looser gap, for exploring (StageOptions).
  StageSolver(const Graph& graph, const LayerSequence& seq, const PlannerOptions& options, bool coarse);

  int layers() const { return seq_.num_layers(); }

  // A graph of the stage [a, b) — of its kind: the memoised one may hold other layers alike.
  absl::StatusOr<std::shared_ptr<const Graph>> GraphOfKind(int a, int b);

  // tp 0: MAP's search on the stage; tp ≥ 1: the Megatron family with that tensor degree.
  // With `cutoff` > 0 (MAP's search only), a stage whose plan alone is no faster than it (a
  // step is at least any stage's m passes and its once-a-step part) does not fit: cutoffs only
  // fall as the search goes, so an answer memoised under a higher one stays right.
  absl::StatusOr<const StageSolve*> Solve(int a, int b, int64_t depth, const std::vector<int64_t>& mesh, int64_t m,
                                          int64_t tp = 0, double cutoff = 0);

  // Of one middle layer alone on `mesh`, unconstrained (0 when the sequence has no middle layer):
  // U1, the least per-micro-batch time, and C1, the least whole objective (m passes and the
  // once-a-step part) — lower bounds on any layer's share of a stage's pass and objective.
  struct LayerCost {
    double pass = 0, objective = 0;
  };
  absl::StatusOr<LayerCost> LayerBound(const std::vector<int64_t>& mesh, int64_t m);

  // C1 for a stage of `layers` layers that must fit the budget: the least over the middle
  // layers' kinds of BudgetedBound (folded_bound.h) with a layer's share of the budget, one
  // micro-batch in flight (the least any stage keeps) and the lowest ZeRO stage's seconds up —
  // every layer of such a stage costs at least this on average. Searched only as far as
  // `target` needs: below it, 0 (no bound).
  absl::StatusOr<double> LayerBudgetBound(const std::vector<int64_t>& mesh, int64_t m, int layers, double target);

  // The same for a Megatron TP stage of `tp` on `mesh`: one middle layer as the Megatron family
  // runs it, without a budget (so without recomputation) — lower bounds on any Megatron stage's
  // layer there, tighter than LayerBound's (the family's strategies only). 0 when the family does
  // not apply, or the sequence has no middle layer.
  absl::StatusOr<LayerCost> MegatronLayerBound(const std::vector<int64_t>& mesh, int64_t m, int64_t tp);

  int solved() const { return solved_; }
  // Frees what the solver memoised (the plans it returned stay valid: they own their copies and
  // share their graphs), so that the thread that used it pays for it.
  void Release();
  // Seconds spent building the stages' cost graphs (MAPD_TRACE).
  double build_seconds() const;
  // The memory budget per device the stages are solved under.
  int64_t budget() const { return options_.cluster.memory_per_device; }

  // The link between consecutive stages' devices: across nodes when a stage fills whole nodes.
  AxisLink StageLink(int64_t stage_devices) const;

  // The options a stage is searched with: the submesh, micro-batch count and depth pinned, no
  // baselines; coarse or at the accepted gap.
  PlannerOptions StageOptions(const std::vector<int64_t>& mesh, int64_t m, int64_t depth) const;

 private:
  // A layer's whole objective (m passes and the once-a-step part) and that part.
  struct LayerObjective {
    double objective = 0, once = 0;
  };
  using LayerCoster = std::function<absl::StatusOr<std::optional<LayerObjective>>(const Graph&, CostGraphCache*)>;

  CostGraphCache* CacheOf(int a, int b, const Graph& g);
  std::string KindKey(int a, int b) const;
  // The stage's outputs sent on, and their gradients back, per micro-batch, as the plan
  // produces them.
  absl::StatusOr<double> SendSeconds(CostGraphCache& cache, const PlanCandidate& plan, const std::vector<int64_t>& mesh, int64_t m);
  // The least LayerCost over the kinds of the middle layers, each costed by `cost` on its own
  // one-layer graph; 0 when the sequence has no middle layer or `cost` gives none (nullopt).
  absl::StatusOr<LayerCost> LeastMiddleLayer(int64_t m, const LayerCoster& cost);

  const Graph& graph_;
  const LayerSequence& seq_;
  const PlannerOptions options_;  // a copy: a solver may be made with its own budget (interleaved chunks)
  const bool coarse_;
  std::vector<int> kind_id_;
  std::map<std::string, std::shared_ptr<const Graph>> graphs_;
  CostGraphMemos memos_;  // shared by the stage graphs' caches (declared first: they use it)
  std::map<std::string, std::unique_ptr<CostGraphCache>> caches_;  // per stage graph
  std::map<std::tuple<std::string, int64_t, std::vector<int64_t>, int64_t, int64_t>, std::unique_ptr<StageSolve>> solves_;
  std::map<std::tuple<std::vector<int64_t>, int64_t, int64_t>, LayerCost> megatron_bounds_;
  std::map<std::pair<std::vector<int64_t>, int64_t>, LayerCost> bounds_;
  int solved_ = 0;
};

}  // namespace mapd

#endif  // MAPD_PLANNER_PLAN_STAGE_SOLVER_H_

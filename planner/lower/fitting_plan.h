// A plan ready to run on ranks: MAP's plan lowered to one program per rank, each program profiled
// (rank_cost.h), and — under a memory budget — checked against it. The planner's memory is its
// start-of-backward model; a rank program's profile is the finer one (about 10% higher for
// checkpointed plans), so a plan whose programs do not fit is searched again under the budget
// lowered by what it missed, a few times at most. `mapctl run` and the coordinator's dispatcher
// both start ranks from this.
#ifndef MAPD_PLANNER_LOWER_FITTING_PLAN_H_
#define MAPD_PLANNER_LOWER_FITTING_PLAN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "planner/lower/rank_cost.h"
#include "planner/plan/planner.h"
#include "proto/mapd/v1/rank_program.pb.h"

namespace mapd {

// One program per rank, with what profiling it predicts.
struct LoweredPlan {
  std::vector<v1::RankProgram> programs;   // per rank
  std::vector<RankPrediction> predicted;   // per rank: its program profiled
  int64_t WorstPeak() const;
};

// The layers to recompute in backward: `mode` is "auto" (the plan's, `planned`), "off", "all"
// (every repeated layer) or a comma-separated list of layer names.
std::vector<std::string> LayersToRecompute(const std::string& mode, const std::vector<std::string>& planned, const Graph& graph);

// Lowers a plan (mesh, per-node strategies, ZeRO stage) for every rank, marks `recompute`, and
// profiles each program on `device_type` with `profile`'s optimizer.
// With `micro_batches` > 1 the programs are the micro-batch graph's (micro_batch.h), marked with
// the count, and profiled as a later pass (gradients accumulated).
absl::StatusOr<LoweredPlan> LowerAndPredict(const Graph& graph, const std::vector<int64_t>& mesh, const std::vector<Strategy>& strategies,
                                            int zero_stage, const std::vector<std::string>& recompute, const std::string& device_type,
                                            const ProfileOptions& profile, int64_t micro_batches = 1);

struct FittingPlan {
  PlanResult result;                  // the search whose plan is the one to run
  std::vector<std::string> recompute; // the layers recomputed (LayersToRecompute of the plan's)
  // result.plan lowered and profiled, when the search was checked against a budget (and fits).
  std::optional<LoweredPlan> lowered;
};

// SearchPlan, then (under a budget, when the plan fits) the check above. FAILED_PRECONDITION
// when the rank programs cannot be made to fit; a plan that does not fit by the planner's model
// is returned with `result.fits` false, as SearchPlan does.
absl::StatusOr<FittingPlan> SearchFittingPlan(const Graph& graph, PlannerOptions options, const std::string& recompute_mode);

}  // namespace mapd

#endif  // MAPD_PLANNER_LOWER_FITTING_PLAN_H_

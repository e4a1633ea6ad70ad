// A plan lowered to one program per rank, each program profiled (rank_cost.h): what
// planner/runnable checks against the budget and ranks run.
#ifndef MAPD_PLANNER_LOWER_LOWERED_PLAN_H_
#define MAPD_PLANNER_LOWER_LOWERED_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "planner/lower/rank_cost.h"
#include "planner/profile/profile_options.h"
#include "planner/sharding/strategies.h"
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
// Under ZeRO 2-3, where a rank's program is over `memory_budget` (> 0), ZeRO's buckets are made
// smaller (halves, thirds, ... sixteenths of their set: kZeroBucketFitParts, bucket_size.h) and
// then turned off (RankProgram.zero_bucket_parts), the first that fits kept — or the last, which the caller then finds over the budget. The choice
// depends only on the plan and the budget, so lowering again gives the same programs.
absl::StatusOr<LoweredPlan> LowerAndPredict(const Graph& graph, const std::vector<int64_t>& mesh, const std::vector<Strategy>& strategies,
                                            int zero_stage, const std::vector<std::string>& recompute, const std::string& device_type,
                                            const ProfileOptions& profile, int64_t micro_batches = 1, int64_t memory_budget = 0);

}  // namespace mapd

#endif  // MAPD_PLANNER_LOWER_LOWERED_PLAN_H_

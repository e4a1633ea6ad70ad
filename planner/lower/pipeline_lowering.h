// Lowering a pipeline plan (DESIGN §6b, §7): every stage's plan lowered, as a whole model's is,
// on the stage's submesh — one RankProgram per (stage, rank within the stage) — and told its place
// in the pipeline (rank_program.proto, PipelineRole): which inputs it receives from which stage,
// which outputs it sends to which stages, and the weights it shares with another stage.
//
// A received activation is held as its sender made it: the receiving stage's program starts from
// the sender's placement (Partial included) and re-lays it out for its own consumers, so rank r
// of one stage talks only to rank r of the other (every stage has the same submesh shape). The
// gradient sent back is that block's, complete on every rank that holds it (the lowering's
// gradient rules make a replicated input's gradient whole).
//
// Global ranks are stage-major: stage s's rank r is s × stage_ranks + r.
//
// A trainable weight two stages read (GPT's embedding and LM head) is a parameter of both; its
// gradient is summed between them once a step (TiedParameter: block against block when both
// hold it alike, else as whole gradients). Not built yet (UNIMPLEMENTED, naming the weight): a
// trainable weight read by more than two stages.
#ifndef MAPD_PLANNER_LOWER_PIPELINE_LOWERING_H_
#define MAPD_PLANNER_LOWER_PIPELINE_LOWERING_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/ir/graph.h"
#include "planner/lower/lowered_plan.h"
#include "planner/profile/profile_options.h"
#include "planner/sharding/strategies.h"

namespace mapd {

// One stage of the plan to lower (interleaved: one chunk of layers).
struct StageToLower {
  std::shared_ptr<const Graph> graph;     // the stage graph (planner/plan/stages.h), whole batch
  int first_layer = 0, end_layer = 0;     // its layers [first, end) of the layer sequence
  std::vector<Strategy> strategies;       // per stage-graph node
  int zero_stage = 0;
  std::vector<std::string> recompute;     // layers recomputed in backward
};

// Lowers every stage for every rank of `stage_mesh` with `micro_batches` passes a step (the
// programs are the stages' micro-batch graphs'), sets each program's PipelineRole, and predicts
// each rank on `device_type` (rank_cost.h, PredictPipelineRank). Programs come in global rank
// order.
//
// Interleaved 1F1B (`chunks` = V ≥ 2): `stages` are the model's p·V chunks in order, chunk c
// running on device stage c mod p; device stage d's rank r gets chunk d's program with chunks
// d + p, d + 2p, … as its later_chunks, transfers naming device stages (the last device's sends
// wrap around to the first), tags unique over all chunks. UNIMPLEMENTED for a weight two chunks
// of one device share.
absl::StatusOr<LoweredPlan> LowerPipelineAndPredict(const std::vector<StageToLower>& stages, const std::vector<int64_t>& stage_mesh,
                                                    int64_t micro_batches, int chunks, const std::string& device_type,
                                                    const ProfileOptions& profile);

}  // namespace mapd

#endif  // MAPD_PLANNER_LOWER_PIPELINE_LOWERING_H_

// Every rank of a group must issue the same collectives in the same order, or a run deadlocks: a
// rank waits in an all-reduce its peers never start, or two ranks pair an all-gather with a
// reduce-scatter. The lowering makes every rank's program from one plan, so their Communicate
// steps should agree; VerifyCollectiveOrder checks that they do before anything runs.
//
// For each mesh axis and each group of ranks on it (the ranks sharing every other coordinate),
// the programs' Communicate steps on that axis — in program order, each with its kind, tensor
// dimensions, local output type and the recompute segment it lies in (a segment's collectives
// run again in backward) — must be the same sequence, and the programs' step-level collectives
// (the loss's all-reduce axes, the ZeRO stage, the micro-batch count, which decide the
// collectives after backward) the same. Backward issues the forward's collectives' backwards in
// reverse, so agreeing forwards agree there too.
#ifndef MAPD_PLANNER_LOWER_COLLECTIVE_ORDER_H_
#define MAPD_PLANNER_LOWER_COLLECTIVE_ORDER_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "proto/mapd/v1/rank_program.pb.h"

namespace mapd {

// `programs[r]` is rank r's program on `mesh`. FAILED_PRECONDITION naming the first two ranks of
// a group that disagree, the axis, the step and what each would issue; INVALID_ARGUMENT when the
// programs do not cover the mesh.
absl::Status VerifyCollectiveOrder(const std::vector<v1::RankProgram>& programs, const std::vector<int64_t>& mesh);

}  // namespace mapd

#endif  // MAPD_PLANNER_LOWER_COLLECTIVE_ORDER_H_

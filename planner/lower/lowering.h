// Lowering (DESIGN §7): a plan — one strategy per node on a device mesh — becomes one
// RankProgram per rank (proto/mapd/v1/rank_program.proto): which block of every parameter and
// input the rank holds, every node on local shapes (view targets made local, means scaled), and
// explicit communication on the process group of each mesh axis wherever a value's placement
// changes between producer and consumer.
//
// Gradient rules (the backward of each Communicate kind is in the proto): a value held
// replicated on an axis by a consumer that splits its work on that axis gets a GRAD_SYNC there
// (identity forward, all-reduce backward) — data parallelism is this rule applied to
// parameters. A Partial value's gradient is replicated, so KEEP_ON_FIRST and ALL_REDUCE are
// identity backward. Every gradient contribution is reduced exactly once: a consumer that
// receives a slice (SLICE, backward all-gather) is not a divergent consumer.
//
// Re-layouts go axis by axis, outermost first; when some dimension is (or would be on the way)
// split by two axes at once — whose block order depends on the axes' order — the value is
// gathered to replicated innermost axis first and sliced again outermost first.
#ifndef MAPD_PLANNER_LOWER_LOWERING_H_
#define MAPD_PLANNER_LOWER_LOWERING_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/ir/graph.h"
#include "planner/sharding/strategies.h"
#include "proto/mapd/v1/plan.pb.h"
#include "proto/mapd/v1/rank_program.pb.h"

namespace mapd {

// The program of rank `rank` (row-major over `mesh`) for `strategies` (one per graph node).
// INVALID_ARGUMENT for a rank outside the mesh, a strategy count that does not match the graph,
// or placements of the wrong rank; FAILED_PRECONDITION when a placement does not divide a
// tensor.
// `zero_stage` (0–2; 3 is UNIMPLEMENTED) is recorded in the program; which parameters it shards
// follows from the program (zero.h).
absl::StatusOr<v1::RankProgram> LowerForRank(const Graph& graph, const std::vector<int64_t>& mesh,
                                             const std::vector<Strategy>& strategies, int rank, int zero_stage = 0);

struct LowerOptions {
  int zero_stage = 0;  // 0–3, recorded in the program (zero.h says which parameters it shards)
  // Graph inputs held in the given placement (Partial allowed) rather than in their first
  // consumer's: a pipeline stage's received activations, held as the sending stage made them
  // (the consumers' re-layouts follow, as for any value).
  std::map<std::string, Placement> held_inputs;
};
absl::StatusOr<v1::RankProgram> LowerForRank(const Graph& graph, const std::vector<int64_t>& mesh,
                                             const std::vector<Strategy>& strategies, int rank, const LowerOptions& options);

// The strategies a saved plan stands for (placements and per-axis labels of every node).
absl::StatusOr<std::vector<Strategy>> StrategiesFromPlan(const v1::Plan& plan, const Graph& graph);

// The local tensors an instruction reads (absent inputs skipped) and the ones it makes.
std::vector<std::string> InstructionReads(const v1::Instruction& ins);
std::vector<std::string> InstructionWrites(const v1::Instruction& ins);

// Where the block of a tensor of `shape` with `placement` held by the rank at `coords` starts.
absl::StatusOr<std::vector<int64_t>> BlockStart(const Shape& shape, const Placement& placement,
                                                const std::vector<int64_t>& mesh, const std::vector<int64_t>& coords);

// The rank's position on each axis (row-major: the last axis varies fastest).
std::vector<int64_t> RankCoords(const std::vector<int64_t>& mesh, int rank);

}  // namespace mapd

#endif  // MAPD_PLANNER_LOWER_LOWERING_H_

// How far N ranks' final parameters are from one device's (`mapctl run --ranks N
// --check-reference`, DESIGN §7's correctness bar): every rank's block of every parameter and
// buffer against the same block of the single-device tensor. The measure is the one the
// equivalence tests use: max |rank − one device| / max(1, max |one device's block|).
#ifndef MAPD_WORKER_DIST_REFERENCE_CHECK_H_
#define MAPD_WORKER_DIST_REFERENCE_CHECK_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/mapd/v1/checkpoint.pb.h"
#include "proto/mapd/v1/rank_program.pb.h"

namespace mapd {

struct BlockDifference {
  double relative = 0;    // the worst block's difference, as above
  std::string parameter;  // where it is ("" when nothing was compared)
  int rank = -1;
  int blocks = 0;         // blocks compared
};

// `programs[r]` and `finals[r]` are rank r's program and final blocks; `reference` holds one
// device's tensors by name. INVALID_ARGUMENT when a block has no reference tensor or the shapes
// disagree (a checkpoint of another plan).
absl::StatusOr<BlockDifference> WorstBlockDifference(const std::vector<v1::RankProgram>& programs,
                                                     const std::vector<v1::RankCheckpoint>& finals,
                                                     const std::vector<v1::TensorData>& reference);

}  // namespace mapd

#endif  // MAPD_WORKER_DIST_REFERENCE_CHECK_H_

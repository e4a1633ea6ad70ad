// How far N ranks' final parameters are from one device's (`mapctl run --ranks N
// --check-reference`, DESIGN §7's correctness bar): every rank's block of every parameter and
// buffer against the same block of the single-device tensor. The measure is the one the
// equivalence tests use: max |rank − one device| / max(1, max |one device's block|).
//
// Adam and rounding noise: an element whose gradient is zero but for rounding (the key part of
// an attention qkv bias — softmax ignores a shift every key shares — or a bias before a batch
// norm) is moved by Adam about ±lr a step in the direction of its noise, since Adam divides by
// the gradient's own size. N ranks round differently from one device, so such elements drift
// apart by up to 2·lr a step although both runs are right. With a NoiseModel those elements —
// found by one device's final Adam second moment, tiny beside their tensor's or the model's
// largest — are compared against an absolute allowance (2·lr·steps) and counted apart; every
// other element keeps the strict measure.
#ifndef MAPD_WORKER_RANK_REFERENCE_CHECK_H_
#define MAPD_WORKER_RANK_REFERENCE_CHECK_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/mapd/v1/checkpoint.pb.h"
#include "proto/mapd/v1/rank_program.pb.h"

namespace mapd {

struct BlockDifference {
  double relative = 0;    // the worst block's difference, as above (noise-driven elements apart)
  std::string parameter;  // where it is ("" when nothing was compared)
  int rank = -1;
  int blocks = 0;         // blocks compared
  // Elements compared under the NoiseModel's allowance, and the largest absolute difference
  // among them (where).
  int64_t noise_elements = 0;
  double noise_difference = 0;
  std::string noise_parameter;
};

struct NoiseModel {
  // One device's final Adam second moments (exp_avg_sq), named as the parameters.
  std::vector<v1::TensorData> second_moments;
  // An element is noise-driven when its second moment is under `tensor_ratio` times its
  // tensor's largest (a gradient under 1e-4 of the tensor's largest) or under `model_ratio`
  // times the largest of any tensor (a gradient under 1e-6 of the model's largest: a whole
  // tensor of noise, such as a bias before a batch norm).
  double tensor_ratio = 1e-8;
  double model_ratio = 1e-12;
  // The absolute difference allowed for those elements: 2·lr·steps for Adam.
  double tolerance = 0;
  // INVALID_ARGUMENT for a ratio outside [0, 1) or a negative tolerance.
  absl::Status Validate() const;
};

// `programs[r]` and `finals[r]` are rank r's program and final blocks; `reference` holds one
// device's tensors by name; `noise` (optional) sets noise-driven elements apart, as above.
// INVALID_ARGUMENT when a block has no reference tensor or the shapes disagree (a checkpoint of
// another plan), or a second moment's shape is not its parameter's.
absl::StatusOr<BlockDifference> WorstBlockDifference(const std::vector<v1::RankProgram>& programs,
                                                     const std::vector<v1::RankCheckpoint>& finals,
                                                     const std::vector<v1::TensorData>& reference,
                                                     const NoiseModel* noise = nullptr);

}  // namespace mapd

#endif  // MAPD_WORKER_RANK_REFERENCE_CHECK_H_

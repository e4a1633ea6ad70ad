// Private to the rank trainer's translation units (rank_trainer.cc, rank_checkpoint.cc,
// rank_grad_sync.cc): what more than one of them needs and RankTrainer's header does not declare.
// Includes LibTorch: include it from those files only.
#ifndef MAPD_WORKER_RANK_RANK_TRAINER_INTERNAL_H_
#define MAPD_WORKER_RANK_RANK_TRAINER_INTERNAL_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace mapd {
namespace rank_trainer_internal {

// The block of `t` starting at `start` with `shape`.
at::Tensor Narrow(at::Tensor t, const std::vector<int64_t>& start, const std::vector<int64_t>& shape);

}  // namespace rank_trainer_internal
}  // namespace mapd

#endif  // MAPD_WORKER_RANK_RANK_TRAINER_INTERNAL_H_

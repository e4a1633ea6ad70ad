// One device's training run, the yardstick of the distributed tests (DESIGN §7's correctness
// bar): its batches, losses and final parameters from a fixed seed, and the check that a rank's
// parameter blocks equal the same blocks of its parameters.
#ifndef MAPD_TESTS_DIST_ONE_DEVICE_H_
#define MAPD_TESTS_DIST_ONE_DEVICE_H_

#include <ATen/ATen.h>

#include <functional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "model/ir/graph.h"
#include "proto/mapd/v1/rank_program.pb.h"
#include "worker/transport/communicator.h"
#include "worker/runtime/optimizer.h"
#include "worker/runtime/torch_types.h"

namespace mapd {

inline constexpr int kSteps = 10;

// SGD with momentum: AdamW would turn rounding noise into full steps for parameters whose
// gradient is zero analytically (GPT-2's key bias: softmax ignores a constant added to every
// key), so N ranks summing in another order would drift by lr per step there (seen: 4e-4 after
// 10 steps at lr 1e-2) while every loss still matched.
OptimizerOptions Sgd(double lr = 0.1);

struct Reference {
  std::vector<TensorMap> batches;
  std::vector<double> losses;
  std::unordered_map<std::string, at::Tensor> final_params;
};

// kSteps steps of `g` on one device (parameters from seed 5, data from seed 11). `repeat`: every
// step trains on the first batch (a model that cannot learn random labels across batches still
// fits one).
Reference SingleDevice(const Graph& g, const OptimizerOptions& optimizer = Sgd(), bool repeat = false);

// Every block `rank` holds (its program's parameter shards) equals the same block of the
// reference's parameters within `tolerance` × max(1, the block's largest magnitude).
void ExpectBlocksMatch(const v1::RankProgram& program, const std::vector<std::pair<std::string, at::Tensor>>& blocks,
                       const Reference& ref, double tolerance, int rank);

// What one rank of a run ended with.
struct RankOutcome {
  std::string error;   // "" when it ran to the end
  std::vector<double> losses;
  std::vector<std::pair<std::string, at::Tensor>> blocks;  // its final parameter blocks
};

// Runs `body(rank, groups, outcome)` for ranks 0..world−1, each on its own thread (one intra-op
// thread) joined to real Gloo groups, one per axis of `mesh_of(rank)`, over one TCPStore on a
// free port; a rank that cannot join gets that as its error.
void RunRanksOnThreads(int world, const std::function<std::vector<int64_t>(int rank)>& mesh_of,
                       const std::function<void(int rank, std::vector<Communicator*> groups, RankOutcome& out)>& body,
                       std::vector<RankOutcome>& ranks);

// kSteps steps of `trainer` (a RankTrainer or a PipelineRank) on the reference's batches, then
// its final blocks (gathered under ZeRO-3), into `out` (its error when one fails).
template <typename RankT>
void TrainLikeTheReference(RankT& trainer, const Reference& ref, RankOutcome& out) {
  for (int s = 0; s < kSteps; ++s) {
    auto blocks = trainer.TakeBlocks(ref.batches[s]);
    if (!blocks.ok()) return void(out.error = blocks.status().ToString());
    auto r = trainer.Step(*blocks);
    if (!r.ok()) return void(out.error = r.status().ToString());
    out.losses.push_back(r->loss);
  }
  auto blocks = trainer.Blocks();
  if (!blocks.ok()) return void(out.error = blocks.status().ToString());
  out.blocks = *std::move(blocks);
}

// Every rank ran kSteps steps without error, with one device's losses (relative) and parameter
// blocks (ExpectBlocksMatch) within `tolerance`; `programs[r]` is rank r's.
void ExpectRanksMatch(const std::vector<v1::RankProgram>& programs, const std::vector<RankOutcome>& ranks, const Reference& ref,
                      double tolerance);

}  // namespace mapd

#endif  // MAPD_TESTS_DIST_ONE_DEVICE_H_

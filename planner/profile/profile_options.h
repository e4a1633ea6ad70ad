// Options of the symbolic profiler.
#ifndef MAPD_PLANNER_PROFILE_PROFILE_OPTIONS_H_
#define MAPD_PLANNER_PROFILE_PROFILE_OPTIONS_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "planner/profile/device_profile.h"

namespace mapd {

enum class Optimizer {
  kSgd,          // p -= lr * g: no state
  kSgdMomentum,  // one fp32 buffer per parameter
  kAdamW,        // two fp32 moments per parameter
};

enum class Precision {
  kFp32,        // everything in the graph's dtypes
  kBf16Mixed,   // bf16 weights, activations and gradients; fp32 master weights and optimizer states
};

struct ProfileOptions {
  // The optimizer whose state and step are simulated.
  Optimizer optimizer = Optimizer::kAdamW;
  // Number formats of weights, activations, gradients and optimizer state.
  Precision precision = Precision::kFp32;
  // Compute and memory rates for the time estimates.
  DeviceProfile device = DeviceCatalogue().front();
  // Record one timeline point per event (forward node, backward node, optimizer); off saves
  // time and memory for huge models when only the peak is wanted.
  bool timeline = true;
  // ZeRO as one rank runs it (planner/lower/zero.h; 0 for one device): per sharded trainable
  // parameter, the number of ranks it is split over. Stage 1: the optimizer updates a flat
  // shard (ceil(numel / ranks) elements, its own copy) with shard-sized state, the whole
  // gradient lives through backward and is cut to the shard after it; stage 2: the gradient is
  // reduce-scattered as it is made (its all-reduced copy for a moment, the shard kept). Both gather the updated shards back into the block (2 × the padded block for
  // a moment, the largest parameter's).
  int zero_stage = 0;
  std::map<std::string, int64_t> zero_ranks;
  // Activation checkpointing (planner/lower/recompute.h): node index ranges [first, last] whose
  // nodes keep nothing for backward in forward — only the range's inputs are kept, until its
  // backward is done — and whose saved tensors are made again when backward reaches `last`.
  std::vector<std::pair<int, int>> recompute;
  // Micro-batches (DESIGN §6a): the step profiled is a later pass of several, so every trainable
  // parameter's gradient (under ZeRO 2–3 its shard) is live from the start, and the pass's
  // contributions are added into it.
  bool gradients_accumulated = false;
  // Gradient buckets (the runtime's data parallelism, planner/lower/zero.h BucketedGradSyncs):
  // these trainable parameters' gradients live from the step's start, in their buckets, and the
  // gradient backward makes is copied in as it comes.
  std::set<std::string> bucketed_gradients;
  // ZeRO 2-3's gradient buckets (planner/lower/zero.h ZeroGradientBuckets): their parameters are
  // in bucketed_gradients — the whole gradient backward makes is copied into a staging buffer,
  // with no reduction copy of its own, and its shard gradient lives from then (the runtime makes
  // it when the bucket's reduction is done, no earlier) until the optimizer step. The staging
  // buffers (zero_staging_bytes; under ZeRO-3 with the buffer blocks are gathered into) live from
  // the start. Gathering a bucket — after the optimizer step under ZeRO-2, at a block's gathers
  // under ZeRO-3 — needs zero_gather_bytes more for a moment (Gloo's flat receive buffer).
  int64_t zero_staging_bytes = 0;
  int64_t zero_gather_bytes = 0;
  // Pipeline stages under 1F1B (DESIGN §6b): the activations of this many micro-batches are alive
  // at once — the pass profiled and passes_in_flight − 1 earlier ones awaiting their backward,
  // each keeping what a pass holds at the end of its forward (saved tensors and the live values,
  // the ones it sends among them) throughout the pass profiled.
  int64_t passes_in_flight = 1;

  absl::Status Validate() const { return device.Validate(); }
};

absl::StatusOr<Optimizer> ParseOptimizer(const std::string& name);    // sgd | momentum | adamw
absl::StatusOr<Precision> ParsePrecision(const std::string& name);    // fp32 | bf16
const char* OptimizerName(Optimizer o);
const char* PrecisionName(Precision p);
// "auto" (or empty): bf16 on an accelerator device type (DeviceProfile::accelerator), fp32 on
// the CPU; otherwise ParsePrecision. The device type's errors (an unknown name) pass through.
absl::StatusOr<Precision> ResolvePrecision(const std::string& name, const std::string& device_type);

}  // namespace mapd

#endif  // MAPD_PLANNER_PROFILE_PROFILE_OPTIONS_H_

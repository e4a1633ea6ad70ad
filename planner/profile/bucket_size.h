// Gradient bucket sizes, shared by the runtime's buckets (worker/dist/grad_buckets.h), the
// lowering's ZeRO bucket layout (planner/lower/zero.h) and the planner's memory model
// (planner/plan/cost_graph.cc), so that all three assume the same buffers.
#ifndef MAPD_PLANNER_PROFILE_BUCKET_SIZE_H_
#define MAPD_PLANNER_PROFILE_BUCKET_SIZE_H_

#include <algorithm>
#include <cstdint>

namespace mapd {

// The gradient bucket size the runtime uses unless told otherwise (mapctl run --gradient-buckets),
// and so the one memory predictions assume: PyTorch DDP's default.
inline constexpr int64_t kDefaultBucketBytes = int64_t{25} << 20;

// The most a ZeRO bucket holds (planner/lower/zero.h ZeroGradientBuckets) when its set's
// parameters take `set_bytes`: `bucket_bytes`, and 1/parts of the set — by default half: two
// buckets or more, so the first half's reduction runs while backward makes the second, and the
// buffers (two staging, and under ZeRO-3 one gather buffer, each a bucket) are not all the size
// of the whole gradient ZeRO is there to save. Smaller buckets save more memory but cost a
// collective each: on 4 ranks sharing 2 cores, eighths made ZeRO-2's nanoGPT step 118 ms instead
// of 57, so the lowering takes them only where halves do not fit (lowered_plan.h).
inline constexpr int kDefaultZeroBucketParts = 2;
inline int64_t ZeroBucketCap(int64_t set_bytes, int64_t bucket_bytes, int parts = kDefaultZeroBucketParts) {
  return std::min(bucket_bytes, (set_bytes + parts - 1) / parts);
}

}  // namespace mapd

#endif  // MAPD_PLANNER_PROFILE_BUCKET_SIZE_H_

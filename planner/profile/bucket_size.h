// Gradient bucket sizes, shared by the runtime's buckets (worker/rank/grad_buckets.h), the
// lowering's ZeRO bucket layout (planner/lower/zero.h) and the planner's memory model
// (planner/plan/cost_graph.cc), so that all three assume the same buffers.
#ifndef MAPD_PLANNER_PROFILE_BUCKET_SIZE_H_
#define MAPD_PLANNER_PROFILE_BUCKET_SIZE_H_

#include <cstdint>

namespace mapd {

// The gradient bucket size the runtime uses unless told otherwise (mapctl run --gradient-buckets),
// and so the one memory predictions assume: PyTorch DDP's default.
inline constexpr int64_t kDefaultBucketBytes = int64_t{25} << 20;

// How many buckets a ZeRO set is cut into (planner/lower/zero.h ZeroGradientBuckets): at least
// `parts` (balanced: the largest as small as the parameters allow), and enough that each holds
// about `bucket_bytes`. Every bucket costs a collective (two, with the gather after the step),
// whatever its size, and small ones are latency-bound: on 4 ranks sharing 2 cores ZeRO-2's
// nanoGPT step took 118 ms in eighths, 76 in halves and 68 in one bucket (ZeRO-0: 57). So ZeRO-2
// takes one part by default, as DDP takes one 25 MB bucket, and the lowering cuts more
// (kZeroBucketFitParts), then turns buckets off, only where a rank is over its budget
// (lowered_plan.h). ZeRO-3 starts at halves: a gather buffer holds a bucket, and one bucket would
// hold every parameter through the step, which ZeRO-3 is there to avoid (with two buffers, one
// to gather ahead into, halves still hold them all where memory allows; more parts hold less).
// Where a rank is over its budget, the lowering tries these, in order — the fewest buckets first
// (each costs collectives) — and takes the first whose programs fit, else turns buckets off.
inline constexpr int kZeroBucketFitParts[] = {2, 3, 4, 5, 6, 7, 8, 10, 12, 16};
inline constexpr int kDefaultZeroBucketParts = 1;
inline constexpr int kDefaultZero3BucketParts = 2;
inline int DefaultZeroBucketParts(int zero_stage) { return zero_stage >= 3 ? kDefaultZero3BucketParts : kDefaultZeroBucketParts; }

}  // namespace mapd

#endif  // MAPD_PLANNER_PROFILE_BUCKET_SIZE_H_

// Pins: parts of a parallel configuration the user fixes (DESIGN §6b, `mapctl plan --pin`), so
// that the configuration people run today — Megatron-LM's tensor × pipeline × data degrees, its
// micro-batch size, full recomputation, its schedule — is costed exactly, and a partial pin
// (`tp=8`) leaves the rest to the search.
//
//   tp=T         each stage's mesh has a tensor axis of T devices (innermost): {N/(PP·T), T}
//   pp=P         P pipeline stages (1: none)
//   dp=D         each stage's mesh has a data axis of D devices (outermost)
//   mbs=S        S samples per micro-batch on each data-parallel rank: m = batch / (D · S)
//                micro-batches a step (D pinned, or N / (T·P) with both of those pinned)
//   recompute=full|off   every repeated layer recomputed in backward, or none
//   schedule=1f1b|interleaved|interleaved:V   the pipeline schedule (V chunks of layers per
//                device; `interleaved` leaves V to the search)
//   zero=0..3    the ZeRO stage
//
// The search's space is cut to the pins (mesh shapes, stage counts, micro-batch counts,
// recomputation, ZeRO stage, schedule); the baselines are cut to the configurations matching
// them, and the fastest of those is the pinned configuration, reported beside MAP's plan.
#ifndef MAPD_PLANNER_PLAN_PINS_H_
#define MAPD_PLANNER_PLAN_PINS_H_

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mapd {

struct PlanPins {
  enum class Recompute { kFree, kFull, kOff };
  int64_t tp = 0;   // tensor degree of a stage's mesh (0: the search's)
  int64_t pp = 0;   // pipeline stages (0: the search's; 1: none)
  int64_t dp = 0;   // data degree of a stage's mesh (0: the search's)
  int64_t mbs = 0;  // samples per micro-batch per data-parallel rank (0: the search's)
  Recompute recompute = Recompute::kFree;
  // Chunks of layers per device: 0 the search's, 1 plain 1F1B, V ≥ 2 interleaved 1F1B with V,
  // -1 interleaved with V the search's.
  int64_t virtual_stages = 0;
  int zero = -1;  // ZeRO stage (-1: the search's)

  bool empty() const;
  // "tp=8,pp=16,..." in the order above, only what is pinned.
  std::string ToString() const;
  // Values in range (each ≥ 1 where given; zero 0–3).
  absl::Status Validate() const;

  // With `devices` in all: the degrees the pins fix, each 0 when free — tp·pp·dp = devices when
  // all three are pinned, a third derived from the other two, and free ones 1 when the pinned use
  // every device. INVALID_ARGUMENT naming the pins that cannot hold together.
  struct Degrees {
    int64_t tp = 0, pp = 0, dp = 0;
  };
  absl::StatusOr<Degrees> Resolve(int64_t devices) const;
  // Whether a stage mesh (outermost axis first) has the pinned data and tensor degrees: {D, T}, or
  // one axis that is all data (T = 1 or free) or all tensor (D = 1 or free).
  bool AllowsStageMesh(const std::vector<int64_t>& mesh) const;
  // The pins for the same devices without stages: a pinned dp spans the stages' devices (dp·pp).
  PlanPins WithoutStages() const;
  // Whether a schedule of `v` chunks per device (1: 1F1B) is allowed.
  bool AllowsVirtualStages(int64_t v) const;
};

// Parses "tp=8,pp=16,dp=15,mbs=1,recompute=full,schedule=interleaved:2,zero=1". INVALID_ARGUMENT
// naming the key or value at fault (and the keys there are).
absl::StatusOr<PlanPins> ParsePins(absl::string_view text);

}  // namespace mapd

#endif  // MAPD_PLANNER_PLAN_PINS_H_

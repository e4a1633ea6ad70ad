// The symbolic profiler: memory and compute of one training step, from the IR alone.
//
// It simulates the allocator over forward, loss, backward and the optimizer step: each
// forward output is allocated at its node (views share their base's storage) and freed after
// its last use unless autograd keeps it (the registry's SavedSpec says what each op keeps);
// kept storage is released when its node's backward runs; activation gradients live from the
// backward that makes them to the backward that consumes them; parameter gradients live until
// the optimizer step ends; parameters, buffers and optimizer states live throughout. Time comes
// from the registry's FLOPs and bytes and a device profile (roofline + per-kernel overhead).
#ifndef MAPD_PLANNER_PROFILE_PROFILER_H_
#define MAPD_PLANNER_PROFILE_PROFILER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/ir/graph.h"
#include "planner/profile/layers.h"
#include "planner/profile/profile_options.h"

namespace mapd {

enum class Phase { kStart, kForward, kBackward, kOptimizer };
const char* PhaseName(Phase p);

// Live bytes by kind at one moment.
struct MemoryBreakdown {
  int64_t parameters = 0;        // weights, buffers, constants (and fp32 master weights)
  int64_t gradients = 0;         // parameter gradients
  int64_t optimizer_states = 0;  // momentum / Adam moments
  int64_t saved_activations = 0;  // storage autograd keeps for the backward
  int64_t transients = 0;        // everything else: live forward values, activation gradients, workspaces
  int64_t Total() const { return parameters + gradients + optimizer_states + saved_activations + transients; }
};

struct TimelinePoint {
  Phase phase;
  std::string label;  // node name, or "optimizer"
  int64_t live_bytes;
};

struct OpProfile {
  std::string node, op, scope;
  double forward_flops = 0, backward_flops = 0;
  bool flops_estimated = false;  // a generic op of no known formula (OpCost::flops_estimated)
  int64_t bytes = 0;  // forward bytes moved
  double forward_seconds = 0, backward_seconds = 0;
  int64_t saved_bytes = 0;  // bytes this node makes autograd keep (its share of saved storage)
};

struct LayerProfile {
  std::string layer;  // scope up to the first numeric component: "transformer.h.3", "layers.5"
  int nodes = 0;
  double flops = 0;  // forward + backward
  double seconds = 0;
  int64_t saved_bytes = 0;
  int64_t parameter_bytes = 0;
};

struct ProfileReport {
  int64_t params = 0;             // trainable parameter elements
  int64_t parameter_bytes = 0;    // all parameters/buffers as stored (incl. master weights)
  double forward_flops = 0;
  double backward_flops = 0;
  double optimizer_flops = 0;
  // Of forward + backward, the FLOPs estimated rather than counted by a formula (generic ATen
  // ops of no known formula, costed as memory-bound), and the nodes that went by the generic path.
  double estimated_flops = 0;
  int generic_nodes = 0;
  double training_flops() const { return forward_flops + backward_flops; }
  double flops_per_step() const { return forward_flops + backward_flops + optimizer_flops; }

  int64_t predicted_peak_bytes = 0;
  MemoryBreakdown peak_breakdown;
  // What the pass keeps for its backward at the end of its forward (saved tensors and the live
  // values): each pass in flight beside this one adds this much (ProfileOptions::passes_in_flight).
  int64_t kept_per_pass_bytes = 0;
  Phase peak_phase = Phase::kStart;
  std::string peak_at;  // node (or "optimizer") at the peak

  double forward_seconds = 0, backward_seconds = 0, optimizer_seconds = 0;
  double predicted_step_seconds() const { return forward_seconds + backward_seconds + optimizer_seconds; }

  std::vector<TimelinePoint> timeline;
  std::vector<OpProfile> ops;
  std::vector<LayerProfile> layers;
  double profile_seconds = 0;  // how long profiling took
  ProfileOptions options;
};

// The graph a run at `precision` trains: `graph` itself for fp32; for bf16 its mixed-precision
// form (model/graph/mixed_precision.h), verified. Plan, lower and run that graph.
absl::StatusOr<Graph> GraphAtPrecision(const Graph& graph, Precision precision);

// Profiles one training step of a verified graph (output 0 is the loss).
absl::StatusOr<ProfileReport> ProfileTrainingStep(const Graph& graph, const ProfileOptions& options);


}  // namespace mapd

#endif  // MAPD_PLANNER_PROFILE_PROFILER_H_

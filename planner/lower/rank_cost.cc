#include "planner/lower/rank_cost.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "model/ir/dtype.h"
#include "planner/lower/local_graph.h"
#include "planner/lower/zero.h"
#include "planner/plan/one_f_one_b.h"
#include "planner/profile/bucket_size.h"
#include "planner/profile/profiler.h"
#include "planner/sharding/collectives.h"

namespace mapd {

namespace {

// The collectives the runtime makes a bucket at a time (worker/rank/grad_buckets.h) instead of a
// parameter at a time, with the default bucket size: data parallelism's buckets (an all-reduce
// each on each of their axes, parameters in gradient order and one dtype and set of axes a
// bucket, as GradBuckets fills them) and ZeRO
// 2-3's (an all-reduce of each bucket's staging rows; the gather back after the step, one for
// as many buckets as the staging buffers hold, or under ZeRO-3 one a bucket in forward and again
// in backward for those its gather buffers no longer hold). Adds the GRAD_SYNC instructions they replace to `replaced` and the ZeRO
// parameters they cover to `bucketed`.
double BucketSeconds(const v1::RankProgram& program, const Cluster& cluster, std::set<int>* replaced,
                     std::set<std::string>* bucketed) {
  std::unordered_map<std::string, const v1::Shard*> shard_of;
  for (const v1::Shard& s : program.parameters()) shard_of[s.name()] = &s;
  double seconds = 0;
  std::vector<ZeroParam> chains = BucketedGradSyncs(program);
  std::stable_sort(chains.begin(), chains.end(), [](const ZeroParam& a, const ZeroParam& b) { return a.grad_syncs[0] > b.grad_syncs[0]; });
  // Per set of axes: the dtype and bytes of the bucket filling; a bucket is all-reduced over each.
  std::map<std::vector<int>, std::pair<int, int64_t>> open;
  auto close = [&](const std::vector<int>& axes) {
    auto it = open.find(axes);
    if (it == open.end()) return;
    for (int a : axes) seconds += CollectiveSeconds(CollectiveKind::kAllReduce, it->second.second, cluster.mesh[a], cluster.links[a]);
    open.erase(it);
  };
  for (const ZeroParam& z : chains) {
    auto s = shard_of.find(z.name);
    if (s == shard_of.end()) continue;
    const TensorType type = TensorType::FromProto(s->second->local_type());
    const std::vector<int>& axis = z.axes;
    auto it = open.find(axis);
    if (it != open.end() && (it->second.first != static_cast<int>(type.dtype) || it->second.second + type.NumBytes() > kDefaultBucketBytes)) close(axis);
    auto& bucket = open.try_emplace(axis, static_cast<int>(type.dtype), 0).first->second;
    bucket.second += type.NumBytes();
    replaced->insert(z.grad_syncs.begin(), z.grad_syncs.end());
  }
  while (!open.empty()) close(open.begin()->first);
  for (const ZeroBucketSet& set : ZeroGradientBuckets(program, kDefaultBucketBytes)) {
    const int64_t n = cluster.mesh[set.axis];
    const AxisLink& link = cluster.links[set.axis];
    int64_t largest = 0;
    for (size_t i = 0; i < set.buckets.size(); ++i) {
      const int64_t bytes = set.ranks * set.buckets[i].segment * DTypeSize(set.dtype);
      largest = std::max(largest, bytes);
      // Reduce-scattered: by NCCL, or through shared memory among a host's CPU ranks
      // (shm_communicator.h; Gloo alone would all-reduce the rows, twice the exchanges).
      seconds += CollectiveSeconds(CollectiveKind::kReduceScatter, bytes, n, link);
      // ZeRO-3 gathers every bucket in forward (the last bucket of gradient order first) into
      // its two gather buffers (one where the set is one bucket), which still hold the last two
      // gathered — gradient order's first two, backward's first needs — when backward starts:
      // it gathers the others again (ZeroBuckets::GatherBlock).
      if (program.zero_stage() >= 3) seconds += (i < 2 ? 1 : 2) * CollectiveSeconds(CollectiveKind::kAllGather, bytes, n, link);
    }
    if (program.zero_stage() < 3 && set.staging_buffers > 0) {
      const int64_t gathers = (static_cast<int64_t>(set.buckets.size()) + set.staging_buffers - 1) / set.staging_buffers;
      seconds += static_cast<double>(gathers) * CollectiveSeconds(CollectiveKind::kAllGather, set.staging_buffers * largest, n, link);
    }
    for (const ZeroParam& z : set.params) {
      bucketed->insert(z.name);
      replaced->insert(z.grad_syncs.begin(), z.grad_syncs.end());
    }
  }
  return seconds;
}

}  // namespace

absl::StatusOr<double> CommunicationSeconds(const v1::RankProgram& program, const Cluster& cluster) {
  // Bytes of every local tensor, in program order.
  std::unordered_map<std::string, int64_t> bytes;
  auto note = [&bytes](const std::string& name, const v1::TensorType& t) { bytes[name] = TensorType::FromProto(t).NumBytes(); };
  for (const auto& s : program.parameters()) note(s.name(), s.local_type());
  for (const auto& s : program.inputs()) note(s.name(), s.local_type());
  // Every collective's axis is the mesh's (the ZeRO and bucket layouts below take theirs from
  // the GRAD_SYNC steps), checked once before anything indexes the mesh by it.
  for (const v1::Instruction& ins : program.instructions()) {
    if (ins.has_communicate() && (ins.communicate().axis() < 0 || ins.communicate().axis() >= cluster.num_axes())) {
      return absl::InvalidArgumentError(absl::StrCat("communicate step '", ins.communicate().output(), "' is on axis ",
                                                     ins.communicate().axis(), "; the mesh ", cluster.MeshString(), " has ",
                                                     cluster.num_axes()));
    }
  }
  std::set<int> replaced;
  std::set<std::string> bucketed;
  double seconds = BucketSeconds(program, cluster, &replaced, &bucketed);
  // The step's loss, summed over its partial axes once (with the tail's small sums).
  for (int a : program.loss_partial_axes()) {
    if (a < cluster.num_axes()) seconds += CollectiveSeconds(CollectiveKind::kAllReduce, 8, cluster.mesh[a], cluster.links[a]);
  }
  // ZeRO without buckets: stages 2-3 reduce-scatter a sharded parameter's gradient instead of
  // its GRAD_SYNCs' all-reduces (Gloo: an all-reduce per axis of what is left); every stage
  // gathers the shards (an all-gather per axis, innermost first).
  for (const ZeroParam& z : ZeroParams(program)) {
    if (bucketed.count(z.name)) continue;
    int64_t bytes = 0;
    for (const v1::Shard& s : program.parameters()) {
      if (s.name() == z.name) bytes = TensorType::FromProto(s.local_type()).NumBytes() / std::max<int64_t>(1, z.numel) * z.ranks * z.chunk;
    }
    int64_t left = bytes;
    for (int a : z.axes) {
      if (program.zero_stage() >= 2) seconds += CollectiveSeconds(CollectiveKind::kAllReduce, left, cluster.mesh[a], cluster.links[a]);
      left /= cluster.mesh[a];
    }
    // Stages 1-2 gather after the step; stage 3 before use in forward and again in backward.
    const double gathers = program.zero_stage() >= 3 ? 2 : 1;
    for (auto a = z.axes.rbegin(); a != z.axes.rend(); ++a) {
      left *= cluster.mesh[*a];
      seconds += gathers * CollectiveSeconds(CollectiveKind::kAllGather, left, cluster.mesh[*a], cluster.links[*a]);
    }
    if (program.zero_stage() >= 2) replaced.insert(z.grad_syncs.begin(), z.grad_syncs.end());
  }
  for (int i = 0; i < program.instructions_size(); ++i) {
    const v1::Instruction& ins = program.instructions(i);
    if (ins.has_compute()) {
      const v1::Compute& c = ins.compute();
      for (int k = 0; k < c.outputs_size() && k < c.output_types_size(); ++k) note(c.outputs(k), c.output_types(k));
      continue;
    }
    const v1::Communicate& step = ins.communicate();
    auto in = bytes.find(step.input());
    if (in == bytes.end()) {
      return absl::InvalidArgumentError(absl::StrCat("communicate step '", step.output(), "' reads '", step.input(),
                                                     "', which the program does not make before it"));
    }
    note(step.output(), step.output_type());
    const int64_t n = cluster.mesh[step.axis()];
    const AxisLink& link = cluster.links[step.axis()];
    const int64_t in_bytes = in->second, out_bytes = bytes[step.output()];
    switch (step.kind()) {
      case v1::Communicate::ALL_REDUCE:
        seconds += CollectiveSeconds(CollectiveKind::kAllReduce, in_bytes, n, link);
        break;
      case v1::Communicate::ALL_GATHER:
        seconds += CollectiveSeconds(CollectiveKind::kAllGather, out_bytes, n, link);
        break;
      case v1::Communicate::REDUCE_SCATTER:
        seconds += CollectiveSeconds(CollectiveKind::kAllReduce, in_bytes, n, link) +
                   CollectiveSeconds(CollectiveKind::kAllGather, in_bytes, n, link);
        break;
      case v1::Communicate::ALL_TO_ALL:
        seconds += 2 * CollectiveSeconds(CollectiveKind::kAllToAll, in_bytes, n, link);
        break;
      case v1::Communicate::SLICE:  // its backward gathers the gradient; an integer tensor has none
        if (IsFloating(step.output_type().dtype())) seconds += CollectiveSeconds(CollectiveKind::kAllGather, in_bytes, n, link);
        break;
      case v1::Communicate::GRAD_SYNC:
        if (!replaced.count(i)) seconds += CollectiveSeconds(CollectiveKind::kAllReduce, in_bytes, n, link);
        break;
      default:
        break;
    }
  }
  return seconds;
}

namespace {

// How to profile `program` as its rank runs it: the device, ZeRO's shards, buckets and staging,
// its recompute segments, and its passes (a later pass's, the gradients accumulated so far live).
ProfileOptions ProgramProfileOptions(const v1::RankProgram& program, const Cluster& cluster, const ProfileOptions& profile) {
  ProfileOptions o = profile;
  o.device = cluster.device;
  for (const ZeroParam& z : ZeroParams(program)) o.zero_ranks[z.name] = z.ranks;
  o.zero_stage = o.zero_ranks.empty() ? 0 : program.zero_stage();
  // LocalGraph has one node per instruction, in order.
  for (const auto& seg : program.recompute()) o.recompute.emplace_back(seg.first(), seg.last());
  o.gradients_accumulated = program.micro_batches() > 1;
  o.passes_in_flight = 1;
  for (const ZeroParam& z : BucketedGradSyncs(program)) o.bucketed_gradients.insert(z.name);
  for (const ZeroBucketSet& set : ZeroGradientBuckets(program, kDefaultBucketBytes)) {
    for (const ZeroParam& z : set.params) o.bucketed_gradients.insert(z.name);
    const int64_t buffer_bytes = set.staging_elements * DTypeSize(set.dtype);
    // ZeRO-3 gathers blocks a bucket at a time into buffers of its own: two where there are two
    // buckets or more (the next one is prefetched into the other while one computes).
    const int64_t gather_buffers = program.zero_stage() >= 3 ? std::min<int64_t>(2, static_cast<int64_t>(set.buckets.size())) : 0;
    o.zero_staging_bytes += (set.staging_buffers + gather_buffers) * buffer_bytes;
    // A receive buffer beside the gathered rows: NCCL's all-gather (copied out of its staging);
    // Gloo's direct exchange receives straight into the rows. ZeRO-3 gathers a bucket; ZeRO-2
    // after the step as many as the staging buffers hold.
    if (cluster.device.accelerator) {
      o.zero_gather_bytes = std::max(o.zero_gather_bytes, program.zero_stage() >= 3 ? buffer_bytes : set.staging_buffers * buffer_bytes);
    }
  }
  return o;
}

// Seconds of `program`'s collectives in a step of its passes. Under ZeRO 0-1 the gradients of
// parameters read only through GRAD_SYNC chains are reduced once, after the last pass (the
// runtime defers them); everything else every pass.
absl::StatusOr<double> StepCommunicationSeconds(const v1::RankProgram& program, const Cluster& cluster) {
  auto comm = CommunicationSeconds(program, cluster);
  if (!comm.ok()) return comm.status();
  const double passes = static_cast<double>(std::max<int64_t>(1, program.micro_batches()));
  double once = 0;
  if (passes > 1 && program.zero_stage() <= 1) {
    for (const ZeroParam& z : GradSyncChains(program)) {
      for (const v1::Shard& s : program.parameters()) {
        if (s.name() != z.name) continue;
        const int64_t bytes = TensorType::FromProto(s.local_type()).NumBytes();
        for (int a : z.axes) once += CollectiveSeconds(CollectiveKind::kAllReduce, bytes, cluster.mesh[a], cluster.links[a]);
      }
    }
  }
  return passes * *comm - (passes - 1) * once;
}

// One program's memory as its passes see it, and its time.
struct ProgramProfile {
  int64_t first_peak = 0;   // a pass's peak with nothing else in flight and no gradient made yet
  int64_t later_peak = 0;   // the same once the gradients accumulate (every pass's, for one pass)
  int64_t kept = 0;         // what a pass in flight keeps for its backward
  int64_t held = 0;         // between passes: parameters, buffers and optimizer states
  int64_t gradients = 0;    // between passes, once the first backward made them
  RankPrediction time;      // compute and communication of a step
};

// `first_pass`: profile the first pass too (a pipeline rank's schedule reaches it with passes in
// flight); otherwise first_peak is later_peak.
absl::StatusOr<ProgramProfile> ProfileProgram(const Graph& global, const v1::RankProgram& program, const Cluster& cluster,
                                              const ProfileOptions& profile, bool first_pass) {
  auto local = LocalGraph(global, program);
  if (!local.ok()) return local.status();
  const ProfileOptions o = ProgramProfileOptions(program, cluster, profile);
  auto later = ProfileTrainingStep(*local, o);
  if (!later.ok()) return later.status();
  ProgramProfile p;
  p.later_peak = p.first_peak = later->predicted_peak_bytes;
  if (first_pass && o.gradients_accumulated) {
    ProfileOptions first = o;
    first.gradients_accumulated = false;
    auto first_pass = ProfileTrainingStep(*local, first);
    if (!first_pass.ok()) return first_pass.status();
    p.first_peak = first_pass->predicted_peak_bytes;
  }
  p.kept = later->kept_per_pass_bytes;
  p.held = later->peak_breakdown.parameters + later->peak_breakdown.optimizer_states;
  p.gradients = later->peak_breakdown.gradients;
  auto comm = StepCommunicationSeconds(program, cluster);
  if (!comm.ok()) return comm.status();
  const double passes = static_cast<double>(std::max<int64_t>(1, program.micro_batches()));
  p.time.compute_seconds = passes * (later->forward_seconds + later->backward_seconds) + later->optimizer_seconds;
  p.time.communication_seconds = *comm;
  p.time.peak_bytes = p.later_peak;
  return p;
}

}  // namespace

absl::StatusOr<RankPrediction> PredictRank(const Graph& global, const v1::RankProgram& program, const Cluster& cluster,
                                           const ProfileOptions& profile) {
  if (program.pipeline().stages() > 1) return PredictPipelineRank({{&global, &program}}, cluster, profile);
  auto p = ProfileProgram(global, program, cluster, profile, /*first_pass=*/false);
  if (!p.ok()) return p.status();
  return p->time;
}

absl::StatusOr<RankPrediction> PredictPipelineRank(const std::vector<ChunkToPredict>& chunks, const Cluster& cluster,
                                                   const ProfileOptions& profile) {
  if (chunks.empty()) return absl::InvalidArgumentError("a pipeline rank of no chunks");
  const v1::PipelineRole& role = chunks.front().program->pipeline();
  const int64_t m = std::max<int64_t>(1, chunks.front().program->micro_batches());
  const int v = static_cast<int>(chunks.size());
  if (std::max(1, role.chunks()) != v || role.stages() < 2) {
    return absl::InvalidArgumentError(absl::StrCat("stage ", role.stage(), "'s rank has ", v, " chunk program(s) for a pipeline of ",
                                                   role.stages(), " stages x ", std::max(1, role.chunks()), " chunks"));
  }
  std::vector<ProgramProfile> profiles;
  RankPrediction out;
  for (const ChunkToPredict& c : chunks) {
    auto p = ProfileProgram(*c.graph, *c.program, cluster, profile, /*first_pass=*/true);
    if (!p.ok()) return absl::Status(p.status().code(), absl::StrCat("chunk ", c.program->pipeline().chunk(), ": ", p.status().message()));
    out.compute_seconds += p->time.compute_seconds;
    out.communication_seconds += p->time.communication_seconds;
    profiles.push_back(*std::move(p));
  }
  // The schedule's passes in order: at each, the pass's own peak, with what its chunk's earlier
  // passes awaiting their backward keep, and what the other chunks hold (their state, their
  // gradients once made, their passes in flight).
  std::vector<int64_t> in_flight(v, 0);
  std::vector<bool> made_gradients(v, false);
  for (const PassAction& a : InterleavedSchedule(role.stage(), role.stages(), v, m)) {
    if (!a.forward) --in_flight[a.chunk];
    int64_t live = made_gradients[a.chunk] ? profiles[a.chunk].later_peak : profiles[a.chunk].first_peak;
    for (int c = 0; c < v; ++c) {
      live += in_flight[c] * profiles[c].kept;
      if (c != a.chunk) live += profiles[c].held + (made_gradients[c] ? profiles[c].gradients : 0);
    }
    out.peak_bytes = std::max(out.peak_bytes, live);
    if (a.forward) ++in_flight[a.chunk];
    if (!a.forward) made_gradients[a.chunk] = true;
  }
  return out;
}

}  // namespace mapd

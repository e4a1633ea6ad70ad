#include "planner/lower/rank_cost.h"

#include <string>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "planner/lower/local_graph.h"
#include "planner/profile/profiler.h"
#include "planner/sharding/collectives.h"

namespace mapd {

absl::StatusOr<double> CommunicationSeconds(const v1::RankProgram& program, const Cluster& cluster) {
  // Bytes of every local tensor, in program order.
  std::unordered_map<std::string, int64_t> bytes;
  auto note = [&bytes](const std::string& name, const v1::TensorType& t) { bytes[name] = TensorType::FromProto(t).NumBytes(); };
  for (const auto& s : program.parameters()) note(s.name(), s.local_type());
  for (const auto& s : program.inputs()) note(s.name(), s.local_type());
  double seconds = 0;
  for (const v1::Instruction& ins : program.instructions()) {
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
    if (step.axis() < 0 || step.axis() >= cluster.num_axes()) {
      return absl::InvalidArgumentError(absl::StrCat("communicate step '", step.output(), "' is on axis ", step.axis(),
                                                     "; the mesh ", cluster.MeshString(), " has ", cluster.num_axes()));
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
      case v1::Communicate::SLICE:
        seconds += CollectiveSeconds(CollectiveKind::kAllGather, in_bytes, n, link);
        break;
      case v1::Communicate::GRAD_SYNC:
        seconds += CollectiveSeconds(CollectiveKind::kAllReduce, in_bytes, n, link);
        break;
      default:
        break;
    }
  }
  return seconds;
}

absl::StatusOr<RankPrediction> PredictRank(const Graph& global, const v1::RankProgram& program, const Cluster& cluster,
                                           const ProfileOptions& profile) {
  auto local = LocalGraph(global, program);
  if (!local.ok()) return local.status();
  ProfileOptions o = profile;
  o.device = cluster.device;
  auto report = ProfileTrainingStep(*local, o);
  if (!report.ok()) return report.status();
  auto comm = CommunicationSeconds(program, cluster);
  if (!comm.ok()) return comm.status();
  RankPrediction p;
  p.peak_bytes = report->predicted_peak_bytes;
  p.compute_seconds = report->predicted_step_seconds();
  p.communication_seconds = *comm;
  return p;
}

}  // namespace mapd

#include "planner/lower/pipeline_lowering.h"

#include <map>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "planner/lower/collective_order.h"
#include "planner/lower/lowering.h"
#include "planner/lower/rank_cost.h"
#include "planner/lower/recompute.h"
#include "planner/lower/zero.h"
#include "planner/plan/micro_batch.h"
#include "planner/plan/stages.h"
#include "planner/sharding/cluster.h"

namespace mapd {

namespace {

// Who sends what to whom: the stage defining each sent value, the stages reading it, and one tag
// per (value, reading stage) that both ends use.
struct Transfers {
  std::map<std::string, int> producer;                   // value → the stage whose output it is
  std::map<std::pair<std::string, int>, int> tag;        // (value, reading stage) → tag
  std::map<std::string, std::vector<int>> consumers;     // value → the stages reading it, in order
};

absl::StatusOr<Transfers> FindTransfers(const std::vector<StageToLower>& stages) {
  Transfers t;
  for (size_t s = 0; s + 1 < stages.size(); ++s) {
    for (const std::string& out : stages[s].graph->proto().outputs()) t.producer.emplace(out, static_cast<int>(s));
  }
  int next = 0;
  for (size_t s = 0; s < stages.size(); ++s) {
    for (const auto& in : stages[s].graph->proto().inputs()) {
      auto it = t.producer.find(in.name());
      if (it == t.producer.end()) continue;  // data: every stage reads it from the batch
      if (it->second >= static_cast<int>(s)) {
        return absl::InternalError(absl::StrCat("stage ", s, " reads '", in.name(), "', which stage ", it->second, " makes"));
      }
      t.tag[{in.name(), static_cast<int>(s)}] = next++;
      t.consumers[in.name()].push_back(static_cast<int>(s));
    }
  }
  return t;
}

const v1::Shard* FindShard(const google::protobuf::RepeatedPtrField<v1::Shard>& shards, const std::string& name) {
  for (const v1::Shard& s : shards) {
    if (s.name() == name) return &s;
  }
  return nullptr;
}

// Do two stages' programs hold the tied weight `name` alike (the same block, the same ZeRO shard)?
bool SameLayout(const std::string& name, const v1::RankProgram& a, const v1::RankProgram& b) {
  const v1::Shard* sa = FindShard(a.parameters(), name);
  const v1::Shard* sb = FindShard(b.parameters(), name);
  if (sa == nullptr || sb == nullptr) return false;
  auto zero = [&](const v1::RankProgram& p) -> std::string {
    for (const ZeroParam& z : ZeroParams(p)) {
      if (z.name == name) return absl::StrCat(z.ranks, "/", z.index, "/", z.chunk);
    }
    return "";
  };
  return sa->placement() == sb->placement() && sa->offsets().SerializeAsString() == sb->offsets().SerializeAsString() &&
         sa->local_type().SerializeAsString() == sb->local_type().SerializeAsString() && zero(a) == zero(b);
}

// The weights stages share, each with its two stages (a weight held by more than two is refused).
absl::StatusOr<std::map<std::string, std::pair<int, int>>> TiedWeights(const std::vector<StageToLower>& stages) {
  std::map<std::string, std::vector<int>> holders;
  for (size_t s = 0; s < stages.size(); ++s) {
    for (const auto& p : stages[s].graph->proto().parameters()) {
      if (p.trainable()) holders[p.name()].push_back(static_cast<int>(s));  // buffers (rotary tables) are not updated
    }
  }
  std::map<std::string, std::pair<int, int>> tied;
  for (const auto& [name, at] : holders) {
    if (at.size() == 1) continue;
    if (at.size() > 2) {
      return absl::UnimplementedError(absl::StrCat("the weight '", name, "' is read by ", at.size(),
                                                   " pipeline stages; a weight shared by more than two stages is not built yet"));
    }
    tied[name] = {at[0], at[1]};
  }
  return tied;
}

}  // namespace

absl::StatusOr<LoweredPlan> LowerPipelineAndPredict(const std::vector<StageToLower>& stages, const std::vector<int64_t>& stage_mesh,
                                                    int64_t micro_batches, const std::string& device_type, const ProfileOptions& profile) {
  const int p = static_cast<int>(stages.size());
  if (p < 2) return absl::InvalidArgumentError(absl::StrCat("a pipeline of ", p, " stage(s): lower it as a whole model"));
  if (micro_batches < 1) return absl::InvalidArgumentError(absl::StrCat(micro_batches, " micro-batches"));
  int stage_ranks = 1;
  for (int64_t d : stage_mesh) stage_ranks *= static_cast<int>(d);
  auto transfers = FindTransfers(stages);
  if (!transfers.ok()) return transfers.status();
  auto tied = TiedWeights(stages);
  if (!tied.ok()) return tied.status();
  ClusterOptions co;
  co.mesh = stage_mesh;
  co.device_type = device_type;
  auto cluster = MakeCluster(co);
  if (!cluster.ok()) return cluster.status();
  ProfileOptions po = profile;
  po.timeline = false;

  std::vector<std::vector<v1::RankProgram>> programs(p);
  LoweredPlan out;
  for (int s = 0; s < p; ++s) {
    const StageToLower& stage = stages[s];
    std::optional<Graph> micro;
    if (micro_batches > 1) {
      auto g = MicroBatchGraph(*stage.graph, micro_batches);
      if (!g.ok()) return g.status();
      micro = *std::move(g);
    }
    const Graph& lowered = micro ? *micro : *stage.graph;
    for (int r = 0; r < stage_ranks; ++r) {
      // Received activations held as their sender (rank r of the producing stage) holds them.
      LowerOptions lo;
      lo.zero_stage = stage.zero_stage;
      for (const auto& in : lowered.proto().inputs()) {
        auto it = transfers->producer.find(in.name());
        if (it == transfers->producer.end()) continue;
        const v1::Shard* sent = FindShard(programs[it->second][r].outputs(), in.name());
        if (sent == nullptr) return absl::InternalError(absl::StrCat("stage ", it->second, " does not output '", in.name(), "'"));
        auto held = ParsePlacement(sent->placement());
        if (!held.ok()) return held.status();
        lo.held_inputs[in.name()] = *held;
      }
      auto program = LowerForRank(lowered, stage_mesh, stage.strategies, r, lo);
      if (!program.ok()) return absl::Status(program.status().code(), absl::StrCat("stage ", s, ": ", program.status().message()));
      if (micro_batches > 1) program->set_micro_batches(micro_batches);
      if (!stage.recompute.empty()) {
        if (auto st = MarkRecompute(lowered, stage.recompute, &*program); !st.ok()) return st;
      }
      if (s + 1 < p) {  // only the last stage computes the loss
        program->clear_loss();
        program->clear_loss_partial_axes();
      }
      v1::PipelineRole* role = program->mutable_pipeline();
      role->set_stage(s);
      role->set_stages(p);
      role->set_first_layer(stage.first_layer);
      role->set_end_layer(stage.end_layer);
      role->set_stage_ranks(stage_ranks);
      role->set_schedule("1F1B");
      role->set_stage_graph_nodes(stage.graph->num_nodes());
      for (const auto& in : lowered.proto().inputs()) {
        auto it = transfers->producer.find(in.name());
        if (it == transfers->producer.end()) continue;
        const v1::Shard* mine = FindShard(program->inputs(), in.name());
        const v1::Shard* sent = FindShard(programs[it->second][r].outputs(), in.name());
        if (mine == nullptr || mine->local_type().SerializeAsString() != sent->local_type().SerializeAsString()) {
          return absl::InternalError(absl::StrCat("stage ", s, " rank ", r, " receives '", in.name(), "' in another shape than stage ",
                                                  it->second, " sends it"));
        }
        v1::StageTransfer* t = role->add_receives();
        t->set_value(in.name());
        t->set_peer_stage(it->second);
        t->set_tag(transfers->tag.at({in.name(), s}));
        t->set_gradient(in.role() == kActivationRole);
      }
      if (s + 1 < p) {
        for (const std::string& value : lowered.proto().outputs()) {
          for (int consumer : transfers->consumers[value]) {
            const Graph& reader = *stages[consumer].graph;
            bool gradient = false;
            for (const auto& in : reader.proto().inputs()) gradient |= in.name() == value && in.role() == kActivationRole;
            v1::StageTransfer* t = role->add_sends();
            t->set_value(value);
            t->set_peer_stage(consumer);
            t->set_tag(transfers->tag.at({value, consumer}));
            t->set_gradient(gradient);
          }
        }
      }
      for (const auto& [name, pair] : *tied) {
        if (pair.first != s && pair.second != s) continue;
        v1::TiedParameter* t = role->add_tied();
        t->set_name(name);
        t->set_peer_stage(pair.first == s ? pair.second : pair.first);
      }
      auto predicted = PredictRank(lowered, *program, *cluster, po);
      if (!predicted.ok()) return absl::Status(predicted.status().code(), absl::StrCat("stage ", s, ": ", predicted.status().message()));
      out.predicted.push_back(*predicted);
      programs[s].push_back(*std::move(program));
    }
    // Within a stage every group's ranks issue the same collectives in the same order.
    if (auto st = VerifyCollectiveOrder(programs[s], stage_mesh); !st.ok()) return st;
  }
  for (const auto& [name, pair] : *tied) {
    for (int r = 0; r < stage_ranks; ++r) {
      v1::RankProgram& a = programs[pair.first][r];
      v1::RankProgram& b = programs[pair.second][r];
      const bool same = SameLayout(name, a, b);
      for (v1::RankProgram* p : {&a, &b}) {
        for (v1::TiedParameter& t : *p->mutable_pipeline()->mutable_tied()) {
          if (t.name() == name) t.set_same_layout(same);
        }
      }
    }
  }
  for (auto& stage : programs) {
    for (auto& program : stage) out.programs.push_back(std::move(program));
  }
  return out;
}

}  // namespace mapd

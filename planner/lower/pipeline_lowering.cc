#include "planner/lower/pipeline_lowering.h"

#include <map>
#include <memory>
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

// Lowers the stages in order (a stage's received activations take the placement its sender's
// program gives them), rank by rank.
class PipelineLowerer {
 public:
  PipelineLowerer(const std::vector<StageToLower>& stages, const std::vector<int64_t>& stage_mesh, int64_t micro_batches, int chunks,
                  Transfers transfers, std::map<std::string, std::pair<int, int>> tied, Cluster cluster, ProfileOptions profile)
      : stages_(stages), mesh_(stage_mesh), micro_batches_(micro_batches), chunks_(chunks), devices_(static_cast<int>(stages.size()) / chunks),
        transfers_(std::move(transfers)), tied_(std::move(tied)), cluster_(std::move(cluster)), profile_(std::move(profile)),
        programs_(stages.size()) {
    for (int64_t d : stage_mesh) stage_ranks_ *= static_cast<int>(d);
  }

  absl::StatusOr<LoweredPlan> Run() {
    std::vector<std::shared_ptr<const Graph>> lowered(stages_.size());  // per model chunk: the graph lowered
    for (int s = 0; s < static_cast<int>(stages_.size()); ++s) {
      lowered[s] = stages_[s].graph;
      if (micro_batches_ > 1) {
        auto g = MicroBatchGraph(*stages_[s].graph, micro_batches_);
        if (!g.ok()) return g.status();
        lowered[s] = std::make_shared<const Graph>(*std::move(g));
      }
      for (int r = 0; r < stage_ranks_; ++r) {
        auto program = LowerRank(s, r, *lowered[s]);
        if (!program.ok()) return absl::Status(program.status().code(), absl::StrCat(Chunk(s), ": ", program.status().message()));
        programs_[s].push_back(*std::move(program));
      }
      // Within a stage every group's ranks issue the same collectives in the same order.
      if (auto st = VerifyCollectiveOrder(programs_[s], mesh_); !st.ok()) return st;
    }
    MarkTiedLayouts();
    // Device stage d's rank r runs model chunks d, d + p, …: chunk 0's program, the later ones in it.
    LoweredPlan out;
    for (int d = 0; d < devices_; ++d) {
      for (int r = 0; r < stage_ranks_; ++r) {
        std::vector<ChunkToPredict> chunks;
        for (int v = 0; v < chunks_; ++v) chunks.push_back({lowered[v * devices_ + d].get(), &programs_[v * devices_ + d][r]});
        auto predicted = PredictPipelineRank(chunks, cluster_, profile_);
        if (!predicted.ok()) return absl::Status(predicted.status().code(), absl::StrCat("stage ", d, ": ", predicted.status().message()));
        out.predicted.push_back(*predicted);
        v1::RankProgram program = std::move(programs_[d][r]);
        for (int v = 1; v < chunks_; ++v) *program.add_later_chunks() = std::move(programs_[v * devices_ + d][r]);
        out.programs.push_back(std::move(program));
      }
    }
    return out;
  }

 private:
  // Rank r of stage s: its program, lowered with its received activations held as sent.
  absl::StatusOr<v1::RankProgram> LowerRank(int s, int r, const Graph& lowered) {
    const StageToLower& stage = stages_[s];
    LowerOptions lo;
    lo.zero_stage = stage.zero_stage;
    for (const auto& in : lowered.proto().inputs()) {
      auto sent = SentShard(in.name(), r);
      if (!sent.ok()) return sent.status();
      if (*sent == nullptr) continue;
      auto held = ParsePlacement((*sent)->placement());
      if (!held.ok()) return held.status();
      lo.held_inputs[in.name()] = *held;
    }
    auto program = LowerForRank(lowered, mesh_, stage.strategies, r, lo);
    if (!program.ok()) return program.status();
    if (micro_batches_ > 1) program->set_micro_batches(micro_batches_);
    if (!stage.recompute.empty()) {
      if (auto st = MarkRecompute(lowered, stage.recompute, &*program); !st.ok()) return st;
    }
    if (s + 1 < static_cast<int>(stages_.size())) {  // only the last stage computes the loss
      program->clear_loss();
      program->clear_loss_partial_axes();
    }
    if (auto st = SetRole(s, r, lowered, *program); !st.ok()) return st;
    return program;
  }

  // How the producing stage's rank r holds `value` (nullptr: no stage sends it, it is data).
  absl::StatusOr<const v1::Shard*> SentShard(const std::string& value, int r) const {
    auto it = transfers_.producer.find(value);
    if (it == transfers_.producer.end()) return nullptr;
    const v1::Shard* sent = FindShard(programs_[it->second][r].outputs(), value);
    if (sent == nullptr) return absl::InternalError(absl::StrCat("stage ", it->second, " does not output '", value, "'"));
    return sent;
  }

  // "stage 1", or interleaved "stage 1's chunk 0".
  std::string Chunk(int s) const {
    return chunks_ > 1 ? absl::StrCat("stage ", s % devices_, "'s chunk ", s / devices_) : absl::StrCat("stage ", s);
  }

  absl::Status SetRole(int s, int r, const Graph& lowered, v1::RankProgram& program) const {
    const int p = static_cast<int>(stages_.size());
    v1::PipelineRole* role = program.mutable_pipeline();
    role->set_stage(s % devices_);
    role->set_stages(devices_);
    if (chunks_ > 1) {
      role->set_chunk(s / devices_);
      role->set_chunks(chunks_);
    }
    role->set_first_layer(stages_[s].first_layer);
    role->set_end_layer(stages_[s].end_layer);
    role->set_stage_ranks(stage_ranks_);
    role->set_schedule(chunks_ > 1 ? "interleaved 1F1B" : "1F1B");
    role->set_stage_graph_nodes(stages_[s].graph->num_nodes());
    for (const auto& in : lowered.proto().inputs()) {
      auto sent = SentShard(in.name(), r);
      if (!sent.ok()) return sent.status();
      if (*sent == nullptr) continue;
      const v1::Shard* mine = FindShard(program.inputs(), in.name());
      const int from = transfers_.producer.at(in.name());
      if (mine == nullptr || mine->local_type().SerializeAsString() != (*sent)->local_type().SerializeAsString()) {
        return absl::InternalError(absl::StrCat(Chunk(s), " rank ", r, " receives '", in.name(), "' in another shape than ", Chunk(from),
                                                " sends it"));
      }
      AddTransfer(role->add_receives(), in.name(), from % devices_, transfers_.tag.at({in.name(), s}), in.role() == kActivationRole);
    }
    for (const std::string& value : lowered.proto().outputs()) {
      auto consumers = transfers_.consumers.find(value);
      if (s + 1 == p || consumers == transfers_.consumers.end()) continue;  // the last stage's are the loss
      for (int consumer : consumers->second) {
        bool gradient = false;
        for (const auto& in : stages_[consumer].graph->proto().inputs()) gradient |= in.name() == value && in.role() == kActivationRole;
        AddTransfer(role->add_sends(), value, consumer % devices_, transfers_.tag.at({value, consumer}), gradient);
      }
    }
    int tag = 0;
    for (const auto& [name, pair] : tied_) {
      const int this_tag = tag++;
      if (pair.first != s && pair.second != s) continue;
      v1::TiedParameter* t = role->add_tied();
      t->set_name(name);
      t->set_tag(this_tag);
      t->set_peer_stage((pair.first == s ? pair.second : pair.first) % devices_);
    }
    return absl::OkStatus();
  }

  static void AddTransfer(v1::StageTransfer* t, const std::string& value, int peer, int tag, bool gradient) {
    t->set_value(value);
    t->set_peer_stage(peer);
    t->set_tag(tag);
    t->set_gradient(gradient);
  }

  // Each tied weight's two ends: block against block when every rank's two programs hold it alike.
  void MarkTiedLayouts() {
    for (const auto& [name, pair] : tied_) {
      for (int r = 0; r < stage_ranks_; ++r) {
        v1::RankProgram& a = programs_[pair.first][r];
        v1::RankProgram& b = programs_[pair.second][r];
        const bool same = SameLayout(name, a, b);
        for (v1::RankProgram* p : {&a, &b}) {
          for (v1::TiedParameter& t : *p->mutable_pipeline()->mutable_tied()) {
            if (t.name() == name) t.set_same_layout(same);
          }
        }
      }
    }
  }

  const std::vector<StageToLower>& stages_;  // the model's chunks, in order (p·V)
  const std::vector<int64_t>& mesh_;
  const int64_t micro_batches_;
  const int chunks_;   // V: chunks a device
  const int devices_;  // p: device stages
  const Transfers transfers_;
  const std::map<std::string, std::pair<int, int>> tied_;
  const Cluster cluster_;
  const ProfileOptions profile_;
  int stage_ranks_ = 1;
  std::vector<std::vector<v1::RankProgram>> programs_;  // per model chunk, per rank
};

}  // namespace

absl::StatusOr<LoweredPlan> LowerPipelineAndPredict(const std::vector<StageToLower>& stages, const std::vector<int64_t>& stage_mesh,
                                                    int64_t micro_batches, int chunks, const std::string& device_type,
                                                    const ProfileOptions& profile) {
  if (chunks < 1 || stages.size() % chunks != 0) {
    return absl::InvalidArgumentError(absl::StrCat(stages.size(), " chunks of layers do not make ", chunks, " a device"));
  }
  const int p = static_cast<int>(stages.size()) / chunks;
  if (p < 2) return absl::InvalidArgumentError(absl::StrCat("a pipeline of ", p, " stage(s): lower it as a whole model"));
  if (micro_batches < 1) return absl::InvalidArgumentError(absl::StrCat(micro_batches, " micro-batches"));
  auto transfers = FindTransfers(stages);
  if (!transfers.ok()) return transfers.status();
  auto tied = TiedWeights(stages);
  if (!tied.ok()) return tied.status();
  for (const auto& [name, pair] : *tied) {
    if (pair.first % p == pair.second % p) {
      return absl::UnimplementedError(absl::StrCat("the weight '", name, "' is shared by chunks ", pair.first, " and ", pair.second,
                                                   ", which interleaving puts on the same device stage; a weight shared within a device "
                                                   "is not built yet: pin another schedule=interleaved:V or schedule=1f1b"));
    }
  }
  ClusterOptions co;
  co.mesh = stage_mesh;
  co.device_type = device_type;
  co.host_ranks = static_cast<int64_t>(stages.size()) / std::max(1, chunks);  // every device stage's ranks share the nodes
  for (int64_t d : stage_mesh) co.host_ranks *= d;
  auto cluster = MakeCluster(co);
  if (!cluster.ok()) return cluster.status();
  ProfileOptions po = profile;
  po.timeline = false;
  return PipelineLowerer(stages, stage_mesh, micro_batches, chunks, *std::move(transfers), *std::move(tied), *std::move(cluster), po).Run();
}

}  // namespace mapd

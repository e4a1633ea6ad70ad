// RankTrainer's checkpoints and resharding: Save (this rank's blocks, buffers and optimizer
// slots, each with where it sits in the whole tensor), Restore under the same program,
// RestoreWhole (a checkpoint written under any plan, gathered whole, taken block by block: a
// resume under another plan), and the blocks read out whole where ZeRO-3 freed them.
#include <ATen/ATen.h>

#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "worker/rank/collectives.h"
#include "worker/rank/rank_trainer.h"
#include "worker/rank/rank_trainer_internal.h"
#include "worker/runtime/parameters.h"

namespace mapd {

using rank_trainer_internal::Narrow;

namespace {

// Where `shard`'s block sits in the whole parameter (and, for a ZeRO shard `z`, where the flat
// shard sits in the block), so that a checkpoint is read without the plan.
v1::BlockPlace PlaceOf(const v1::Parameter& p, const v1::Shard& shard, const ZeroParam* z) {
  v1::BlockPlace place;
  *place.mutable_global_shape() = p.type().shape();
  *place.mutable_start() = shard.offsets().start();
  *place.mutable_block_shape() = shard.local_type().shape();
  *place.mutable_aliases() = p.aliases();
  place.set_kind(p.kind());
  if (z != nullptr) {
    place.set_flat_shard(true);
    place.set_flat_start(z->index * z->chunk);
  }
  return place;
}

}  // namespace

absl::StatusOr<v1::RankCheckpoint> RankTrainer::Save() const {
  v1::RankCheckpoint c;
  c.set_rank(program_.rank());
  c.set_step(steps_);
  std::unordered_map<std::string, size_t> trainable_index;
  for (size_t i = 0; i < trainable_.size(); ++i) trainable_index[trainable_[i].first] = i;
  std::unordered_map<std::string, const v1::Shard*> shard_of;
  for (const v1::Shard& shard : program_.parameters()) {
    shard_of[shard.name()] = &shard;
    const v1::Parameter* p = graph_.FindParameter(shard.name());
    if (p == nullptr) return absl::InternalError(absl::StrCat("the program's parameter '", shard.name(), "' is not in the graph"));
    auto it = trainable_index.find(shard.name());
    absl::StatusOr<at::Tensor> block = it == trainable_index.end() ? leaves_.at(shard.name()) : ReadableBlock(it->second);
    if (!block.ok()) return block.status();
    v1::TensorData* d = c.add_parameters();
    *d = TensorToProto(shard.name(), *block);
    *d->mutable_place() = PlaceOf(*p, shard, nullptr);
  }
  for (const auto& s : optimizer_->State()) {
    v1::OptimizerSlot* slot = c.add_optimizer();
    slot->set_name(s.name);
    slot->set_steps(s.steps);
    const auto index = trainable_index.find(s.name);
    const auto shard = shard_of.find(s.name);
    if (index == trainable_index.end() || shard == shard_of.end()) {
      return absl::InternalError(absl::StrCat("the optimizer's '", s.name, "' is no parameter this rank holds"));
    }
    const int zero = zero_of_[index->second];
    const v1::BlockPlace place = PlaceOf(*graph_.FindParameter(s.name), *shard->second, zero >= 0 ? &zero_[zero] : nullptr);
    auto save = [&](const at::Tensor& t, v1::TensorData* d) {
      *d = TensorToProto(s.name, t);
      *d->mutable_place() = place;
    };
    if (s.buf1.defined()) save(s.buf1, slot->mutable_buf1());
    if (s.buf2.defined()) save(s.buf2, slot->mutable_buf2());
    if (s.master.defined()) save(s.master, slot->mutable_master());
  }
  c.set_optimizer_steps(optimizer_->steps());
  return c;
}

absl::StatusOr<at::Tensor> RankTrainer::ReadableBlock(size_t i) const {
  const at::Tensor& block = trainable_[i].second;
  if (program_.zero_stage() < 3 || zero_of_[i] < 0) return block.detach().clone();
  return GatherShards(updated_[i].second, zero_[zero_of_[i]], groups_, block.sizes());
}

absl::StatusOr<std::vector<std::pair<std::string, at::Tensor>>> RankTrainer::Blocks() const {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (size_t i = 0; i < trainable_.size(); ++i) {
    auto block = ReadableBlock(i);
    if (!block.ok()) return block.status();
    out.emplace_back(trainable_[i].first, *std::move(block));
  }
  return out;
}

absl::Status RankTrainer::Restore(const v1::RankCheckpoint& c) {
  if (c.rank() != program_.rank()) {
    return absl::InvalidArgumentError(absl::StrCat("the checkpoint is rank ", c.rank(), "'s, not rank ", program_.rank(), "'s"));
  }
  at::NoGradGuard no_grad;
  std::unordered_map<std::string, at::Tensor> restored;
  for (const v1::TensorData& d : c.parameters()) {
    auto it = leaves_.find(d.name());
    if (it == leaves_.end()) return absl::InvalidArgumentError(absl::StrCat("the checkpoint has '", d.name(), "', which this program does not"));
    auto t = TensorFromProto(d);
    if (!t.ok()) return t.status();
    if (!t->sizes().equals(it->second.sizes())) {
      return absl::InvalidArgumentError(absl::StrCat("checkpoint block of '", d.name(), "' is ", DescribeTensor(*t), "; this rank holds ",
                                                     DescribeTensor(it->second), " (another model or plan?)"));
    }
    restored[d.name()] = *t;
    if (BlockGathered(it->second)) it->second.copy_(*t);  // a ZeRO-3 block has no storage to write
  }
  std::vector<Optimizer::ParamState> state;
  for (const v1::OptimizerSlot& s : c.optimizer()) {
    Optimizer::ParamState p;
    p.name = s.name();
    p.steps = s.steps();
    if (s.has_buf1()) {
      auto t = TensorFromProto(s.buf1());
      if (!t.ok()) return t.status();
      p.buf1 = *t;
    }
    if (s.has_buf2()) {
      auto t = TensorFromProto(s.buf2());
      if (!t.ok()) return t.status();
      p.buf2 = *t;
    }
    if (s.has_master()) {
      auto t = TensorFromProto(s.master());
      if (!t.ok()) return t.status();
      p.master = *t;
    }
    state.push_back(std::move(p));
  }
  // ZeRO's shards from the restored blocks, then the optimizer (a master without a saved one is
  // taken from what it updates).
  for (size_t i = 0; i < trainable_.size(); ++i) {
    auto it = restored.find(trainable_[i].first);
    if (zero_of_[i] >= 0 && it != restored.end()) updated_[i].second.copy_(FlatShard(it->second, zero_[zero_of_[i]]));
  }
  for (auto& buckets : zero_buckets_) {
    if (auto st = buckets->ShardsChanged(); !st.ok()) return st;
  }
  if (auto st = optimizer_->Restore(state, c.optimizer_steps()); !st.ok()) return st;
  steps_ = c.step();
  return absl::OkStatus();
}

absl::Status RankTrainer::RestoreWhole(const v1::RankCheckpoint& whole) {
  std::unordered_map<std::string, const v1::TensorData*> tensors;  // by name and tied name
  for (const v1::TensorData& d : whole.parameters()) {
    tensors[d.name()] = &d;
    for (const std::string& alias : d.place().aliases()) tensors[alias] = &d;
  }
  std::unordered_map<std::string, const v1::OptimizerSlot*> slots;
  for (const v1::OptimizerSlot& s : whole.optimizer()) slots[s.name()] = &s;
  std::unordered_map<std::string, size_t> trainable_index;
  for (size_t i = 0; i < trainable_.size(); ++i) trainable_index[trainable_[i].first] = i;
  v1::RankCheckpoint mine;
  mine.set_rank(program_.rank());
  mine.set_step(whole.step());
  mine.set_optimizer_steps(whole.optimizer_steps());
  for (const v1::Shard& shard : program_.parameters()) {
    const v1::Parameter* p = graph_.FindParameter(shard.name());
    auto it = tensors.find(shard.name());
    if (p == nullptr || it == tensors.end()) {
      return absl::FailedPreconditionError(absl::StrCat("the checkpoint has no '", shard.name(), "' (was it written by another model?)"));
    }
    const std::vector<int64_t> start(shard.offsets().start().begin(), shard.offsets().start().end());
    const std::vector<int64_t> shape(shard.local_type().shape().begin(), shard.local_type().shape().end());
    // This rank's block of a whole tensor, or (`zero`) its flat shard of that block.
    auto block_of = [&](const v1::TensorData& d, const ZeroParam* zero) -> absl::StatusOr<at::Tensor> {
      auto t = TensorFromProto(d);
      if (!t.ok()) return t.status();
      if (!std::equal(p->type().shape().begin(), p->type().shape().end(), t->sizes().begin(), t->sizes().end())) {
        return absl::FailedPreconditionError(absl::StrCat("the checkpoint's '", d.name(), "' is ", DescribeTensor(*t), "; the model's is [",
                                                          absl::StrJoin(p->type().shape(), ", "), "] (another model?)"));
      }
      at::Tensor block = Narrow(*t, start, shape).contiguous();
      return zero == nullptr ? block : FlatShard(block, *zero);
    };
    auto block = block_of(*it->second, nullptr);
    if (!block.ok()) return block.status();
    *mine.add_parameters() = TensorToProto(shard.name(), *block);
    const auto index = trainable_index.find(shard.name());
    const auto slot = slots.find(shard.name());
    if (index == trainable_index.end() || slot == slots.end()) continue;  // a buffer, or no step taken yet
    const int z = zero_of_[index->second];
    const ZeroParam* zero = z >= 0 ? &zero_[z] : nullptr;
    v1::OptimizerSlot* out = mine.add_optimizer();
    out->set_name(shard.name());
    out->set_steps(slot->second->steps());
    auto take = [&](const v1::TensorData& from, v1::TensorData* to) -> absl::Status {
      auto t = block_of(from, zero);
      if (!t.ok()) return t.status();
      *to = TensorToProto(shard.name(), *t);
      return absl::OkStatus();
    };
    const v1::OptimizerSlot& s = *slot->second;
    if (s.has_buf1()) MAPD_RETURN_IF_ERROR(take(s.buf1(), out->mutable_buf1()));
    if (s.has_buf2()) MAPD_RETURN_IF_ERROR(take(s.buf2(), out->mutable_buf2()));
    if (s.has_master()) MAPD_RETURN_IF_ERROR(take(s.master(), out->mutable_master()));
  }
  return Restore(mine);
}
}  // namespace mapd

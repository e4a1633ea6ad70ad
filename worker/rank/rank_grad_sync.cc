// RankTrainer's gradient sync: the steps of Create that lay it out (the ranks holding each
// block, for clipping's norm; ZeRO's shards and the GRAD_SYNCs they replace; ZeRO-3's gathers
// and frees; micro-batches' deferred reductions; data parallelism's and ZeRO's gradient buckets),
// then, after backward, the gradients reduced (buckets, deferred all-reduces, ZeRO-1's shards),
// read and set whole (a pipeline's tied weights), clipped over every shard and applied, ZeRO's
// blocks gathered back.
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "planner/lower/lowering.h"
#include "planner/sharding/placement.h"
#include "worker/rank/collectives.h"
#include "worker/rank/rank_trainer.h"

namespace mapd {

absl::Status RankTrainer::CountBlockCopies() {
  // Clipping's norm counts a block several ranks hold once: how many hold each.
  for (const auto& [name, tensor] : trainable_) {
    double copies = 1;  // ranks holding the same block: a replicated axis counts each once
    for (const v1::Shard& shard : program_.parameters()) {
      if (shard.name() != name) continue;
      auto placement = ParsePlacement(shard.placement());
      if (!placement.ok()) return placement.status();
      for (size_t a = 0; a < placement->size(); ++a) {
        if ((*placement)[a].kind == AxisPlacement::Kind::kReplicate) copies *= static_cast<double>(program_.mesh(a));
      }
    }
    copies_.push_back(copies);
  }
  return absl::OkStatus();
}

void RankTrainer::LayOutZero() {
  // ZeRO: the optimizer updates this rank's flat shard of each sharded parameter. Stage 1 keeps
  // the block as the autograd leaf (GRAD_SYNC all-reduces its gradient; the shard's part is
  // taken after backward); stage 2 makes the shard the leaf and the block a plain tensor read
  // through ZeroParameter, whose backward reduce-scatters (or hands the gradient to its bucket),
  // and its GRAD_SYNCs identities.
  identity_step_.assign(program_.instructions_size(), false);
  std::unordered_map<std::string, int> zero_index;
  for (ZeroParam& z : ZeroParams(program_)) {
    const v1::Parameter* p = graph_.FindParameter(z.name);
    if (p == nullptr || !p->trainable()) continue;
    zero_index[z.name] = static_cast<int>(zero_.size());
    zero_.push_back(std::move(z));
  }
  for (size_t i = 0; i < trainable_.size(); ++i) {
    auto& [name, block] = trainable_[i];
    auto it = zero_index.find(name);
    if (it == zero_index.end()) {
      zero_of_.push_back(-1);
      updated_.emplace_back(name, block);
      continue;
    }
    const ZeroParam& z = zero_[it->second];
    zero_of_.push_back(it->second);
    at::Tensor shard = FlatShard(block, z);
    copies_[i] /= static_cast<double>(z.ranks);  // the shard is this rank's alone among them
    if (program_.zero_stage() >= 2) {
      block.requires_grad_(false);
      shard.requires_grad_(true);
      for (int step : z.grad_syncs) {
        identity_step_[step] = true;
        const v1::Instruction& ins = program_.instructions(step);
        if (ins.communicate().input() == name) zero_step_param_[step] = static_cast<int>(i);
      }
    }
    if (program_.zero_stage() >= 3) FreeBlock(block);  // the shard is all this rank keeps
    updated_.emplace_back(name, shard);
  }
}

std::unordered_map<std::string, int> RankTrainer::MapZero3Reads() {
  // ZeRO-3: where each block is read (its GRAD_SYNC chain's outputs), and its last reader.
  free_after_.assign(program_.instructions_size(), {});
  reads_block_.assign(program_.instructions_size(), {});
  std::unordered_map<std::string, int> block_of_chain;  // ZeRO-3: a chain output → its trainable index
  if (program_.zero_stage() >= 3) {
    for (size_t i = 0; i < trainable_.size(); ++i) {
      if (zero_of_[i] < 0) continue;
      std::set<std::string> chain;
      for (int step : zero_[zero_of_[i]].grad_syncs) chain.insert(program_.instructions(step).communicate().output());
      for (const std::string& name : chain) block_of_chain[name] = static_cast<int>(i);
      int last = -1;
      for (int k = 0; k < program_.instructions_size(); ++k) {
        const v1::Instruction& ins = program_.instructions(k);
        bool reads = false;
        for (const std::string& r : InstructionReads(ins)) reads |= chain.count(r) > 0;
        if (!reads) continue;
        last = k;
        if (ins.has_compute()) reads_block_[k].push_back(static_cast<int>(i));
      }
      if (last >= 0) free_after_[last].push_back(static_cast<int>(i));
    }
  }
  return block_of_chain;
}

void RankTrainer::DeferMicroBatchReductions() {
  // Micro-batches under ZeRO 0-1: parameter gradients reduced once, after the passes.
  deferred_step_.assign(program_.instructions_size(), false);
  if (micro_batches_ > 1 && program_.zero_stage() <= 1) {
    std::unordered_map<std::string, int> trainable_index;
    for (size_t i = 0; i < trainable_.size(); ++i) trainable_index[trainable_[i].first] = static_cast<int>(i);
    for (const ZeroParam& z : GradSyncChains(program_)) {
      auto it = trainable_index.find(z.name);
      if (it == trainable_index.end()) continue;
      for (int step : z.grad_syncs) deferred_step_[step] = true;
      deferred_.emplace_back(it->second, z.axes);
    }
  }
}

absl::Status RankTrainer::MakeGradBuckets(int64_t bucket_bytes) {
  // Data parallelism over one axis or several under ZeRO 0-1, one pass a step: each parameter's
  // gradient goes to a bucket as backward makes it (grad_buckets.h); a chain's GRAD_SYNCs after
  // its first are identities (the bucket is summed over each of its axes).
  bucket_of_step_.assign(program_.instructions_size(), {-1, -1});
  if (bucket_bytes > 0) {
    std::unordered_map<std::string, int> trainable_index;
    for (size_t i = 0; i < trainable_.size(); ++i) trainable_index[trainable_[i].first] = static_cast<int>(i);
    // axes → (its first GRAD_SYNC instruction, trainable index)
    std::map<std::vector<int>, std::vector<std::pair<int, int>>> by_axes;
    for (const ZeroParam& z : BucketedGradSyncs(program_)) {
      auto it = trainable_index.find(z.name);
      if (it == trainable_index.end()) continue;
      by_axes[z.axes].emplace_back(z.grad_syncs[0], it->second);
      for (size_t k = 1; k < z.grad_syncs.size(); ++k) identity_step_[z.grad_syncs[k]] = true;
    }
    for (auto& [axes, params] : by_axes) {
      // The parameter used last in forward first: backward makes its gradient first.
      std::sort(params.rbegin(), params.rend());
      std::vector<at::Tensor> blocks;
      std::vector<int> owners;
      const int set = static_cast<int>(buckets_.size());
      for (size_t slot = 0; slot < params.size(); ++slot) {
        bucket_of_step_[params[slot].first] = {set, static_cast<int>(slot)};
        blocks.push_back(trainable_[params[slot].second].second);
        owners.push_back(params[slot].second);
      }
      try {  // the buckets are allocated here, under the rank's memory cap
        std::vector<Communicator*> groups;
        for (int axis : axes) groups.push_back(groups_.at(axis));
        buckets_.push_back(std::make_unique<GradBuckets>(std::move(groups), blocks, bucket_bytes));
      } catch (const std::exception& e) {
        return TorchError(absl::StatusCode::kResourceExhausted, absl::StrCat("gradient buckets on rank ", program_.rank()), e);
      }
      bucket_owners_.push_back(std::move(owners));
    }
  }
  return absl::OkStatus();
}

absl::Status RankTrainer::MakeZeroBuckets(int64_t bucket_bytes) {
  // ZeRO 2-3 over one axis: gradients reduced, and ZeRO-2's updated shards gathered back, a
  // bucket at a time (ZeroBuckets in grad_buckets.h).
  zero_bucket_of_.assign(trainable_.size(), {-1, -1});
  if (bucket_bytes > 0) {
    std::unordered_map<std::string, int> trainable_index;
    for (size_t i = 0; i < trainable_.size(); ++i) trainable_index[trainable_[i].first] = static_cast<int>(i);
    for (ZeroBucketSet& set : ZeroGradientBuckets(program_, bucket_bytes)) {
      std::vector<int> owners;
      for (const ZeroParam& z : set.params) {
        auto it = trainable_index.find(z.name);
        owners.push_back(it == trainable_index.end() || zero_of_[it->second] < 0 ? -1 : it->second);
      }
      if (owners.empty() || std::count(owners.begin(), owners.end(), -1) > 0) continue;  // not all trainable: unbucketed
      const int index = static_cast<int>(zero_buckets_.size());
      for (size_t slot = 0; slot < owners.size(); ++slot) zero_bucket_of_[owners[slot]] = {index, static_cast<int>(slot)};
      const at::TensorOptions grad_options = updated_[owners[0]].second.options().requires_grad(false);
      try {  // the staging buffers are allocated here, under the rank's memory cap
        zero_buckets_.push_back(std::make_unique<ZeroBuckets>(groups_.at(set.axis), std::move(set), grad_options));
      } catch (const std::exception& e) {
        return TorchError(absl::StatusCode::kResourceExhausted, absl::StrCat("ZeRO gradient buckets on rank ", program_.rank()), e);
      }
      if (program_.zero_stage() >= 3) {  // blocks gathered a bucket at a time too
        std::vector<at::Tensor> shards, blocks;
        for (int i : owners) {
          shards.push_back(updated_[i].second);
          blocks.push_back(trainable_[i].second);
        }
        try {
          zero_buckets_.back()->SetParameters(std::move(shards), std::move(blocks));
        } catch (const std::exception& e) {
          return TorchError(absl::StatusCode::kResourceExhausted, absl::StrCat("ZeRO gather buffer on rank ", program_.rank()), e);
        }
      }
      zero_bucket_owners_.push_back(std::move(owners));
    }
  }
  return absl::OkStatus();
}

absl::Status RankTrainer::GatherBlocks(const std::vector<int>& trainable_indices) const {
  for (int i : trainable_indices) {
    const auto [set, slot] = zero_bucket_of_[i];
    auto st = set >= 0 ? zero_buckets_[set]->GatherBlock(slot)
                       : GatherBlock(trainable_[i].second, updated_[i].second, zero_[zero_of_[i]], groups_);
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::Status RankTrainer::ReduceGradients() {
  // The buckets' all-reduces, started in backward: their sums become the parameters' gradients.
  for (size_t k = 0; k < buckets_.size(); ++k) {
    at::NoGradGuard no_grad;
    auto st = buckets_[k]->Finish([&](int slot, at::Tensor sum) { trainable_[bucket_owners_[k][slot]].second.mutable_grad() = std::move(sum); });
    if (!st.ok()) return st;
  }
  for (size_t k = 0; k < zero_buckets_.size(); ++k) {
    at::NoGradGuard no_grad;
    auto st = zero_buckets_[k]->Finish([&](int slot, at::Tensor sum) { updated_[zero_bucket_owners_[k][slot]].second.mutable_grad() = std::move(sum); });
    if (!st.ok()) return st;
  }
  // The deferred reductions: each accumulated gradient all-reduced over its chain's axes.
  for (const auto& [i, axes] : deferred_) {
    at::Tensor grad = trainable_[i].second.mutable_grad();
    if (!grad.defined()) continue;
    at::NoGradGuard no_grad;
    for (int a : axes) {
      if (auto st = groups_.at(a)->AllReduceSum(grad); !st.ok()) return st;
    }
  }
  if (program_.zero_stage() == 1) {
    // The all-reduced gradient of each sharded block: keep this rank's shard of it.
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < trainable_.size(); ++i) {
      if (zero_of_[i] < 0) continue;
      at::Tensor& full = trainable_[i].second;
      if (full.grad().defined()) updated_[i].second.mutable_grad() = FlatShard(full.grad(), zero_[zero_of_[i]]);
      full.mutable_grad() = at::Tensor();
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<RankTrainer::TrainableShard> RankTrainer::FindTrainable(const std::string& name) const {
  for (size_t i = 0; i < trainable_.size(); ++i) {
    if (trainable_[i].first != name) continue;
    for (const v1::Shard& s : program_.parameters()) {
      if (s.name() == name) return TrainableShard{i, &s};
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("'", name, "' is not a trainable parameter of this rank"));
}

at::Tensor* RankTrainer::UpdateGradient(const std::string& name) {
  auto t = FindTrainable(name);
  if (!t.ok()) return nullptr;
  at::Tensor& update = updated_[t->index].second;
  return update.grad().defined() ? &update.mutable_grad() : nullptr;
}

absl::StatusOr<at::Tensor> RankTrainer::WholeGradient(const std::string& name) const {
  auto t = FindTrainable(name);
  if (!t.ok()) return t.status();
  const size_t i = t->index;
  const at::Tensor& update = updated_[i].second;
  const at::Tensor grad = update.grad().defined() ? update.grad() : at::zeros_like(update);
  at::NoGradGuard no_grad;
  at::Tensor whole = grad;
  if (zero_of_[i] >= 0) {  // the rank's ZeRO shard: the block back from every shard first
    auto block = GatherShards(grad, zero_[zero_of_[i]], groups_, trainable_[i].second.sizes());
    if (!block.ok()) return block.status();
    whole = *std::move(block);
  }
  auto placement = ParsePlacement(t->shard->placement());
  if (!placement.ok()) return placement.status();
  // Blocks of a dimension split by several axes are in mixed radix, the first axis outermost:
  // gathered innermost axis first.
  for (int a = static_cast<int>(placement->size()) - 1; a >= 0; --a) {
    if ((*placement)[a].kind != AxisPlacement::Kind::kShard) continue;
    auto gathered = groups_.at(a)->AllGather(whole, (*placement)[a].dim);
    if (!gathered.ok()) return gathered.status();
    whole = *std::move(gathered);
  }
  return whole;
}

absl::Status RankTrainer::SetWholeGradient(const std::string& name, const at::Tensor& whole) {
  auto t = FindTrainable(name);
  if (!t.ok()) return t.status();
  auto block = Block(whole, *t->shard);
  if (!block.ok()) return block.status();
  at::NoGradGuard no_grad;
  const int z = zero_of_[t->index];
  updated_[t->index].second.mutable_grad() = z >= 0 ? FlatShard(*block, zero_[z]) : *block;
  return absl::OkStatus();
}

void RankTrainer::CountHeldBy(const std::string& name, double holders) {
  if (auto t = FindTrainable(name); t.ok()) copies_[t->index] *= holders;
}

at::Tensor RankTrainer::GradientSquares() const {
  at::Tensor sumsq = at::zeros({}, at::kDouble);
  for (size_t i = 0; i < updated_.size(); ++i) {
    const at::Tensor& g = updated_[i].second.grad();
    if (g.defined()) sumsq += g.to(at::kDouble).pow(2).sum() / copies_[i];
  }
  return sumsq;
}

absl::StatusOr<double> RankTrainer::ClipScale(at::Tensor sumsq, const std::vector<Communicator*>& more_norm_groups) const {
  if (max_grad_norm_ <= 0) return 1.0;
  // As clip_grad_norm_ on one device: the L2 norm of every gradient, over all shards (a block
  // held by several ranks counted once), then every gradient scaled by min(1, max/(norm+1e-6)).
  std::vector<Communicator*> norm_groups = groups_;
  norm_groups.insert(norm_groups.end(), more_norm_groups.begin(), more_norm_groups.end());
  for (Communicator* group : norm_groups) {
    if (auto st = group->AllReduceSum(sumsq); !st.ok()) return st;
  }
  const double total = std::sqrt(sumsq.item<double>());
  return std::min(1.0, max_grad_norm_ / (total + 1e-6));
}

absl::Status RankTrainer::ApplyGradients(const std::vector<Communicator*>& more_norm_groups, const Pass& last) {
  auto scale = ClipScale(max_grad_norm_ > 0 ? GradientSquares() : at::Tensor(), more_norm_groups);
  if (!scale.ok()) return scale.status();
  return ApplyScaledGradients(*scale, last);
}

absl::Status RankTrainer::ApplyScaledGradients(double scale, const Pass& last) {
  if (scale != 1.0) {
    at::NoGradGuard no_grad;
    for (auto& [name, p] : updated_) {
      if (p.grad().defined()) p.mutable_grad().mul_(scale);
    }
  }
  if (auto st = optimizer_->Step(); !st.ok()) {
    return absl::Status(st.code(), absl::StrCat("optimizer step on rank ", program_.rank(), ": ", st.message()));
  }
  for (auto& [name, p] : updated_) p.mutable_grad() = at::Tensor();
  for (auto& buckets : zero_buckets_) {
    if (auto st = buckets->ShardsChanged(); !st.ok()) return st;
  }
  // ZeRO 1-2: every rank updated its shard; the blocks are put back together from all of them
  // (ZeRO-3 gathers them when next used).
  for (size_t k = 0; k < zero_buckets_.size() && program_.zero_stage() <= 2; ++k) {
    at::NoGradGuard no_grad;
    const std::vector<int>& owners = zero_bucket_owners_[k];
    auto st = zero_buckets_[k]->Gather([&](int slot) { return updated_[owners[slot]].second.detach(); },
                                       [&](int slot) { return trainable_[owners[slot]].second; });
    if (!st.ok()) return st;
  }
  for (size_t i = 0; i < trainable_.size(); ++i) {
    if (zero_of_[i] < 0 || program_.zero_stage() >= 3 || zero_bucket_of_[i].first >= 0) continue;
    at::Tensor& full = trainable_[i].second;
    auto whole = GatherShards(updated_[i].second, zero_[zero_of_[i]], groups_, full.sizes());
    if (!whole.ok()) return whole.status();
    at::NoGradGuard no_grad;
    full.copy_(*whole);
  }
  // Buffer updates (batch norm's running statistics): the new value into the rank's block.
  for (const auto& u : graph_.proto().buffer_updates()) {
    auto value = last.env.find(u.value());
    auto buffer = leaves_.find(u.buffer());
    if (value == last.env.end() || buffer == leaves_.end()) continue;
    if (!value->second.sizes().equals(buffer->second.sizes())) {
      return absl::UnimplementedError(absl::StrCat("buffer '", u.buffer(), "' is held ", DescribeTensor(buffer->second), " but its update '",
                                                   u.value(), "' is ", DescribeTensor(value->second),
                                                   " on this rank; updating a buffer split differently is not built yet"));
    }
    at::NoGradGuard no_grad;
    buffer->second.copy_(value->second.detach());
  }
  ++steps_;
  return absl::OkStatus();
}

}  // namespace mapd

#include "worker/rank/grad_buckets.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "worker/rank/collectives.h"

namespace mapd {

GradBuckets::GradBuckets(std::vector<Communicator*> groups, const std::vector<at::Tensor>& params, int64_t bucket_bytes)
    : groups_(std::move(groups)) {
  slots_.resize(params.size());
  std::vector<int64_t> elements;  // per bucket
  std::vector<at::TensorOptions> options;
  int64_t bytes = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const at::Tensor& p = params[i];
    const int64_t size = p.numel() * static_cast<int64_t>(p.element_size());
    const bool fits = !buckets_.empty() && options.back().dtype() == p.dtype() && bytes + size <= bucket_bytes;
    if (!fits) {
      buckets_.emplace_back();
      elements.push_back(0);
      options.push_back(p.options());
      bytes = 0;
    }
    slots_[i] = Slot{static_cast<int>(buckets_.size()) - 1, elements.back(), p.numel(), p.sizes().vec(), false};
    elements.back() += p.numel();
    buckets_.back().slots.push_back(static_cast<int>(i));
    bytes += size;
  }
  for (size_t k = 0; k < buckets_.size(); ++k) {
    buckets_[k].flat = at::zeros({elements[k]}, options[k]);
    buckets_[k].missing = static_cast<int>(buckets_[k].slots.size());
  }
}

at::Tensor GradBuckets::SlotView(const Slot& s) {
  return buckets_[s.bucket].flat.narrow(0, s.offset, s.numel).view(s.sizes);
}

void GradBuckets::Start(Bucket& b) {
  auto started = groups_.front()->AllReduceSumAsync(b.flat);
  if (!started.ok()) {
    if (start_error_.ok()) start_error_ = started.status();
    throw std::runtime_error(std::string(started.status().message()));
  }
  b.pending = *std::move(started);
}

void GradBuckets::Ready(int slot, const at::Tensor& grad) {
  Slot& s = slots_.at(slot);
  Bucket& b = buckets_[s.bucket];
  if (s.ready || b.pending) throw std::logic_error("a gradient came twice in one step");
  SlotView(s).copy_(grad);
  s.ready = true;
  if (--b.missing == 0) Start(b);
}

void GradBuckets::WaitFor(Bucket& b, absl::Status& status) {
  if (!b.pending) return;
  absl::Status waited = b.pending->Wait();
  if (status.ok()) status = waited;
  b.pending.reset();
}

absl::Status GradBuckets::Finish(const std::function<void(int, at::Tensor)>& set_grad) {
  absl::Status status = start_error_;
  for (Bucket& b : buckets_) {
    if (!b.pending && status.ok()) {
      // Gradients that did not come are summed as zeros (the slots of a step are rewritten whole).
      for (int slot : b.slots) {
        const Slot& s = slots_[slot];
        if (!s.ready) SlotView(s).zero_();
      }
      try {
        Start(b);
      } catch (const std::exception&) {
        status = start_error_;
      }
    }
    WaitFor(b, status);
  }
  // The further axes: every bucket's all-reduce over one started, then all waited for.
  for (size_t g = 1; g < groups_.size() && status.ok(); ++g) {
    for (Bucket& b : buckets_) {
      auto started = groups_[g]->AllReduceSumAsync(b.flat);
      if (!started.ok()) {
        status = started.status();
        break;
      }
      b.pending = *std::move(started);
    }
    for (Bucket& b : buckets_) WaitFor(b, status);
  }
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    // A view into the bucket: the optimizer reads it before the next step's gradients overwrite it.
    if (status.ok() && s.ready) set_grad(static_cast<int>(i), SlotView(s));
    s.ready = false;
  }
  for (Bucket& b : buckets_) b.missing = static_cast<int>(b.slots.size());
  start_error_ = absl::OkStatus();
  return status;
}

namespace {

// A parameter's flat values `flat` (numel elements) into `rows` ([ranks, chunk], a strided view
// of a staging buffer): chunk r into row r, the part past numel zeros (ZeRO's padding).
// With `add`, added to what the rows hold (a parameter's later contribution; the padding stays).
void FlatIntoRows(const at::Tensor& flat, const at::Tensor& rows, bool add = false) {
  const int64_t ranks = rows.size(0), chunk = rows.size(1), numel = flat.numel();
  const int64_t full = std::min(ranks, numel / chunk), rest = numel - full * chunk;
  auto put = [add](at::Tensor to, const at::Tensor& from) { add ? to.add_(from) : to.copy_(from); };
  if (full > 0) put(rows.narrow(0, 0, full), flat.narrow(0, 0, full * chunk).view({full, chunk}));
  if (full == ranks) return;
  at::Tensor row = rows[full];
  if (rest > 0) put(row.narrow(0, 0, rest), flat.narrow(0, full * chunk, rest));
  if (add) return;
  row.narrow(0, rest, chunk - rest).zero_();
  if (full + 1 < ranks) rows.narrow(0, full + 1, ranks - full - 1).zero_();
}

// The reverse: `flat`'s numel elements from `rows`, the padding dropped.
void RowsIntoFlat(const at::Tensor& rows, const at::Tensor& flat) {
  const int64_t ranks = rows.size(0), chunk = rows.size(1), numel = flat.numel();
  const int64_t full = std::min(ranks, numel / chunk), rest = numel - full * chunk;
  if (full > 0) flat.narrow(0, 0, full * chunk).view({full, chunk}).copy_(rows.narrow(0, 0, full));
  if (full < ranks && rest > 0) flat.narrow(0, full * chunk, rest).copy_(rows[full].narrow(0, 0, rest));
}

void OrThrow(const absl::Status& st) {
  if (!st.ok()) throw std::runtime_error(std::string(st.message()));
}

}  // namespace

ZeroBuckets::ZeroBuckets(Communicator* group, ZeroBucketSet set, const at::TensorOptions& options)
    : group_(group), set_(std::move(set)), options_(options) {
  buckets_.resize(set_.buckets.size());
  slots_.resize(set_.params.size());
  for (size_t k = 0; k < set_.buckets.size(); ++k) {
    const ZeroBucket& b = set_.buckets[k];
    for (size_t j = 0; j < b.params.size(); ++j) {
      const int contributions = static_cast<int>(set_.params[b.params[j]].grad_syncs.size());
      slots_[b.params[j]] = Slot{static_cast<int>(k), b.offsets[j], contributions, 0};
    }
    buckets_[k].missing = Contributions(static_cast<int>(k));
  }
  // One tensor, so that after the step several buckets can be gathered in one all-gather (Gather).
  staging_ = at::zeros({set_.staging_buffers * set_.staging_elements}, options_);
  for (int64_t i = 0; i < set_.staging_buffers; ++i) {
    buffers_.push_back(staging_.narrow(0, i * set_.staging_elements, set_.staging_elements));
    free_buffers_.push_back(static_cast<int>(i));
  }
}

int ZeroBuckets::Contributions(int bucket) const {
  int n = 0;
  for (int slot : set_.buckets[bucket].params) n += slots_[slot].contributions;
  return n;
}

at::Tensor ZeroBuckets::Rows(int bucket) {
  const int64_t segment = set_.buckets[bucket].segment;
  return buffers_[buckets_[bucket].buffer].narrow(0, 0, set_.ranks * segment).view({set_.ranks, segment});
}

int ZeroBuckets::TakeBuffer() {
  if (free_buffers_.empty() && !under_way_.empty()) OrThrow(Drain(under_way_.front()));
  if (free_buffers_.empty()) {  // every buffer belongs to a bucket still missing gradients
    buffers_.push_back(at::empty({set_.staging_elements}, options_));
    return static_cast<int>(buffers_.size()) - 1;
  }
  const int buffer = free_buffers_.back();
  free_buffers_.pop_back();
  return buffer;
}

void ZeroBuckets::Start(int bucket) {
  Bucket& b = buckets_[bucket];
  at::Tensor rows = Rows(bucket);
  auto started = group_->ReduceScatterRowsAsync(rows);
  b.started = true;
  if (!started.ok()) {
    if (error_.ok()) error_ = started.status();
    throw std::runtime_error(std::string(started.status().message()));
  }
  b.pending = *std::move(started);
  under_way_.push_back(bucket);
}

absl::Status ZeroBuckets::Drain(int bucket) {
  Bucket& b = buckets_[bucket];
  for (auto it = under_way_.begin(); it != under_way_.end(); ++it) {
    if (*it == bucket) {
      under_way_.erase(it);
      break;
    }
  }
  absl::Status st = b.pending ? b.pending->Wait() : absl::OkStatus();
  b.pending.reset();
  // This rank's row of the sums, in memory of its own: the buffer goes to the next bucket, and
  // the shard gradients live only until the optimizer has used them (Finish hands them out).
  if (st.ok()) b.shard_grads = Rows(bucket)[group_->rank()].clone();
  if (error_.ok()) error_ = st;
  if (b.buffer < set_.staging_buffers) free_buffers_.push_back(b.buffer);
  b.buffer = -1;
  return st;
}

void ZeroBuckets::Ready(int slot, const at::Tensor& grad) {
  Slot& s = slots_.at(slot);
  Bucket& b = buckets_[s.bucket];
  if (s.arrived == s.contributions || b.started) throw std::logic_error("a gradient came twice in one step");
  if (b.buffer < 0) b.buffer = TakeBuffer();
  const ZeroParam& z = set_.params[slot];
  FlatIntoRows(grad.reshape({-1}), Rows(s.bucket).narrow(1, s.offset, z.chunk), /*add=*/s.arrived > 0);
  ++s.arrived;
  if (--b.missing == 0) Start(s.bucket);
}

absl::Status ZeroBuckets::Finish(const std::function<void(int, at::Tensor)>& set_grad) {
  for (size_t k = 0; k < buckets_.size() && error_.ok(); ++k) {
    Bucket& b = buckets_[k];
    if (b.started) continue;
    try {
      if (b.buffer < 0) b.buffer = TakeBuffer();
      // Gradients that did not come are summed as zeros.
      for (int slot : set_.buckets[k].params) {
        if (slots_[slot].arrived == 0) Rows(static_cast<int>(k)).narrow(1, slots_[slot].offset, set_.params[slot].chunk).zero_();
      }
      Start(static_cast<int>(k));
    } catch (const std::exception& e) {
      if (error_.ok()) error_ = absl::UnavailableError(e.what());
    }
  }
  while (!under_way_.empty()) (void)Drain(under_way_.front());
  absl::Status status = error_;
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    if (status.ok() && s.arrived > 0) set_grad(static_cast<int>(i), buckets_[s.bucket].shard_grads.narrow(0, s.offset, set_.params[i].chunk));
    s.arrived = 0;
  }
  for (Bucket& b : buckets_) b.shard_grads.reset();  // the parameters' gradients hold them now
  for (size_t k = 0; k < buckets_.size(); ++k) {
    buckets_[k].missing = Contributions(static_cast<int>(k));
    buckets_[k].started = false;
    buckets_[k].buffer = -1;
  }
  buffers_.resize(static_cast<size_t>(set_.staging_buffers));  // a third buffer was for this step only
  free_buffers_.clear();
  for (int64_t i = 0; i < set_.staging_buffers; ++i) free_buffers_.push_back(static_cast<int>(i));
  error_ = absl::OkStatus();
  return status;
}

absl::Status ZeroBuckets::Gather(const std::function<at::Tensor(int)>& shard, const std::function<at::Tensor(int)>& block) {
  // Consecutive buckets whose rows fit the staging buffers together go in one all-gather: after
  // the step nothing overlaps them, so fewer is faster. Their rows are laid end to end: row r of
  // the group holds chunk r of each of their parameters.
  const int64_t row_capacity = staging_.numel() / set_.ranks;
  for (size_t first = 0; first < set_.buckets.size();) {
    size_t last = first;
    int64_t segment = set_.buckets[first].segment;
    while (last + 1 < set_.buckets.size() && segment + set_.buckets[last + 1].segment <= row_capacity) segment += set_.buckets[++last].segment;
    at::Tensor flat = staging_.narrow(0, 0, set_.ranks * segment);
    const at::Tensor rows = flat.view({set_.ranks, segment});
    const at::Tensor local = rows[group_->rank()];
    std::vector<std::pair<int, int64_t>> placed;  // (slot, offset in the group's row)
    int64_t base = 0;
    for (size_t k = first; k <= last; ++k) {
      const ZeroBucket& b = set_.buckets[k];
      for (size_t j = 0; j < b.params.size(); ++j) placed.emplace_back(b.params[j], base + b.offsets[j]);
      base += b.segment;
    }
    for (const auto& [slot, offset] : placed) local.narrow(0, offset, set_.params[slot].chunk).copy_(shard(slot).reshape({-1}));
    if (auto st = group_->AllGatherInto(local, flat); !st.ok()) return st;
    for (const auto& [slot, offset] : placed) RowsIntoFlat(rows.narrow(1, offset, set_.params[slot].chunk), block(slot).view({-1}));
    first = last + 1;
  }
  return absl::OkStatus();
}

void ZeroBuckets::SetParameters(std::vector<at::Tensor> shards, std::vector<at::Tensor> blocks) {
  shards_ = std::move(shards);
  blocks_ = std::move(blocks);
  gathers_.clear();
  gathers_.resize(set_.buckets.size() > 1 ? 2 : 1);
  for (GatherBuffer& g : gathers_) g.flat = at::zeros({set_.staging_elements}, options_);
  order_.clear();
  forecast_.clear();
}

absl::Status ZeroBuckets::Settle(GatherBuffer& buffer) {
  if (!buffer.pending) return absl::OkStatus();
  absl::Status st = buffer.pending->Wait();
  buffer.pending.reset();
  if (!st.ok()) buffer.bucket = -1;
  return st;
}

absl::Status ZeroBuckets::StartGather(GatherBuffer& buffer, int bucket, bool wait) {
  if (auto st = Settle(buffer); !st.ok()) return st;  // a prefetch into it: done before the buffer is reused
  const ZeroBucket& b = set_.buckets[bucket];
  at::Tensor flat = buffer.flat.narrow(0, 0, set_.ranks * b.segment);
  const at::Tensor local = flat.view({set_.ranks, b.segment})[group_->rank()];
  for (size_t j = 0; j < b.params.size(); ++j) {
    local.narrow(0, b.offsets[j], set_.params[b.params[j]].chunk).copy_(shards_[b.params[j]].detach().reshape({-1}));
  }
  buffer.bucket = -1;
  if (wait) {
    if (auto st = group_->AllGatherInto(local, flat); !st.ok()) return st;
  } else {
    auto started = group_->AllGatherIntoAsync(local, flat);
    if (!started.ok()) return started.status();
    buffer.pending = *std::move(started);
  }
  buffer.bucket = bucket;
  return absl::OkStatus();
}

absl::StatusOr<ZeroBuckets::GatherBuffer*> ZeroBuckets::BufferFor(int bucket) {
  for (GatherBuffer& g : gathers_) {
    if (g.bucket == bucket) return &g;
  }
  GatherBuffer* oldest = &gathers_[0];
  for (GatherBuffer& g : gathers_) {
    if (g.last_read < oldest->last_read) oldest = &g;
  }
  if (auto st = StartGather(*oldest, bucket, /*wait=*/true); !st.ok()) return st;
  return oldest;
}

absl::Status ZeroBuckets::Prefetch() {
  const size_t next = order_.size();
  if (gathers_.size() < 2 || next >= forecast_.size() || forecast_[next - 1] != order_.back()) return absl::OkStatus();
  const int bucket = forecast_[next];
  GatherBuffer* other = nullptr;
  for (GatherBuffer& g : gathers_) {
    if (g.bucket == bucket) return absl::OkStatus();  // held already
    if (g.bucket != order_.back() && (other == nullptr || g.last_read < other->last_read)) other = &g;
  }
  return other == nullptr ? absl::OkStatus() : StartGather(*other, bucket, /*wait=*/false);
}

absl::Status ZeroBuckets::GatherBlock(int slot) {
  const at::Tensor& block = blocks_.at(slot);
  if (BlockGathered(block)) return absl::OkStatus();
  at::NoGradGuard no_grad;
  const int bucket = slots_[slot].bucket;
  const ZeroBucket& b = set_.buckets[bucket];
  auto g = BufferFor(bucket);
  if (!g.ok()) return g.status();
  if (auto st = Settle(**g); !st.ok()) return st;
  (*g)->last_read = ++reads_;
  const at::Tensor rows = (*g)->flat.narrow(0, 0, set_.ranks * b.segment).view({set_.ranks, b.segment});
  RowsIntoFlat(rows.narrow(1, slots_[slot].offset, set_.params[slot].chunk), AllocateBlock(block).view({-1}));
  if (!order_.empty() && order_.back() == bucket) return absl::OkStatus();
  order_.push_back(bucket);
  return Prefetch();
}

absl::Status ZeroBuckets::ShardsChanged() {
  absl::Status status;
  for (GatherBuffer& g : gathers_) {
    absl::Status st = Settle(g);  // a prefetch the step did not read: finished, and dropped
    if (status.ok()) status = st;
    g.bucket = -1;
  }
  if (!order_.empty()) forecast_ = std::move(order_);
  order_.clear();
  if (!status.ok() || gathers_.empty() || forecast_.empty()) return status;
  // The next step's first bucket, gathered ahead too: it starts now, while the step ends (the
  // loss's sum, the next batch), instead of when forward first needs it. Every rank calls this
  // at the same point with the same forecast, so the all-gathers match.
  return StartGather(gathers_[0], forecast_[0], /*wait=*/false);
}

}  // namespace mapd

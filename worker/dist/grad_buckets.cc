#include "worker/dist/grad_buckets.h"

#include <ATen/ATen.h>

#include <stdexcept>
#include <string>

namespace mapd {

GradBuckets::GradBuckets(Communicator* group, const std::vector<at::Tensor>& params, int64_t bucket_bytes)
    : group_(group) {
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
  auto started = group_->AllReduceSumAsync(b.flat);
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
    if (b.pending) {
      absl::Status waited = b.pending->Wait();
      if (status.ok()) status = waited;
      b.pending.reset();
    }
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

}  // namespace mapd

#include "planner/profile/memory_ledger.h"

namespace mapd {

int64_t* MemoryLedger::Slot(MemoryBreakdown& b, const Storage& s) {
  switch (s.kind) {
    case StorageKind::kParameter: return &b.parameters;
    case StorageKind::kGradient: return &b.gradients;
    case StorageKind::kOptimizerState: return &b.optimizer_states;
    case StorageKind::kActivation: return s.holds > 0 ? &b.saved_activations : &b.transients;
    case StorageKind::kActivationGrad: return &b.transients;
  }
  return &b.transients;
}

void MemoryLedger::Account(const Storage& s, int sign) {
  if (s.refs > 0) *Slot(current_, s) += sign * s.bytes;
}

void MemoryLedger::CheckPeak(int64_t extra) {
  const int64_t total = current_.Total() + extra;
  if (total > peak_) {
    peak_ = total;
    peak_breakdown_ = current_;
    peak_breakdown_.transients += extra;
    peak_flag_ = true;
  }
}

int MemoryLedger::New(int64_t bytes, StorageKind kind) {
  storages_.push_back({bytes, kind, 1, 0});
  Account(storages_.back(), +1);
  CheckPeak(0);
  return static_cast<int>(storages_.size()) - 1;
}

void MemoryLedger::AddRef(int id) { ++storages_[id].refs; }

void MemoryLedger::Release(int id) {
  Storage& s = storages_[id];
  if (s.refs == 0) return;
  if (s.refs == 1) Account(s, -1);
  --s.refs;
}

void MemoryLedger::Hold(int id) {
  Storage& s = storages_[id];
  Account(s, -1);
  ++s.holds;
  ++s.refs;
  Account(s, +1);
}

void MemoryLedger::Unhold(int id) {
  Storage& s = storages_[id];
  if (s.holds == 0) return;
  Account(s, -1);
  --s.holds;
  --s.refs;
  Account(s, +1);
}

void MemoryLedger::Transient(int64_t bytes) { CheckPeak(bytes); }

bool MemoryLedger::ConsumePeakFlag() {
  const bool f = peak_flag_;
  peak_flag_ = false;
  return f;
}

}  // namespace mapd

// MemoryLedger: the profiler's model of the allocator. Storages have a size, a kind and
// reference counts; live bytes are kept per breakdown category as storages are created,
// kept for backward, released and freed, so the peak and its composition cost O(1) per event.
#ifndef MAPD_PLANNER_PROFILE_MEMORY_LEDGER_H_
#define MAPD_PLANNER_PROFILE_MEMORY_LEDGER_H_

#include <cstdint>
#include <vector>

#include "planner/profile/profiler.h"

namespace mapd {

enum class StorageKind { kParameter, kGradient, kOptimizerState, kActivation, kActivationGrad };

class MemoryLedger {
 public:
  // A new live storage with one reference.
  int New(int64_t bytes, StorageKind kind);
  void AddRef(int id);
  // Drops a reference; the storage is freed when none remain.
  void Release(int id);
  // Autograd keeps the storage for a backward (counts as a reference and as "saved").
  void Hold(int id);
  void Unhold(int id);
  // Bytes that exist only for a moment (a workspace, an accumulated gradient): counted
  // towards the peak, then gone.
  void Transient(int64_t bytes);

  bool live(int id) const { return storages_[id].refs > 0; }
  int num_storages() const { return static_cast<int>(storages_.size()); }  // ids made so far
  int64_t bytes(int id) const { return storages_[id].bytes; }
  StorageKind kind(int id) const { return storages_[id].kind; }
  int64_t live_bytes() const { return current_.Total(); }
  const MemoryBreakdown& current() const { return current_; }
  // True when the last New/Transient set a new peak (the caller records where).
  bool ConsumePeakFlag();
  int64_t peak() const { return peak_; }
  const MemoryBreakdown& peak_breakdown() const { return peak_breakdown_; }

 private:
  struct Storage {
    int64_t bytes;
    StorageKind kind;
    int refs;
    int holds;
  };
  int64_t* Slot(MemoryBreakdown& b, const Storage& s);
  void Account(const Storage& s, int sign);
  void CheckPeak(int64_t extra);

  std::vector<Storage> storages_;
  MemoryBreakdown current_;
  MemoryBreakdown peak_breakdown_;
  int64_t peak_ = 0;
  bool peak_flag_ = false;
};

}  // namespace mapd

#endif  // MAPD_PLANNER_PROFILE_MEMORY_LEDGER_H_

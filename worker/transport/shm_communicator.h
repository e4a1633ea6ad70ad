// Collectives between ranks on one machine through one shared-memory segment per group, with no
// socket, no transport thread and no copy through the kernel: a rank writes its input into its
// own arena of the segment, says so in a counter, and every rank reads what it needs of the
// others' arenas straight from memory. Every collective is here (all-reduce, reduce-scatters,
// all-gathers, all-to-all, barrier); point-to-point and tensors larger than an arena go to the
// fallback communicator (Gloo) after every shared-memory collective under way has finished, so
// the group's order holds.
//
// Why: on the 2-core machine this project is measured on, four Gloo ranks spent about a third
// of their CPU time in the kernel (loopback TCP, Gloo's event-loop thread, the wake-ups between
// it and the rank) — docs/runtime.md, "Shared memory between ranks of one machine".
//
// Progress without a thread: a collective started asynchronously has written its input at
// Start; the reading and summing happen in the starting rank's thread when it waits — or earlier,
// whenever it blocks for any reason (a later Start that needs arena space, a blocking collective,
// a fallback collective), it first finishes its own collectives under way, oldest first. A rank
// only ever waits for peers to reach a point they reach in program order before the thing it is
// waiting in, so as long as every rank of a group starts and waits for collectives in the same
// order (the runtime is SPMD), no set of ranks can wait for each other in a cycle.
#ifndef MAPD_WORKER_TRANSPORT_SHM_COMMUNICATOR_H_
#define MAPD_WORKER_TRANSPORT_SHM_COMMUNICATOR_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "worker/transport/communicator.h"

namespace mapd {

// A POSIX shared-memory segment mapped into this process (unmapped when destroyed).
class SharedSegment {
 public:
  // A new segment of `bytes` under a fresh random name, readable by this user only, its pages
  // reserved now (posix_fallocate): where /dev/shm is too small (a container's 64 MiB) this is
  // RESOURCE_EXHAUSTED at once rather than a SIGBUS in the middle of a step.
  static absl::StatusOr<std::unique_ptr<SharedSegment>> Create(int64_t bytes);
  // The segment another process created (FAILED_PRECONDITION if it is not there or smaller).
  static absl::StatusOr<std::unique_ptr<SharedSegment>> Open(const std::string& name, int64_t bytes);
  ~SharedSegment();
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;

  // Removes the name (the mappings stay): once every rank has opened it, nothing is left behind
  // in /dev/shm whatever happens to the ranks later.
  void Unlink();
  const std::string& name() const { return name_; }
  unsigned char* data() const { return data_; }
  int64_t bytes() const { return bytes_; }

 private:
  SharedSegment(std::string name, unsigned char* data, int64_t bytes) : name_(std::move(name)), data_(data), bytes_(bytes) {}
  std::string name_;
  unsigned char* data_;
  int64_t bytes_;
  bool unlinked_ = false;
};

struct SharedGroupOptions {
  int size = 0;                  // ranks in the group (>= 2)
  int64_t arena_bytes = 0;       // each rank's arena: the largest collective it carries (> 0)
  uint64_t cookie = 0;           // written by the creator, checked by the others (not the segment of another run)
  std::chrono::milliseconds timeout{60000};  // how long a rank waits for a peer before DEADLINE_EXCEEDED
  absl::Status Validate() const;
};

// The segment size a group needs: its counters and `size` arenas.
int64_t SharedGroupBytes(const SharedGroupOptions& options);

// The group's counters laid out in a new segment (its creator, before the others open it).
absl::Status InitializeSharedGroup(SharedSegment& segment, const SharedGroupOptions& options);
// FAILED_PRECONDITION unless `segment` was laid out for exactly these options.
absl::Status CheckSharedGroup(const SharedSegment& segment, const SharedGroupOptions& options);

// Group rank `rank`'s communicator over `segment` (laid out for `options`); `fallback` — the same
// group over another transport — carries what this one does not. Its name is the fallback's.
std::unique_ptr<Communicator> MakeSharedMemoryCommunicator(std::shared_ptr<SharedSegment> segment, const SharedGroupOptions& options,
                                                           int rank, std::unique_ptr<Communicator> fallback);

}  // namespace mapd

#endif  // MAPD_WORKER_TRANSPORT_SHM_COMMUNICATOR_H_

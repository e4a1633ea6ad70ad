// The narrow collective interface the distributed runtime uses: one Communicator per process
// group (the ranks of one mesh-axis slice). Backends: Gloo over c10d (gloo_communicator.h, CPU;
// tested as several ranks in one process); NCCL comes with CUDA builds.
//
// All collectives sum; splits are even (the planner only picks placements that divide) and in
// group-rank order. Errors (a peer gone, a timeout) are UNAVAILABLE or DEADLINE_EXCEEDED naming
// the group; a Communicator is used by one thread at a time.
#ifndef MAPD_WORKER_TRANSPORT_COMMUNICATOR_H_
#define MAPD_WORKER_TRANSPORT_COMMUNICATOR_H_

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace mapd {

// A send under way: Wait() returns once the peer has the tensor (which the send keeps alive).
class PendingSend {
 public:
  virtual ~PendingSend() = default;
  virtual absl::Status Wait() = 0;
};

// A collective under way: Wait() returns once its result is in place (the collective keeps the
// tensors it works on alive until then).
class PendingCollective {
 public:
  virtual ~PendingCollective() = default;
  virtual absl::Status Wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;   // within the group
  virtual int size() const = 0;
  virtual const std::string& name() const = 0;  // e.g. "axis 1, group 0"

  // t ← Σ over the group, in place.
  virtual absl::Status AllReduceSum(at::Tensor& t) = 0;
  // The same, started and left to run while the caller goes on (gradient buckets overlap it with
  // backward): `t` is not to be touched until Wait. Collectives on a group start in the same order
  // on every rank of it, asynchronous or not. By default, the blocking AllReduceSum, done at once.
  virtual absl::StatusOr<std::unique_ptr<PendingCollective>> AllReduceSumAsync(at::Tensor& t);
  // Every rank's `local`, concatenated along `dim` in rank order.
  virtual absl::StatusOr<at::Tensor> AllGather(const at::Tensor& local, int64_t dim) = 0;
  // The same, flat and into `out` (contiguous, size() × local's elements, local's dtype): rank
  // j's `local` at elements [j·n, (j+1)·n). No result tensor is made (ZeRO's buckets gather into a
  // buffer they keep). By default, AllGather and a copy.
  virtual absl::Status AllGatherInto(const at::Tensor& local, at::Tensor& out);
  // The same, started and left to run while the caller goes on (ZeRO-3 gathers the next bucket
  // while this one computes): neither `local` nor `out` is to be touched until Wait; ordered
  // with the group's other collectives as AllReduceSumAsync is. By default, AllGatherInto done
  // at once.
  virtual absl::StatusOr<std::unique_ptr<PendingCollective>> AllGatherIntoAsync(const at::Tensor& local, at::Tensor& out);
  // Σ over the group of `full`, then this rank's chunk along `dim`.
  virtual absl::StatusOr<at::Tensor> ReduceScatter(const at::Tensor& full, int64_t dim) = 0;
  // `rows` (contiguous, [size(), n]): at Wait, row rank() holds the sum over the group of every
  // rank's row rank(); the other rows are left undefined. Started and left to run while the
  // caller goes on (ZeRO's gradient buckets overlap it with backward); `rows` is not to be
  // touched until Wait; ordered with the group's other collectives as AllReduceSumAsync is.
  // Half an all-reduce's traffic. By default, AllReduceSumAsync of every row.
  virtual absl::StatusOr<std::unique_ptr<PendingCollective>> ReduceScatterRowsAsync(at::Tensor& rows);
  // `local` cut into size() chunks along `split_dim`; chunk j goes to rank j; the chunks
  // received are concatenated along `concat_dim` in rank order.
  virtual absl::StatusOr<at::Tensor> AllToAll(const at::Tensor& local, int64_t split_dim, int64_t concat_dim) = 0;
  virtual absl::Status Barrier() = 0;

  // Point-to-point, between two ranks of the group (pipeline stages): Send returns at once (so
  // two ranks may each send before they receive); Recv blocks until `t` — whose shape and dtype
  // the receiver knows — holds what `peer` sent with the same `tag` (≥ 0). Messages with one tag
  // between one pair arrive in the order sent.
  virtual absl::StatusOr<std::unique_ptr<PendingSend>> Send(const at::Tensor& t, int peer, int tag) = 0;
  virtual absl::Status Recv(at::Tensor& t, int peer, int tag) = 0;
};

// AllGather by AllGatherInto into [size(), local's shape], then laid out along `dim` (a view
// where `dim` is 0): for backends whose gather into a buffer is their own.
inline absl::StatusOr<at::Tensor> AllGatherByInto(Communicator& group, const at::Tensor& local, int64_t dim);

namespace internal {
class DoneCollective final : public PendingCollective {
 public:
  absl::Status Wait() override { return absl::OkStatus(); }
};
}  // namespace internal

inline absl::Status Communicator::AllGatherInto(const at::Tensor& local, at::Tensor& out) {
  auto gathered = AllGather(local.reshape({-1}), 0);
  if (!gathered.ok()) return gathered.status();
  out.copy_(*gathered);
  return absl::OkStatus();
}

inline absl::StatusOr<at::Tensor> AllGatherByInto(Communicator& group, const at::Tensor& local, int64_t dim) {
  std::vector<int64_t> joined(local.sizes().begin(), local.sizes().end());
  if (joined.empty() || dim < 0 || dim >= static_cast<int64_t>(joined.size())) {
    return absl::InvalidArgumentError(absl::StrCat(group.name(), ": all-gather along dimension ", dim, " of a ", joined.size(), "-d tensor"));
  }
  std::vector<int64_t> stacked{group.size()};
  stacked.insert(stacked.end(), local.sizes().begin(), local.sizes().end());
  at::Tensor flat = local.new_empty({local.numel() * group.size()});
  if (auto st = group.AllGatherInto(local, flat); !st.ok()) return st;
  joined[dim] *= group.size();
  return dim == 0 ? flat.view(joined) : flat.view(stacked).movedim(0, dim).reshape(joined);
}

inline absl::StatusOr<std::unique_ptr<PendingCollective>> Communicator::AllGatherIntoAsync(const at::Tensor& local, at::Tensor& out) {
  if (auto st = AllGatherInto(local, out); !st.ok()) return st;
  return std::unique_ptr<PendingCollective>(new internal::DoneCollective());
}

inline absl::StatusOr<std::unique_ptr<PendingCollective>> Communicator::AllReduceSumAsync(at::Tensor& t) {
  if (auto st = AllReduceSum(t); !st.ok()) return st;
  return std::unique_ptr<PendingCollective>(new internal::DoneCollective());
}

inline absl::StatusOr<std::unique_ptr<PendingCollective>> Communicator::ReduceScatterRowsAsync(at::Tensor& rows) {
  return AllReduceSumAsync(rows);
}

}  // namespace mapd

#endif  // MAPD_WORKER_TRANSPORT_COMMUNICATOR_H_

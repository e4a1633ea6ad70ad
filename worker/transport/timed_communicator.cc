#include "worker/transport/timed_communicator.h"

#include <chrono>

namespace mapd {

namespace {

// The wait is added to its kind's totals when it happens, looked up then: a collective started
// in one step may be waited for in the next (ZeRO-3 gathers the next step's first bucket ahead),
// after the rank has cleared the stats for it — a pointer kept to the entry would write into
// freed memory (it did: ranks died of heap corruption, or a value came out wrong).
class TimedPending : public PendingCollective {
 public:
  TimedPending(std::unique_ptr<PendingCollective> inner, CollectiveStats* stats, const char* kind)
      : inner_(std::move(inner)), stats_(stats), kind_(kind) {}
  absl::Status Wait() override {
    const auto start = std::chrono::steady_clock::now();
    absl::Status st = inner_->Wait();
    (*stats_)[kind_].seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return st;
  }

 private:
  std::unique_ptr<PendingCollective> inner_;
  CollectiveStats* stats_;
  const char* kind_;
};

class TimedCommunicator : public Communicator {
 public:
  TimedCommunicator(std::unique_ptr<Communicator> inner, CollectiveStats* stats) : inner_(std::move(inner)), stats_(stats) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  const std::string& name() const override { return inner_->name(); }

  absl::Status AllReduceSum(at::Tensor& t) override {
    return Timed("all_reduce", t, [&] { return inner_->AllReduceSum(t); });
  }
  // Timed while the rank waits on it: the start, and the Wait (what overlap leaves exposed).
  absl::StatusOr<std::unique_ptr<PendingCollective>> AllReduceSumAsync(at::Tensor& t) override {
    auto started = Timed("all_reduce", t, [&] { return inner_->AllReduceSumAsync(t); });
    if (!started.ok()) return started.status();
    return std::unique_ptr<PendingCollective>(new TimedPending(*std::move(started), stats_, "all_reduce"));
  }
  absl::StatusOr<at::Tensor> AllGather(const at::Tensor& local, int64_t dim) override {
    return Timed("all_gather", local, [&] { return inner_->AllGather(local, dim); });
  }
  absl::Status AllGatherInto(const at::Tensor& local, at::Tensor& out) override {
    return Timed("all_gather", local, [&] { return inner_->AllGatherInto(local, out); });
  }
  absl::StatusOr<std::unique_ptr<PendingCollective>> AllGatherIntoAsync(const at::Tensor& local, at::Tensor& out) override {
    auto started = Timed("all_gather", local, [&] { return inner_->AllGatherIntoAsync(local, out); });
    if (!started.ok()) return started.status();
    return std::unique_ptr<PendingCollective>(new TimedPending(*std::move(started), stats_, "all_gather"));
  }
  absl::StatusOr<at::Tensor> ReduceScatter(const at::Tensor& full, int64_t dim) override {
    return Timed("reduce_scatter", full, [&] { return inner_->ReduceScatter(full, dim); });
  }
  absl::StatusOr<std::unique_ptr<PendingCollective>> ReduceScatterRowsAsync(at::Tensor& rows) override {
    auto started = Timed("reduce_scatter", rows, [&] { return inner_->ReduceScatterRowsAsync(rows); });
    if (!started.ok()) return started.status();
    return std::unique_ptr<PendingCollective>(new TimedPending(*std::move(started), stats_, "reduce_scatter"));
  }
  absl::StatusOr<at::Tensor> AllToAll(const at::Tensor& local, int64_t split_dim, int64_t concat_dim) override {
    return Timed("all_to_all", local, [&] { return inner_->AllToAll(local, split_dim, concat_dim); });
  }
  absl::Status Barrier() override {
    return Timed("barrier", at::Tensor(), [&] { return inner_->Barrier(); });
  }
  // A send is timed to its start (the wait is the receiver's business); a receive while it waits.
  absl::StatusOr<std::unique_ptr<PendingSend>> Send(const at::Tensor& t, int peer, int tag) override {
    return Timed("send", t, [&] { return inner_->Send(t, peer, tag); });
  }
  absl::Status Recv(at::Tensor& t, int peer, int tag) override {
    return Timed("recv", t, [&] { return inner_->Recv(t, peer, tag); });
  }

 private:
  template <typename F>
  auto Timed(const char* kind, const at::Tensor& t, F&& f) -> decltype(f()) {
    const auto start = std::chrono::steady_clock::now();
    auto result = f();
    CollectiveTotals& c = (*stats_)[kind];
    c.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (t.defined()) c.bytes += static_cast<double>(t.numel() * t.element_size());
    ++c.calls;
    return result;
  }

  std::unique_ptr<Communicator> inner_;
  CollectiveStats* stats_;
};

}  // namespace

std::unique_ptr<Communicator> TimeCollectives(std::unique_ptr<Communicator> inner, CollectiveStats* stats) {
  return std::make_unique<TimedCommunicator>(std::move(inner), stats);
}

}  // namespace mapd

#include "worker/transport/gloo_communicator.h"

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <random>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "planner/lower/lowering.h"
#include "worker/transport/nccl_communicator.h"
#include "worker/transport/shm_communicator.h"
#include "worker/runtime/torch_types.h"

namespace mapd {

absl::Status RendezvousOptions::Validate() const {
  if (host.empty()) return absl::InvalidArgumentError("rendezvous host is empty");
  if (local_host.empty()) return absl::InvalidArgumentError("the rank's local host is empty");
  if (port <= 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("rendezvous port ", port, " is not a TCP port (1-65535)"));
  }
  if (timeout.count() <= 0) return absl::InvalidArgumentError("rendezvous timeout must be positive");
  if (cuda_device < -1) return absl::InvalidArgumentError(absl::StrCat("CUDA device ", cuda_device, " does not exist"));
  if (shared_memory_arena_bytes < 0 || shared_memory_arena_bytes % 64 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("shared-memory arena of ", shared_memory_arena_bytes, " bytes: 0 (Gloo only) or a positive multiple of 64"));
  }
  return absl::OkStatus();
}

absl::Status ApplySharedMemoryEnvironment(RendezvousOptions& options) {
  const char* value = std::getenv("MAPD_SHARED_MEMORY_MIB");
  if (value == nullptr) return absl::OkStatus();
  int64_t mib = 0;
  if (!absl::SimpleAtoi(value, &mib) || mib < 0 || mib > 65536) {
    return absl::InvalidArgumentError(absl::StrCat("MAPD_SHARED_MEMORY_MIB='", value,
                                                   "': the shared-memory arena per rank in MiB, 0-65536 (0: Gloo only)"));
  }
  options.shared_memory_arena_bytes = mib << 20;
  return absl::OkStatus();
}

namespace {

// c10d reports a peer that went away or a timeout as c10::Error with a message; which one it
// was decides the code.
absl::Status FromTorch(const std::string& group, const char* what, const std::exception& e) {
  const std::string msg = e.what();
  const std::string text = absl::StrCat(group, ": ", what, " failed: ", msg.substr(0, msg.find('\n')));
  if (msg.find("imed out") != std::string::npos || msg.find("imeout") != std::string::npos) {
    return absl::DeadlineExceededError(text);
  }
  return absl::UnavailableError(text);
}

// Waits for `work` and then for Gloo's worker thread to drop its own reference to it. The work
// holds the collective's input and output tensors; without the second wait, whichever thread
// lets go last frees them, so a rank's measured peak memory would depend on thread timing (the
// worker thread resets its reference just after marking the work complete: microseconds).
void WaitAndRelease(c10::intrusive_ptr<c10d::Work> work) {
  work->wait();
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
  while (work.use_count() > 1 && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
}

class TcpStoreServer : public StoreServer {
 public:
  explicit TcpStoreServer(c10::intrusive_ptr<c10d::TCPStore> store) : store_(std::move(store)) {}
  int port() const override { return store_->getPort(); }

 private:
  c10::intrusive_ptr<c10d::TCPStore> store_;
};

// A bf16 tensor's bits as f16 (the same storage; Gloo moves f16 and has no int16), for the
// collectives that only move data.
at::Tensor AsBits(const at::Tensor& t) { return t.scalar_type() == at::kBFloat16 ? t.view(at::kHalf) : t; }

class GlooPendingSend : public PendingSend {
 public:
  GlooPendingSend(c10::intrusive_ptr<c10d::Work> work, std::vector<at::Tensor> tensors, std::string group)
      : work_(std::move(work)), tensors_(std::move(tensors)), group_(std::move(group)) {}
  absl::Status Wait() override {
    if (!work_) return absl::OkStatus();
    try {
      WaitAndRelease(std::move(work_));
      tensors_.clear();
      return absl::OkStatus();
    } catch (const std::exception& e) {
      return FromTorch(group_, "send", e);
    }
  }

 private:
  c10::intrusive_ptr<c10d::Work> work_;
  std::vector<at::Tensor> tensors_;  // what is sent, alive until it has gone
  std::string group_;
};

// An all-reduce under way; a 16-bit tensor's sum is written back (rounded) from its fp32 copy.
class PendingAllReduce : public PendingCollective {
 public:
  PendingAllReduce(c10::intrusive_ptr<c10d::Work> work, std::vector<at::Tensor> tensors, at::Tensor narrow_target,
                   std::string group)
      : work_(std::move(work)), tensors_(std::move(tensors)), narrow_target_(std::move(narrow_target)), group_(std::move(group)) {}
  ~PendingAllReduce() override {
    if (work_) (void)Wait();  // not left running on tensors about to go
  }
  absl::Status Wait() override {
    if (!work_) return absl::OkStatus();
    try {
      WaitAndRelease(std::move(work_));
      if (narrow_target_.defined()) narrow_target_.copy_(tensors_[0]);
      tensors_.clear();
      return absl::OkStatus();
    } catch (const std::exception& e) {
      return FromTorch(group_, "all-reduce", e);
    }
  }

 private:
  c10::intrusive_ptr<c10d::Work> work_;
  std::vector<at::Tensor> tensors_;  // what is summed, alive until the sum is in place
  at::Tensor narrow_target_;
  std::string group_;
};

// A direct exchange under way: the sends and receives of one collective between this rank and
// each other rank of the group, and what to do with what came once they are done (`finish`: a
// sum, a copy into place; none for an all-gather, whose receives land in place).
//
// Its buffers (`scratch`, what the receives fill) are the communicator's own memory, as the
// ring's are Gloo's, not tensors of the rank's allocator: outside the peaks the profiler predicts
// and the rank measures.
class PendingExchange : public PendingCollective {
 public:
  PendingExchange(const char* what, std::string group, std::unique_ptr<unsigned char[]> scratch,
                  std::vector<c10::intrusive_ptr<c10d::Work>> works, std::vector<at::Tensor> kept,
                  std::function<void()> finish)
      : what_(what), group_(std::move(group)), scratch_(std::move(scratch)), works_(std::move(works)), kept_(std::move(kept)),
        finish_(std::move(finish)) {}
  ~PendingExchange() override {
    if (!done_) (void)Wait();  // not left running on tensors about to go
  }
  absl::Status Wait() override {
    if (done_) return absl::OkStatus();
    done_ = true;
    absl::Status status;
    try {
      for (auto& work : works_) WaitAndRelease(std::move(work));
      if (finish_) finish_();
    } catch (const std::exception& e) {
      status = FromTorch(group_, what_, e);
    }
    works_.clear();
    kept_.clear();
    finish_ = nullptr;
    scratch_.reset();
    return status;
  }

 private:
  const char* what_;
  std::string group_;
  std::unique_ptr<unsigned char[]> scratch_;           // what the receives fill, where not in place
  std::vector<c10::intrusive_ptr<c10d::Work>> works_;  // the sends and receives
  std::vector<at::Tensor> kept_;                       // what they read and write, alive until done
  std::function<void()> finish_;
  bool done_ = false;
};

// All-reduces of at most this many bytes (as summed: 16-bit tensors in fp32) go by direct
// exchange — a BatchNorm's statistics up to 256 channels; larger ones by Gloo's ring, whose
// traffic per rank stays about twice the tensor.
constexpr int64_t kDirectAllReduceBytes = 4 << 10;
// The direct exchanges' point-to-point tag (all-reduces and all-gathers): above any pipeline
// transfer's. Messages of one tag between two ranks arrive in the order sent, and every rank of
// a group starts its collectives in the same order, so each receive gets the matching send.
constexpr int kDirectExchangeTag = 0x3fffffff;
// Blocking all-reduces and reduce-scatters of at most this many bytes (as summed) go by direct
// exchange in rounds, not Gloo's ring: a reduce-scatter round (chunk p to rank p, each rank sums
// the chunks it gets) and, for an all-reduce, a gather round. A ring call is handed to Gloo's
// worker thread and takes 2(n−1) hops in sequence, each a wake-up; on this 2-core machine a
// 4-256 KiB all-reduce cost 1.7-2.2 ms on 2 ranks whatever its size, and by two direct rounds
// 0.36-0.42 ms (4 ranks: 4.5-5.9 ms against 2.6-3.4). Tensor parallelism's activations are this
// size. The received chunks ((n−1)/n of the tensor) are the communicator's own memory, as the
// ring's buffers are Gloo's. Larger ones, and the asynchronous all-reduces that overlap
// backward, stay on the ring (Gloo's thread moves them while the rank computes).
constexpr int64_t kDirectRoundsBytes = 256 << 10;

class GlooCommunicator : public Communicator {
 public:
  GlooCommunicator(c10::intrusive_ptr<c10d::ProcessGroupGloo> pg, std::string name)
      : pg_(std::move(pg)), name_(std::move(name)) {}
  int rank() const override { return pg_->getRank(); }
  int size() const override { return pg_->getSize(); }
  const std::string& name() const override { return name_; }

  // The blocking all-reduce: by direct rounds up to kDirectRoundsBytes (a small one by the single
  // exchange of DirectAllReduce), else the asynchronous one waited for at once.
  absl::Status AllReduceSum(at::Tensor& t) override {
    const int64_t summed_bytes = t.numel() * std::max<int64_t>(4, t.element_size());
    if (size() > 1 && summed_bytes > kDirectAllReduceBytes && summed_bytes <= kDirectRoundsBytes) return AllReduceByRounds(t);
    auto pending = AllReduceSumAsync(t);
    if (!pending.ok()) return pending.status();
    return (*pending)->Wait();
  }

  // Gloo (LibTorch 1.13) has no bf16: bf16 (and f16) tensors are summed in fp32 (an fp32 copy
  // for the call, written back rounded at Wait) and moved by the other collectives as f16 bits.
  absl::StatusOr<std::unique_ptr<PendingCollective>> AllReduceSumAsync(at::Tensor& t) override {
    if (size() > 1 && t.numel() * std::max<int64_t>(4, t.element_size()) <= kDirectAllReduceBytes) return DirectAllReduce(t);
    try {
      const bool narrow = Is16BitFloat(t);
      std::vector<at::Tensor> v{narrow ? t.to(at::kFloat) : t};
      auto work = pg_->allreduce(v);
      return std::unique_ptr<PendingCollective>(new PendingAllReduce(std::move(work), std::move(v), narrow ? t : at::Tensor(), name_));
    } catch (const std::exception& e) {
      return FromTorch(name_, "all-reduce", e);
    }
  }

  // By AllGatherInto's direct exchange.
  absl::StatusOr<at::Tensor> AllGather(const at::Tensor& local, int64_t dim) override { return AllGatherByInto(*this, local, dim); }

  absl::Status AllGatherInto(const at::Tensor& local, at::Tensor& out) override {
    auto pending = AllGatherIntoAsync(local, out);
    if (!pending.ok()) return pending.status();
    return (*pending)->Wait();
  }

  // By direct exchange, not Gloo's ring: this rank's row goes to every other rank and theirs
  // come straight into their rows of `out` — one message hop where the ring takes n − 1 in
  // sequence, each a wake-up of a process that may not be running (ranks > cores here), the
  // same bytes through each rank, and no flat receive buffer beside `out`.
  absl::StatusOr<std::unique_ptr<PendingCollective>> AllGatherIntoAsync(const at::Tensor& local, at::Tensor& out) override {
    try {
      const at::Tensor rows = AsBits(out).view({size(), -1});
      at::Tensor own = AsBits(local.contiguous()).view({-1});
      if (!own.is_same(rows[rank()])) rows[rank()].copy_(own);
      std::vector<at::Tensor> kept{own, rows};
      auto works = PostExchange([&](int) { return own; }, [&](int peer) { return rows[peer]; });
      return std::unique_ptr<PendingCollective>(new PendingExchange("all-gather", name_, nullptr, std::move(works), std::move(kept), nullptr));
    } catch (const std::exception& e) {
      return FromTorch(name_, "all-gather", e);
    }
  }

  // ReduceScatterRowsAsync: the default, the ring all-reduce of every row. One direct round of
  // sends (row p to rank p, StartSumChunks, asynchronously) made the quickstart's ZeRO-2 step
  // 10-15% faster; it was set aside when ranks died in ZeRO-3 runs, before the cause was found
  // in the timing wrapper (docs/architecture.md) — worth measuring again.

  // Up to kDirectRoundsBytes, one direct round (SumChunks). Above, Gloo has no reduce-scatter on
  // CPU tensors: all-reduce and keep this rank's chunk (twice the traffic of a real one; the
  // result is the same).
  absl::StatusOr<at::Tensor> ReduceScatter(const at::Tensor& full, int64_t dim) override {
    if (size() > 1 && full.numel() * std::max<int64_t>(4, full.element_size()) <= kDirectRoundsBytes) {
      try {
        const at::Tensor summed = Is16BitFloat(full) ? full.to(at::kFloat) : full;
        std::vector<at::Tensor> chunks;
        for (const at::Tensor& c : summed.chunk(size(), dim)) chunks.push_back(c.contiguous());
        at::Tensor mine = chunks[rank()].clone(at::MemoryFormat::Contiguous);  // not a view of `full`
        if (auto st = SumChunks(chunks, mine); !st.ok()) return st;
        return mine.to(full.scalar_type());
      } catch (const std::exception& e) {
        return FromTorch(name_, "reduce-scatter", e);
      }
    }
    at::Tensor sum = full.contiguous().clone();
    if (auto st = AllReduceSum(sum); !st.ok()) return st;
    // A copy: a view would keep the whole sum alive as long as the chunk.
    return sum.chunk(size(), dim)[rank()].clone(at::MemoryFormat::Contiguous);
  }

  absl::StatusOr<at::Tensor> AllToAll(const at::Tensor& local, int64_t split_dim, int64_t concat_dim) override {
    try {
      // Chunk j (along split_dim) goes to rank j: stack the chunks on a new leading dimension
      // so alltoall_base can cut its input in equal contiguous parts.
      at::Tensor in = AsBits(at::stack(local.chunk(size(), split_dim), 0).contiguous());
      at::Tensor out = at::empty_like(in);
      std::vector<int64_t> even;
      WaitAndRelease(pg_->alltoall_base(out, in, even, even));
      std::vector<at::Tensor> parts;
      for (int i = 0; i < size(); ++i) parts.push_back(out[i]);
      return at::cat(parts, concat_dim).view(local.scalar_type());
    } catch (const std::exception& e) {
      return FromTorch(name_, "all-to-all", e);
    }
  }

  absl::Status Barrier() override {
    try {
      WaitAndRelease(pg_->barrier());
      return absl::OkStatus();
    } catch (const std::exception& e) {
      return FromTorch(name_, "barrier", e);
    }
  }

  absl::StatusOr<std::unique_ptr<PendingSend>> Send(const at::Tensor& t, int peer, int tag) override {
    if (auto st = CheckPeer(peer, tag); !st.ok()) return st;
    try {
      std::vector<at::Tensor> v{AsBits(t.contiguous())};
      auto work = pg_->send(v, peer, tag);
      return std::unique_ptr<PendingSend>(new GlooPendingSend(std::move(work), std::move(v), name_));
    } catch (const std::exception& e) {
      return FromTorch(name_, "send", e);
    }
  }

  absl::Status Recv(at::Tensor& t, int peer, int tag) override {
    if (auto st = CheckPeer(peer, tag); !st.ok()) return st;
    if (!t.is_contiguous()) return absl::InvalidArgumentError(absl::StrCat(name_, ": receiving into a non-contiguous tensor"));
    try {
      std::vector<at::Tensor> v{AsBits(t)};
      WaitAndRelease(pg_->recv(v, peer, tag));
      return absl::OkStatus();
    } catch (const std::exception& e) {
      return FromTorch(name_, "receive", e);
    }
  }

 private:
  // For each other rank p of the group, `out(p)` sent to p and `in(p)` received from p (both
  // contiguous; 16-bit floats go as bits), started; their works.
  template <typename Out, typename In>
  std::vector<c10::intrusive_ptr<c10d::Work>> PostExchange(const Out& out, const In& in) {
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    for (int peer = 0; peer < size(); ++peer) {
      if (peer == rank()) continue;
      std::vector<at::Tensor> send{AsBits(out(peer))}, recv{AsBits(in(peer))};
      works.push_back(pg_->send(send, peer, kDirectExchangeTag));
      works.push_back(pg_->recv(recv, peer, kDirectExchangeTag));
    }
    return works;
  }

  // The reduce-scatter round, started: chunks[p] (contiguous, this rank's part for rank p) goes to
  // rank p; the other ranks' parts for this rank come back (into the communicator's own memory)
  // and, at Wait, are added to `mine` (which holds chunks[rank()]'s values; it may be that
  // tensor) in the senders' rank order. Chunk p has the same shape on every rank.
  std::unique_ptr<PendingExchange> StartSumChunks(const std::vector<at::Tensor>& chunks, at::Tensor mine) {
    const int64_t bytes = mine.numel() * static_cast<int64_t>(mine.element_size());
    std::unique_ptr<unsigned char[]> scratch(new unsigned char[static_cast<size_t>(std::max<int64_t>(1, bytes * size()))]);
    std::vector<at::Tensor> received(size());
    for (int peer = 0; peer < size(); ++peer) {
      if (peer != rank()) received[peer] = at::from_blob(scratch.get() + peer * bytes, mine.sizes(), at::TensorOptions().dtype(mine.scalar_type()));
    }
    auto works = PostExchange([&](int peer) { return chunks[peer]; }, [&](int peer) { return received[peer]; });
    std::vector<at::Tensor> kept = chunks;
    kept.push_back(mine);
    auto finish = [mine, received, me = rank()]() mutable {
      for (size_t peer = 0; peer < received.size(); ++peer) {
        if (static_cast<int>(peer) != me) mine.add_(received[peer]);
      }
    };
    return std::make_unique<PendingExchange>("reduce-scatter", name_, std::move(scratch), std::move(works), std::move(kept), std::move(finish));
  }

  absl::Status SumChunks(const std::vector<at::Tensor>& chunks, at::Tensor& mine) {
    try {
      return StartSumChunks(chunks, mine)->Wait();
    } catch (const std::exception& e) {
      return FromTorch(name_, "reduce-scatter", e);
    }
  }

  // An all-reduce in two direct rounds: the reduce-scatter round over `t`'s flat chunks (of
  // ⌈numel / size⌉ elements, the last shorter), then each rank's summed chunk to every other.
  // Every rank ends with the same bits: chunk p is summed once, by rank p.
  absl::Status AllReduceByRounds(at::Tensor& t) {
    try {
      const bool copied = Is16BitFloat(t) || !t.is_contiguous();
      at::Tensor flat = copied ? t.to(Is16BitFloat(t) ? at::kFloat : t.scalar_type()).contiguous().view({-1}) : t.view({-1});
      const int64_t chunk = (flat.numel() + size() - 1) / size();
      std::vector<at::Tensor> chunks;
      for (int p = 0; p < size(); ++p) {
        const int64_t begin = std::min<int64_t>(flat.numel(), p * chunk);
        chunks.push_back(flat.narrow(0, begin, std::min<int64_t>(flat.numel(), begin + chunk) - begin));
      }
      at::Tensor& mine = chunks[rank()];
      if (auto st = SumChunks(chunks, mine); !st.ok()) return st;
      for (auto& work : PostExchange([&](int) { return mine; }, [&](int peer) { return chunks[peer]; })) WaitAndRelease(std::move(work));
      if (copied) t.copy_(flat.view(t.sizes()));
      return absl::OkStatus();
    } catch (const std::exception& e) {
      return FromTorch(name_, "all-reduce", e);
    }
  }

  // A small all-reduce by direct exchange: every rank sends its tensor to every other, and at Wait
  // sums all of them in rank order — the same sum, bit for bit, on every rank. One message hop
  // where Gloo's ring takes 2(n−1) in sequence, each a wake-up of a process that may not be
  // running: for 1 KiB over loopback on this 2-core machine, 2 ranks 0.18 ms against the ring's
  // 0.52 ms, 4 ranks 0.96 ms against 4.95 ms (the per-BatchNorm statistics are this size).
  absl::StatusOr<std::unique_ptr<PendingCollective>> DirectAllReduce(at::Tensor& t) {
    try {
      const at::ScalarType summed = Is16BitFloat(t) ? at::kFloat : t.scalar_type();
      const int64_t bytes = t.numel() * static_cast<int64_t>(c10::elementSize(summed));
      std::unique_ptr<unsigned char[]> scratch(new unsigned char[static_cast<size_t>(bytes * size())]);
      std::vector<at::Tensor> parts(size());
      for (int r = 0; r < size(); ++r) {
        parts[r] = at::from_blob(scratch.get() + r * bytes, t.sizes(), at::TensorOptions().dtype(summed));
      }
      at::Tensor own = parts[rank()];
      own.copy_(t);
      auto works = PostExchange([&](int) { return own; }, [&](int peer) { return parts[peer]; });
      auto finish = [parts, target = t]() mutable {
        at::Tensor sum = parts[0];
        for (size_t r = 1; r < parts.size(); ++r) sum.add_(parts[r]);
        target.copy_(sum);
      };
      return std::unique_ptr<PendingCollective>(
          new PendingExchange("all-reduce", name_, std::move(scratch), std::move(works), {t}, std::move(finish)));
    } catch (const std::exception& e) {
      return FromTorch(name_, "all-reduce", e);
    }
  }

  absl::Status CheckPeer(int peer, int tag) const {
    if (peer < 0 || peer >= size() || peer == rank() || tag < 0) {
      return absl::InvalidArgumentError(absl::StrCat(name_, ": no point-to-point from group rank ", rank(), " to ", peer, " (tag ", tag,
                                                     ") in a group of ", size()));
    }
    return absl::OkStatus();
  }

  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg_;
  std::string name_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<StoreServer>> StoreServer::Start(const std::string& host, int port) {
  try {
    c10d::TCPStoreOptions o;
    o.port = static_cast<std::uint16_t>(port);
    o.isServer = true;
    o.waitWorkers = false;
    return std::unique_ptr<StoreServer>(new TcpStoreServer(c10::make_intrusive<c10d::TCPStore>(host, o)));
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("cannot start the rendezvous store on ", host, ":", port, ": ", e.what()));
  }
}

namespace {

c10::intrusive_ptr<c10d::TCPStore> ConnectStore(const RendezvousOptions& options) {
  c10d::TCPStoreOptions so;
  so.port = static_cast<std::uint16_t>(options.port);
  so.isServer = false;
  so.waitWorkers = false;
  so.timeout = options.timeout;
  return c10::make_intrusive<c10d::TCPStore>(options.host, so);
}

std::string StoreGet(c10d::Store& store, const std::string& key) {
  const std::vector<uint8_t> bytes = store.get(key);
  return std::string(bytes.begin(), bytes.end());
}

void StoreSet(c10d::Store& store, const std::string& key, const std::string& value) {
  store.set(key, std::vector<uint8_t>(value.begin(), value.end()));
}

// Group rank 0 creates the group's shared segment and publishes its name and cookie; every rank
// opens it and says whether it could. All or none: where one cannot (another machine, another
// IPC namespace, a full /dev/shm) the group stays on Gloo, and that rank says why on stderr.
// Rank 0 removes the name once every rank has answered, so nothing stays in /dev/shm.
std::unique_ptr<Communicator> PreferSharedMemory(c10d::Store& store, const RendezvousOptions& options, int rank, int size,
                                                 std::unique_ptr<Communicator> gloo) {
  SharedGroupOptions so;
  so.size = size;
  so.arena_bytes = options.shared_memory_arena_bytes;
  so.timeout = options.timeout;
  std::shared_ptr<SharedSegment> segment;
  absl::Status why = absl::OkStatus();
  if (rank == 0) {
    std::random_device random;
    so.cookie = static_cast<uint64_t>(random()) << 32 | random();
    auto created = SharedSegment::Create(SharedGroupBytes(so));
    why = created.ok() ? InitializeSharedGroup(**created, so) : created.status();
    if (why.ok()) segment = *std::move(created);
    StoreSet(store, "shm/segment", segment ? absl::StrCat(segment->name(), " ", so.cookie) : std::string());
  } else {
    const std::string published = StoreGet(store, "shm/segment");
    const size_t space = published.find(' ');
    if (space != std::string::npos && absl::SimpleAtoi(published.substr(space + 1), &so.cookie)) {
      auto opened = SharedSegment::Open(published.substr(0, space), SharedGroupBytes(so));
      why = opened.ok() ? CheckSharedGroup(**opened, so) : opened.status();
      if (why.ok()) segment = *std::move(opened);
    }
  }
  StoreSet(store, absl::StrCat("shm/ok/", rank), segment ? "1" : "0");
  bool everyone = true;
  for (int r = 0; r < size; ++r) everyone = everyone && StoreGet(store, absl::StrCat("shm/ok/", r)) == "1";
  if (segment) segment->Unlink();
  if (!why.ok()) std::cerr << gloo->name() << ": group rank " << rank << " stays on Gloo: " << why.message() << "\n";
  if (!everyone) return gloo;
  return MakeSharedMemoryCommunicator(std::move(segment), so, rank, std::move(gloo));
}

}  // namespace

absl::Status FinishRendezvous(const RendezvousOptions& options, int rank, int world) {
  if (auto st = options.Validate(); !st.ok()) return st;
  try {
    auto store = ConnectStore(options);
    int64_t done = store->add("mapd/finished", 1);
    const auto deadline = std::chrono::steady_clock::now() + options.timeout;
    while (rank == 0 && done < world) {
      if (std::chrono::steady_clock::now() > deadline) {
        return absl::DeadlineExceededError(absl::StrCat("rank 0: ", world - done, " rank(s) did not finish within ",
                                                        options.timeout.count() / 1000, " s of it"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      done = store->add("mapd/finished", 0);
    }
  } catch (const std::exception& e) {
    return FromTorch(absl::StrCat("rank ", rank), "the last rendezvous", e);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::unique_ptr<Communicator>>> ConnectMeshGroups(const RendezvousOptions& options,
                                                                            const std::vector<int64_t>& mesh, int rank) {
  if (auto st = options.Validate(); !st.ok()) return st;
  int64_t world = 1;
  for (int64_t d : mesh) world *= d;
  if (mesh.empty() || rank < 0 || rank >= world) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " is outside the mesh of ", world, " devices"));
  }
  const std::vector<int64_t> coords = RankCoords(mesh, rank);
  std::vector<std::unique_ptr<Communicator>> groups;
  try {
    auto store = ConnectStore(options);
    for (size_t a = 0; a < mesh.size(); ++a) {
      // The group is named by the coordinates of the other axes.
      std::string id;
      for (size_t b = 0; b < mesh.size(); ++b) absl::StrAppend(&id, b == a ? "*" : std::to_string(coords[b]), ".");
      const std::string name = absl::StrCat("axis ", a, " group ", id);
      auto prefixed = c10::make_intrusive<c10d::PrefixStore>(absl::StrCat("mapd/", name), store);
      if (options.cuda_device >= 0) {
        auto nccl = MakeNcclCommunicator(prefixed, static_cast<int>(coords[a]), static_cast<int>(mesh[a]), options.cuda_device, name);
        if (!nccl.ok()) return nccl.status();
        groups.push_back(*std::move(nccl));
        continue;
      }
      auto opts = c10d::ProcessGroupGloo::Options::create(options.timeout);
      opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(options.local_host));
      auto pg = c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, static_cast<int>(coords[a]),
                                                             static_cast<int>(mesh[a]), opts);
      std::unique_ptr<Communicator> gloo = std::make_unique<GlooCommunicator>(std::move(pg), name);
      if (options.shared_memory_arena_bytes > 0 && mesh[a] > 1) {
        gloo = PreferSharedMemory(*prefixed, options, static_cast<int>(coords[a]), static_cast<int>(mesh[a]), std::move(gloo));
      }
      groups.push_back(std::move(gloo));
    }
  } catch (const std::exception& e) {
    return FromTorch(absl::StrCat("rank ", rank), "rendezvous", e);
  }
  return groups;
}

}  // namespace mapd

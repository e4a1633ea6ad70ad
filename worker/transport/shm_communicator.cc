#include "worker/transport/shm_communicator.h"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <deque>
#include <functional>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace mapd {

// ---------------------------------------------------------------------------------------------
// The segment.

absl::StatusOr<std::unique_ptr<SharedSegment>> SharedSegment::Create(int64_t bytes) {
  if (bytes <= 0) return absl::InvalidArgumentError(absl::StrCat("a shared segment of ", bytes, " bytes"));
  std::random_device random;
  const std::string name = absl::StrCat("/mapd-", getpid(), "-", absl::Hex(static_cast<uint64_t>(random()) << 32 | random()));
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("shm_open(", name, "): ", std::strerror(errno)));
  auto fail = [&](absl::Status status) {
    close(fd);
    shm_unlink(name.c_str());
    return status;
  };
  if (ftruncate(fd, bytes) != 0) return fail(absl::ResourceExhaustedError(absl::StrCat("ftruncate(", name, "): ", std::strerror(errno))));
  if (const int err = posix_fallocate(fd, 0, bytes); err != 0) {
    return fail(absl::ResourceExhaustedError(
        absl::StrCat("cannot reserve ", bytes >> 20, " MiB of shared memory (", std::strerror(err),
                     "): /dev/shm is too small (a container's default is 64 MiB; give it more, or set MAPD_SHARED_MEMORY_MIB lower or to 0)")));
  }
  void* data = mmap(nullptr, static_cast<size_t>(bytes), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) return fail(absl::ResourceExhaustedError(absl::StrCat("mmap(", name, "): ", std::strerror(errno))));
  close(fd);
  return std::unique_ptr<SharedSegment>(new SharedSegment(name, static_cast<unsigned char*>(data), bytes));
}

absl::StatusOr<std::unique_ptr<SharedSegment>> SharedSegment::Open(const std::string& name, int64_t bytes) {
  const int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) return absl::FailedPreconditionError(absl::StrCat("shm_open(", name, "): ", std::strerror(errno)));
  struct stat st {};
  if (fstat(fd, &st) != 0 || st.st_size < bytes) {
    close(fd);
    return absl::FailedPreconditionError(absl::StrCat("shared segment ", name, " is smaller than ", bytes, " bytes"));
  }
  void* data = mmap(nullptr, static_cast<size_t>(bytes), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (data == MAP_FAILED) return absl::ResourceExhaustedError(absl::StrCat("mmap(", name, "): ", std::strerror(errno)));
  auto segment = std::unique_ptr<SharedSegment>(new SharedSegment(name, static_cast<unsigned char*>(data), bytes));
  segment->unlinked_ = true;  // the creator's name to remove, not ours
  return segment;
}

SharedSegment::~SharedSegment() {
  munmap(data_, static_cast<size_t>(bytes_));
  Unlink();
}

void SharedSegment::Unlink() {
  if (!unlinked_) shm_unlink(name_.c_str());
  unlinked_ = true;
}

// ---------------------------------------------------------------------------------------------
// The layout: a header, one RankCounters per rank, then one arena per rank.

namespace {

constexpr uint64_t kMagic = 0x314d48534450414dULL;  // "MAPDSHM1"
constexpr int kJournalLength = 64;
constexpr int64_t kAlign = 64;

static_assert(std::atomic<int64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free,
              "the counters are shared between processes: they must be lock-free");

enum class OpKind : int64_t { kAllReduce = 1, kReduceScatter = 2, kGather = 3, kBarrier = 4, kAllToAll = 6 };

const char* KindName(OpKind kind) {
  switch (kind) {
    case OpKind::kAllReduce: return "all-reduce";
    case OpKind::kReduceScatter: return "reduce-scatter";
    case OpKind::kAllToAll: return "all-to-all";
    case OpKind::kGather: return "all-gather";
    case OpKind::kBarrier: return "barrier";
  }
  return "collective";
}

struct alignas(kAlign) Header {
  uint64_t magic;
  uint64_t cookie;
  int64_t size;
  int64_t arena_bytes;
  alignas(kAlign) std::atomic<uint32_t> epoch;  // the futex word: bumped at every counter change
  std::atomic<uint32_t> sleepers;                // ranks asleep on it (no wake-up syscall when 0)
};

// What one rank has done, in collective sequence numbers (1, 2, … in the group's order).
struct alignas(kAlign) RankCounters {
  std::atomic<int64_t> arrived;   // the last collective whose input it has written into its arena
  std::atomic<int64_t> reduced;   // the last all-reduce whose summed chunk it has written back
  std::atomic<int64_t> consumed;  // the last collective it has finished reading the arenas for
  // What it said each recent collective was, so a peer can check that all agree (a seqlock:
  // `seq` is written last and read first and last).
  struct Entry {
    std::atomic<int64_t> seq, kind, offset, bytes;
  } journal[kJournalLength];
};

int64_t AlignUp(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
int64_t CountersOffset() { return AlignUp(sizeof(Header)); }
int64_t ArenasOffset(int size) { return CountersOffset() + AlignUp(static_cast<int64_t>(sizeof(RankCounters)) * size); }

}  // namespace

absl::Status SharedGroupOptions::Validate() const {
  if (size < 2) return absl::InvalidArgumentError(absl::StrCat("a shared-memory group of ", size, " rank(s): it needs two or more"));
  if (arena_bytes <= 0 || arena_bytes % kAlign != 0 || arena_bytes > (int64_t{1} << 40)) {
    return absl::InvalidArgumentError(absl::StrCat("shared-memory arena of ", arena_bytes, " bytes: a positive multiple of 64 up to 1 TiB"));
  }
  if (timeout.count() <= 0) return absl::InvalidArgumentError("shared-memory timeout must be positive");
  return absl::OkStatus();
}

int64_t SharedGroupBytes(const SharedGroupOptions& options) { return ArenasOffset(options.size) + options.arena_bytes * options.size; }

absl::Status InitializeSharedGroup(SharedSegment& segment, const SharedGroupOptions& options) {
  if (auto st = options.Validate(); !st.ok()) return st;
  if (segment.bytes() < SharedGroupBytes(options)) return absl::InvalidArgumentError("shared segment too small for its group");
  // The segment is fresh (zero-filled by the kernel): the atomics start at 0 as they are.
  auto* header = reinterpret_cast<Header*>(segment.data());
  header->cookie = options.cookie;
  header->size = options.size;
  header->arena_bytes = options.arena_bytes;
  std::atomic_thread_fence(std::memory_order_release);
  header->magic = kMagic;
  return absl::OkStatus();
}

absl::Status CheckSharedGroup(const SharedSegment& segment, const SharedGroupOptions& options) {
  if (segment.bytes() < SharedGroupBytes(options)) return absl::FailedPreconditionError("shared segment too small for its group");
  const auto* header = reinterpret_cast<const Header*>(segment.data());
  if (header->magic != kMagic || header->cookie != options.cookie || header->size != options.size ||
      header->arena_bytes != options.arena_bytes) {
    return absl::FailedPreconditionError(absl::StrCat("shared segment ", segment.name(), " is not this group's (another run's, or not laid out)"));
  }
  return absl::OkStatus();
}

namespace {

void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

long Futex(std::atomic<uint32_t>* word, int op, uint32_t value, const timespec* timeout) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value, timeout, nullptr, 0);
}

// One collective as this rank started it.
struct Op {
  int64_t seq = 0;
  OpKind kind = OpKind::kBarrier;
  int64_t offset = 0, bytes = 0;  // its region, the same in every rank's arena
  // Where the result goes — all-reduce: the tensor; reduce-scatter: this rank's chunk (a row of
  // the rows, or the chunk returned); gather: the output. An all-to-all makes `result` (concatenated along concat_dim
  // from pieces of `piece_shape`).
  at::Tensor target, result;
  std::vector<int64_t> piece_shape;
  int64_t concat_dim = 0;
  int64_t numel = 0;              // elements of the input in the arena
  at::ScalarType type = at::kFloat;
  bool finished = false;
  absl::Status status;
};

// The group as this rank sees it: what the communicator and its pending collectives share.
class SharedGroup {
 public:
  SharedGroup(std::shared_ptr<SharedSegment> segment, const SharedGroupOptions& options, int rank, std::string name)
      : segment_(std::move(segment)), options_(options), rank_(rank), name_(std::move(name)) {
    header_ = reinterpret_cast<Header*>(segment_->data());
    counters_ = reinterpret_cast<RankCounters*>(segment_->data() + CountersOffset());
    arenas_ = segment_->data() + ArenasOffset(options.size);
  }
  int rank() const { return rank_; }
  int size() const { return options_.size; }
  const std::string& name() const { return name_; }

  // Whether a collective of `bytes` in arena is carried here (the same answer on every rank).
  bool Fits(int64_t bytes) const { return bytes <= options_.arena_bytes; }

  // Starts a collective: claims its region, writes this rank's input there with `fill`, and
  // publishes it. `user_waits`: the caller will Wait for it (it counts as under way until then).
  absl::StatusOr<std::shared_ptr<Op>> Start(std::shared_ptr<Op> op, const std::function<void(unsigned char*)>& fill, bool user_waits);
  // Finishes this rank's collectives up to and including `seq`, oldest first.
  absl::Status FinishThrough(int64_t seq);
  absl::Status FinishAll() { return FinishThrough(INT64_MAX); }
  void Waited() { --user_outstanding_; }

 private:
  unsigned char* Arena(int r) const { return arenas_ + options_.arena_bytes * r; }
  at::Tensor View(int r, const Op& op) const {
    return at::from_blob(Arena(r) + op.offset, {op.numel}, at::TensorOptions().dtype(op.type));
  }
  absl::Status Execute(Op& op);
  absl::Status CheckAgreement(const Op& op) const;
  void Publish(std::atomic<int64_t>& counter, int64_t value);
  // Waits until `counter` of every rank of the group is at least `seq`.
  absl::Status AwaitAll(std::atomic<int64_t> RankCounters::*counter, int64_t seq, const char* what, const Op* op);
  int64_t MinConsumed() const;

  std::shared_ptr<SharedSegment> segment_;
  SharedGroupOptions options_;
  int rank_;
  std::string name_;
  Header* header_;
  RankCounters* counters_;
  unsigned char* arenas_;

  int64_t next_seq_ = 1;
  int64_t head_ = 0;                            // where the next region starts
  int user_outstanding_ = 0;                    // started, the caller's Wait still to come
  std::deque<std::shared_ptr<Op>> unfinished_;  // started, not yet read by this rank (oldest first)
  struct Region {
    int64_t seq, begin, end;
  };
  std::deque<Region> live_;  // regions a peer may still read (oldest first)
  absl::Status broken_;      // once a wait failed, the group is unusable
};

void SharedGroup::Publish(std::atomic<int64_t>& counter, int64_t value) {
  counter.store(value, std::memory_order_seq_cst);
  header_->epoch.fetch_add(1, std::memory_order_seq_cst);
  if (header_->sleepers.load(std::memory_order_seq_cst) > 0) Futex(&header_->epoch, FUTEX_WAKE, INT_MAX, nullptr);
}

absl::Status SharedGroup::AwaitAll(std::atomic<int64_t> RankCounters::*counter, int64_t seq, const char* what, const Op* op) {
  auto ready = [&] {
    for (int r = 0; r < size(); ++r) {
      if ((counters_[r].*counter).load(std::memory_order_acquire) < seq) return false;
    }
    return true;
  };
  // A short spin: where every rank has a core of its own the peer is usually microseconds away.
  for (int i = 0; i < 256; ++i) {
    if (ready()) return absl::OkStatus();
    CpuRelax();
  }
  const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  while (true) {
    const uint32_t epoch = header_->epoch.load(std::memory_order_seq_cst);
    if (ready()) return absl::OkStatus();
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) break;
    // Sleep until a counter changes (bounded, so that the deadline is seen).
    const auto nap = std::min<std::chrono::nanoseconds>(deadline - now, std::chrono::milliseconds(100));
    const timespec ts{static_cast<time_t>(nap.count() / 1000000000), static_cast<long>(nap.count() % 1000000000)};
    header_->sleepers.fetch_add(1, std::memory_order_seq_cst);
    if (!ready()) Futex(&header_->epoch, FUTEX_WAIT, epoch, &ts);
    header_->sleepers.fetch_sub(1, std::memory_order_seq_cst);
  }
  std::vector<int> late;
  for (int r = 0; r < size(); ++r) {
    if ((counters_[r].*counter).load() < seq) late.push_back(r);
  }
  broken_ = absl::DeadlineExceededError(absl::StrCat(
      name_, ": group rank(s) ", absl::StrJoin(late, ", "), " did not ", what, " collective #", seq,
      op != nullptr ? absl::StrCat(" (", KindName(op->kind), ")") : std::string(), " within ", options_.timeout.count() / 1000,
      " s (shared memory): a rank is gone, hung, or called collectives in a different order"));
  return broken_;
}

int64_t SharedGroup::MinConsumed() const {
  int64_t least = INT64_MAX;
  for (int r = 0; r < size(); ++r) least = std::min(least, counters_[r].consumed.load(std::memory_order_acquire));
  return least;
}

absl::StatusOr<std::shared_ptr<Op>> SharedGroup::Start(std::shared_ptr<Op> op, const std::function<void(unsigned char*)>& fill,
                                                       bool user_waits) {
  if (!broken_.ok()) return broken_;
  // Where it goes depends only on what every rank did before in the group's order: the start of
  // the arena when nothing is under way (so a step's collectives reuse the same pages), else
  // after the last region, wrapping round at the end.
  if (user_outstanding_ == 0) head_ = 0;
  if (head_ + op->bytes > options_.arena_bytes) head_ = 0;
  op->offset = head_;
  const int64_t end = head_ + op->bytes;
  // The region must be free: every rank done reading the collectives that used it before.
  int64_t needed = 0;
  while (!live_.empty() && live_.front().seq <= MinConsumed()) live_.pop_front();
  for (const Region& region : live_) {
    if (region.begin < end && op->offset < region.end) needed = std::max(needed, region.seq);
  }
  if (needed > 0) {
    if (auto st = FinishThrough(needed); !st.ok()) return st;
    if (auto st = AwaitAll(&RankCounters::consumed, needed, "finish reading", nullptr); !st.ok()) return st;
  }
  head_ = AlignUp(end);
  op->seq = next_seq_++;
  fill(Arena(rank_) + op->offset);
  RankCounters::Entry& entry = counters_[rank_].journal[op->seq % kJournalLength];
  entry.seq.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  entry.kind.store(static_cast<int64_t>(op->kind), std::memory_order_relaxed);
  entry.offset.store(op->offset, std::memory_order_relaxed);
  entry.bytes.store(op->bytes, std::memory_order_relaxed);
  entry.seq.store(op->seq, std::memory_order_release);
  Publish(counters_[rank_].arrived, op->seq);
  if (op->bytes > 0) live_.push_back({op->seq, op->offset, end});
  unfinished_.push_back(op);
  if (user_waits) ++user_outstanding_;
  return op;
}

absl::Status SharedGroup::CheckAgreement(const Op& op) const {
  for (int r = 0; r < size(); ++r) {
    const RankCounters::Entry& entry = counters_[r].journal[op.seq % kJournalLength];
    if (entry.seq.load(std::memory_order_acquire) != op.seq) continue;  // already overwritten: nothing to compare
    const int64_t kind = entry.kind.load(std::memory_order_relaxed), offset = entry.offset.load(std::memory_order_relaxed),
                  bytes = entry.bytes.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (entry.seq.load(std::memory_order_acquire) != op.seq) continue;
    if (kind != static_cast<int64_t>(op.kind) || offset != op.offset || bytes != op.bytes) {
      return absl::InternalError(absl::StrCat(name_, ": collective #", op.seq, " is a ", KindName(op.kind), " of ", op.bytes,
                                              " bytes on group rank ", rank_, " but a ", KindName(static_cast<OpKind>(kind)), " of ",
                                              bytes, " bytes on group rank ", r, ": the ranks called collectives in a different order"));
    }
  }
  return absl::OkStatus();
}

absl::Status SharedGroup::FinishThrough(int64_t seq) {
  while (!unfinished_.empty() && unfinished_.front()->seq <= seq) {
    std::shared_ptr<Op> op = unfinished_.front();
    unfinished_.pop_front();
    op->status = broken_.ok() ? Execute(*op) : broken_;
    op->finished = true;
    op->target = at::Tensor();
    if (!op->status.ok()) {
      if (broken_.ok()) broken_ = op->status;
      return op->status;
    }
  }
  return broken_;
}

// Element range [begin, end) of chunk `j` of `numel` split `parts` ways (the first chunks one
// longer where it does not divide).
std::pair<int64_t, int64_t> Chunk(int64_t numel, int parts, int j) {
  const int64_t base = numel / parts, extra = numel % parts;
  const int64_t begin = j * base + std::min<int64_t>(j, extra);
  return {begin, begin + base + (j < extra ? 1 : 0)};
}

bool Is16Bit(at::ScalarType type) { return type == at::kHalf || type == at::kBFloat16; }

// Σ over `parts` in order into `out` (16-bit floats summed in fp32, rounded once).
void SumInto(const std::vector<at::Tensor>& parts, at::Tensor out) {
  at::Tensor sum = Is16Bit(parts[0].scalar_type()) ? parts[0].to(at::kFloat) : parts[0].clone();
  for (size_t s = 1; s < parts.size(); ++s) sum.add_(parts[s]);
  out.copy_(sum);
}

absl::Status SharedGroup::Execute(Op& op) {
  if (auto st = AwaitAll(&RankCounters::arrived, op.seq, "start", &op); !st.ok()) return st;
  if (auto st = CheckAgreement(op); !st.ok()) return st;
  const int n = size();
  try {
    switch (op.kind) {
      case OpKind::kAllReduce: {
        // Each rank sums its chunk of every arena and writes the sum back into its own arena;
        // then every rank copies every chunk's sum: the same bits everywhere.
        at::Tensor flat = op.target.view({-1});
        auto [begin, end] = Chunk(op.numel, n, rank_);
        std::vector<at::Tensor> parts;
        for (int r = 0; r < n; ++r) parts.push_back(View(r, op).slice(0, begin, end));
        at::Tensor mine = flat.slice(0, begin, end);
        SumInto(parts, mine);
        parts[rank_].copy_(mine);
        Publish(counters_[rank_].reduced, op.seq);
        if (auto st = AwaitAll(&RankCounters::reduced, op.seq, "sum its chunk of", &op); !st.ok()) return st;
        for (int r = 0; r < n; ++r) {
          if (r == rank_) continue;
          auto [b, e] = Chunk(op.numel, n, r);
          flat.slice(0, b, e).copy_(View(r, op).slice(0, b, e));
        }
        break;
      }
      case OpKind::kReduceScatter: {  // every region is n equal chunks
        const int64_t chunk = op.numel / n;
        std::vector<at::Tensor> parts;
        for (int r = 0; r < n; ++r) parts.push_back(View(r, op).slice(0, rank_ * chunk, (rank_ + 1) * chunk));
        SumInto(parts, op.target.view({-1}));
        break;
      }
      case OpKind::kAllToAll: {
        const int64_t piece = op.numel / n;
        std::vector<at::Tensor> pieces;
        for (int r = 0; r < n; ++r) pieces.push_back(View(r, op).slice(0, rank_ * piece, (rank_ + 1) * piece).view(op.piece_shape));
        op.result = at::cat(pieces, op.concat_dim);
        break;
      }
      case OpKind::kGather: {
        at::Tensor out = op.target.view({-1});
        for (int r = 0; r < n; ++r) out.slice(0, r * op.numel, (r + 1) * op.numel).copy_(View(r, op));
        break;
      }
      case OpKind::kBarrier:
        break;
    }
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(name_, ": ", KindName(op.kind), " #", op.seq, " failed: ", e.what()));
  }
  Publish(counters_[rank_].consumed, op.seq);
  return absl::OkStatus();
}

class SharedPending final : public PendingCollective {
 public:
  SharedPending(std::shared_ptr<SharedGroup> group, std::shared_ptr<Op> op) : group_(std::move(group)), op_(std::move(op)) {}
  ~SharedPending() override {
    if (group_) group_->Waited();  // never waited for: it finishes at the group's next blocking point
  }
  absl::Status Wait() override {
    if (!group_) return op_->status;
    group_->Waited();
    auto group = std::move(group_);
    if (op_->finished) return op_->status;
    const absl::Status earlier = group->FinishThrough(op_->seq);  // fails at an earlier collective: the group is broken
    return op_->finished ? op_->status : earlier;
  }

 private:
  std::shared_ptr<SharedGroup> group_;
  std::shared_ptr<Op> op_;
};

// A CPU tensor of a type this transport sums and moves.
bool CarriedType(const at::Tensor& t) { return t.defined() && t.device().is_cpu() && t.scalar_type() != at::kBool && !t.is_complex(); }
// The same, contiguous: copied in and out of the arena as it is.
bool Carried(const at::Tensor& t) { return CarriedType(t) && t.is_contiguous(); }

class SharedMemoryCommunicator final : public Communicator {
 public:
  SharedMemoryCommunicator(std::shared_ptr<SharedSegment> segment, const SharedGroupOptions& options, int rank,
                           std::unique_ptr<Communicator> fallback)
      : group_(std::make_shared<SharedGroup>(std::move(segment), options, rank, fallback->name())), fallback_(std::move(fallback)) {}

  int rank() const override { return group_->rank(); }
  int size() const override { return group_->size(); }
  const std::string& name() const override { return group_->name(); }

  absl::Status AllReduceSum(at::Tensor& t) override { return Blocking(AllReduceSumAsync(t)); }
  absl::StatusOr<std::unique_ptr<PendingCollective>> AllReduceSumAsync(at::Tensor& t) override {
    if (!Carried(t) || !group_->Fits(Bytes(t))) return Drained([&] { return fallback_->AllReduceSumAsync(t); });
    return StartOp(OpKind::kAllReduce, t, t);
  }
  absl::StatusOr<std::unique_ptr<PendingCollective>> ReduceScatterRowsAsync(at::Tensor& rows) override {
    if (!Carried(rows) || rows.dim() != 2 || rows.size(0) != size() || !group_->Fits(Bytes(rows))) {
      return Drained([&] { return fallback_->ReduceScatterRowsAsync(rows); });
    }
    return StartOp(OpKind::kReduceScatter, rows, rows[rank()]);
  }
  absl::Status AllGatherInto(const at::Tensor& local, at::Tensor& out) override { return Blocking(AllGatherIntoAsync(local, out)); }
  absl::StatusOr<std::unique_ptr<PendingCollective>> AllGatherIntoAsync(const at::Tensor& local, at::Tensor& out) override {
    // `local` may be strided (attention's heads under tensor parallelism: two a step had gone
    // to Gloo, 3-8 ms of a 2-rank step): it is copied into the arena element by element anyway.
    if (!CarriedType(local) || !Carried(out) || out.scalar_type() != local.scalar_type() || out.numel() != local.numel() * size() ||
        !group_->Fits(Bytes(local))) {
      return Drained([&] { return fallback_->AllGatherIntoAsync(local, out); });
    }
    return StartOp(OpKind::kGather, local, out);
  }
  absl::Status Barrier() override {
    auto op = std::make_shared<Op>();
    op->kind = OpKind::kBarrier;
    return RunBlocking(op, [](unsigned char*) {});
  }

  absl::StatusOr<at::Tensor> AllGather(const at::Tensor& local, int64_t dim) override { return AllGatherByInto(*this, local, dim); }
  // Σ of `full`, this rank's chunk along `dim`: each rank's chunks go into its region one after
  // the other, and each rank sums its chunk of every region.
  absl::StatusOr<at::Tensor> ReduceScatter(const at::Tensor& full, int64_t dim) override {
    if (!EvenlySplit(full, dim)) return Drained([&] { return fallback_->ReduceScatter(full, dim); });
    const std::vector<at::Tensor> chunks = full.chunk(size(), dim);
    auto op = NewOp(OpKind::kReduceScatter, full);
    op->target = at::empty(chunks[0].sizes(), full.options().memory_format(at::MemoryFormat::Contiguous));
    at::Tensor out = op->target;
    if (auto st = RunBlocking(op, ChunkFill(chunks)); !st.ok()) return st;
    return out;
  }
  // Chunk j of `local` along split_dim into this rank's region, in order; each rank reads its
  // piece of every region and concatenates them along concat_dim.
  absl::StatusOr<at::Tensor> AllToAll(const at::Tensor& local, int64_t split_dim, int64_t concat_dim) override {
    if (!EvenlySplit(local, split_dim) || concat_dim < 0 || concat_dim >= local.dim()) {
      return Drained([&] { return fallback_->AllToAll(local, split_dim, concat_dim); });
    }
    const std::vector<at::Tensor> chunks = local.chunk(size(), split_dim);
    auto op = NewOp(OpKind::kAllToAll, local);
    op->piece_shape = chunks[0].sizes().vec();
    op->concat_dim = concat_dim;
    if (auto st = RunBlocking(op, ChunkFill(chunks)); !st.ok()) return st;
    return op->result;
  }
  absl::StatusOr<std::unique_ptr<PendingSend>> Send(const at::Tensor& t, int peer, int tag) override {
    return Drained([&] { return fallback_->Send(t, peer, tag); });
  }
  absl::Status Recv(at::Tensor& t, int peer, int tag) override {
    return Drained([&] { return fallback_->Recv(t, peer, tag); });
  }

 private:
  static int64_t Bytes(const at::Tensor& t) { return t.numel() * static_cast<int64_t>(t.element_size()); }

  // The fallback carries it once every collective here under way has finished (in the group's
  // order, which the two transports would otherwise not share).
  template <typename F>
  auto Drained(F&& call) -> decltype(call()) {
    if (auto st = group_->FinishAll(); !st.ok()) return st;
    return call();
  }

  absl::Status Blocking(absl::StatusOr<std::unique_ptr<PendingCollective>> pending) {
    if (!pending.ok()) return pending.status();
    return (*pending)->Wait();
  }

  // Whether `t` splits evenly along `dim` into pieces this transport carries.
  bool EvenlySplit(const at::Tensor& t, int64_t dim) const {
    return CarriedType(t) && dim >= 0 && dim < t.dim() && t.size(dim) % size() == 0 && group_->Fits(Bytes(t));
  }

  static std::shared_ptr<Op> NewOp(OpKind kind, const at::Tensor& input) {
    auto op = std::make_shared<Op>();
    op->kind = kind;
    op->numel = input.numel();
    op->type = input.scalar_type();
    op->bytes = Bytes(input);
    return op;
  }

  // Fills a region with `chunks` (equal sizes) one after the other.
  static std::function<void(unsigned char*)> ChunkFill(std::vector<at::Tensor> chunks) {
    return [chunks = std::move(chunks)](unsigned char* region) {
      const int64_t bytes = Bytes(chunks[0]);
      for (size_t j = 0; j < chunks.size(); ++j) {
        at::from_blob(region + j * bytes, chunks[j].sizes(), at::TensorOptions().dtype(chunks[j].scalar_type())).copy_(chunks[j]);
      }
    };
  }

  absl::Status RunBlocking(const std::shared_ptr<Op>& op, const std::function<void(unsigned char*)>& fill) {
    auto started = group_->Start(op, fill, /*user_waits=*/false);
    if (!started.ok()) return started.status();
    if (auto st = group_->FinishThrough(op->seq); !st.ok()) return st;
    return op->status;
  }

  absl::StatusOr<std::unique_ptr<PendingCollective>> StartOp(OpKind kind, const at::Tensor& input, const at::Tensor& target) {
    auto op = NewOp(kind, input);
    op->target = target;
    auto started = group_->Start(
        op,
        [&](unsigned char* region) {
          at::from_blob(region, input.sizes(), at::TensorOptions().dtype(op->type)).copy_(input);  // strided or not: one copy
        },
        /*user_waits=*/true);
    if (!started.ok()) return started.status();
    return std::unique_ptr<PendingCollective>(new SharedPending(group_, op));
  }

  std::shared_ptr<SharedGroup> group_;
  std::unique_ptr<Communicator> fallback_;
};

}  // namespace

std::unique_ptr<Communicator> MakeSharedMemoryCommunicator(std::shared_ptr<SharedSegment> segment, const SharedGroupOptions& options,
                                                           int rank, std::unique_ptr<Communicator> fallback) {
  return std::make_unique<SharedMemoryCommunicator>(std::move(segment), options, rank, std::move(fallback));
}

}  // namespace mapd

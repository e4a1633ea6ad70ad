#include "worker/calibrate/calibrate.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "model/ir/attrs.h"
#include "model/ops/cost.h"
#include "model/ops/registry.h"
#include "worker/transport/gloo_communicator.h"
#include "worker/runtime/blas_threads.h"

namespace mapd {

absl::Status CalibrateOptions::Validate() const {
  if (name.empty()) return absl::InvalidArgumentError("calibrate: the profile needs a name");
  if (matmul_size < 64 || matmul_size > 8192) {
    return absl::InvalidArgumentError(absl::StrCat("calibrate: matmul_size must be 64..8192, got ", matmul_size));
  }
  if (copy_bytes < (1 << 20)) return absl::InvalidArgumentError("calibrate: copy_bytes must be at least 1 MiB");
  if (!(min_seconds > 0)) return absl::InvalidArgumentError("calibrate: min_seconds must be positive");
  if (rounds < 1 || rounds > 9) return absl::InvalidArgumentError(absl::StrCat("calibrate: rounds must be 1..9, got ", rounds));
  for (int64_t n : collective_ranks) {
    if (n < 2 || n > 8) return absl::InvalidArgumentError(absl::StrCat("calibrate: collective group sizes must be 2..8, got ", n));
  }
  return absl::OkStatus();
}

namespace {

// Seconds per call of `fn`, from repeated calls filling `min_seconds` (after one warm-up).
double TimePerCall(const std::function<void()>& fn, double min_seconds) {
  using Clock = std::chrono::steady_clock;
  fn();
  int64_t calls = 0;
  const auto start = Clock::now();
  double elapsed = 0;
  do {
    fn();
    ++calls;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed < min_seconds);
  return elapsed / static_cast<double>(calls);
}

// The median of `v` (the mean of the middle two for an even count).
double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 == 1 ? v[h] : (v[h - 1] + v[h]) / 2;
}

// One step of a small MLP trained as a rank trains (forward and backward: matrix products, GELU,
// layer norm, a sum; a few milliseconds here).
struct SmallTrainingStep {
  explicit SmallTrainingStep(int64_t rows = 256) : x(at::randn({rows, 128})) {}
  at::Tensor x;
  at::Tensor w1 = (at::randn({512, 128}) * 0.05).requires_grad_(true);
  at::Tensor w2 = (at::randn({128, 512}) * 0.05).requires_grad_(true);
  void operator()() {
    at::Tensor h = at::gelu(at::linear(x, w1));
    at::layer_norm(at::linear(h, w2), {128}).square().sum().backward();
    w1.mutable_grad().reset();
    w2.mutable_grad().reset();
  }
};

constexpr int64_t kBusyAllReduceBytes = 64 << 10;
// Rows of the step computed between them: a quarter of SmallTrainingStep's (~0.5 ms alone here),
// as where collectives are many and their latency counts (tensor parallelism: 17 a step, ~1 ms
// of compute apart; MAP's 2x2 plan 58, ~0.3 ms apart). With 256 rows (~5 ms apart among 4 ranks
// on 2 threads, each set aside for whole time slices) an exchange measured 4.1-4.2 ms where
// tensor parallelism's took 2.9.
constexpr int64_t kBusyStepRows = 64;

// What a blocking all-reduce of an activation's size (64 KiB: two direct rounds, as tensor
// parallelism's are) costs `group`'s ranks when each computes a SmallTrainingStep between
// two of them, as a step's ranks compute between collectives: in each of 5 rounds, the mean
// time inside the all-reduce call over that many (step, all-reduce) pairs — the latency and the
// waits for peers that ran slower or were set aside, what the runtime's collective time counts;
// the median of the rounds (one round's steps may run slow for reasons of their own). (The time
// of the pairs beyond that of the steps alone, measured before, was the difference of two long
// noisy spans: 2.6 to 5.3 ms for 4 ranks from run to run.)
absl::StatusOr<double> BusyAllReduceSeconds(Communicator& group, int repeats) {
  using Clock = std::chrono::steady_clock;
  SmallTrainingStep step(kBusyStepRows);
  at::Tensor t = at::ones({kBusyAllReduceBytes / 4});
  step();
  constexpr int kRounds = 5;
  const int pairs = std::max(2, repeats / 2);
  std::vector<double> inside;
  for (int round = 0; round < kRounds; ++round) {
    if (auto st = group.AllReduceSum(t); !st.ok()) return st;  // lined up
    double seconds = 0;
    for (int i = 0; i < pairs; ++i) {
      step();
      const auto start = Clock::now();
      if (auto st = group.AllReduceSum(t); !st.ok()) return st;
      seconds += std::chrono::duration<double>(Clock::now() - start).count();
    }
    inside.push_back(seconds / pairs);
  }
  return Median(std::move(inside));
}

// Rank `rank` of `ranks` in a process of its own: joins the group at the store on `port`, times
// `repeats` all-reduces of each size (after two unmeasured) and then BusyAllReduceSeconds, and
// rank 0 writes their mean seconds to `fd` — the mean, not the median: a rank the scheduler has
// set aside costs the others a tick (4 ms here) now and then, and a step pays those too. The
// process's exit code says whether it could.
int AllReduceRank(int port, int64_t ranks, int64_t rank, const std::vector<int64_t>& bytes, int repeats, int fd) {
  RendezvousOptions ro;
  ro.port = port;
  ro.timeout = std::chrono::milliseconds(30000);
  if (!ApplySharedMemoryEnvironment(ro).ok()) return 1;  // the transport the ranks of a run use
  auto groups = ConnectMeshGroups(ro, {ranks}, static_cast<int>(rank));
  if (!groups.ok()) return 1;
  Communicator& group = *(*groups)[0];
  std::vector<double> means;
  for (int64_t size : bytes) {
    at::Tensor t = at::ones({std::max<int64_t>(1, size / 4)});
    double total = 0;
    for (int i = 0; i < repeats + 2; ++i) {
      const auto start = std::chrono::steady_clock::now();
      if (!group.AllReduceSum(t).ok()) return 1;
      if (i >= 2) total += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    means.push_back(total / repeats);
  }
  auto busy = BusyAllReduceSeconds(group, repeats);
  if (!busy.ok()) return 1;
  means.push_back(*busy);
  if (rank != 0) return 0;
  const auto size = static_cast<ssize_t>(means.size() * sizeof(double));
  return write(fd, means.data(), static_cast<size_t>(size)) == size ? 0 : 1;
}

// Runs `child(rank, fd)` in each of `ranks` processes forked from this one — its result the
// process's exit code, `fd` the write end of a pipe back here — and returns the doubles they
// wrote, in the order they came; UNAVAILABLE naming `what` when a process could not be started,
// failed, or wrote a partial number.
absl::StatusOr<std::vector<double>> RunInForkedProcesses(int64_t ranks, const std::function<int(int64_t, int)>& child,
                                                         const std::string& what) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return absl::InternalError(absl::StrCat("calibrate: pipe: ", strerror(errno)));
  std::vector<pid_t> children;
  for (int64_t rank = 0; rank < ranks; ++rank) {
    const pid_t pid = fork();
    if (pid == 0) {
      close(pipe_fds[0]);
      _exit(child(rank, pipe_fds[1]));
    }
    if (pid < 0) break;
    children.push_back(pid);
  }
  close(pipe_fds[1]);
  std::vector<double> values;
  double v = 0;
  ssize_t got = 0;
  while ((got = read(pipe_fds[0], &v, sizeof v)) == static_cast<ssize_t>(sizeof v)) values.push_back(v);
  close(pipe_fds[0]);
  bool all_ok = static_cast<int64_t>(children.size()) == ranks && got == 0;
  for (pid_t pid : children) {
    int status = 0;
    all_ok &= waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  if (!all_ok) {
    return absl::UnavailableError(absl::StrCat("calibrate: ", what, " among ", ranks,
                                               " local processes failed (a port or process limit?); run without --collectives"));
  }
  return values;
}

// The mean seconds of rank 0's `repeats` all-reduces of each size in `bytes` among `ranks`
// rank processes forked from this one, then its BusyAllReduceSeconds, meeting at a TCPStore this process serves: processes, as
// `mapctl run --ranks` starts them (threads of one process measured a small 4-rank all-reduce
// at ~0.8 ms here; processes 0.5 to 2.6 ms from run to run).
absl::StatusOr<std::vector<double>> TimeAllReduces(int64_t ranks, const std::vector<int64_t>& bytes, int repeats) {
  auto server = StoreServer::Start("127.0.0.1", 0);
  if (!server.ok()) return server.status();
  const int port = (*server)->port();
  auto means = RunInForkedProcesses(
      ranks, [&](int64_t rank, int fd) { return AllReduceRank(port, ranks, rank, bytes, repeats, fd); }, "the all-reduces");
  if (!means.ok()) return means.status();
  if (means->size() != bytes.size() + 1) return absl::UnavailableError("calibrate: rank 0 did not report its all-reduces");
  return means;
}

// alpha and beta of `ranks` local ranks' collectives, in the cluster's model (collectives.h: an
// all-reduce of more than 4 KiB is two exchanges, t = 2 alpha + 2 (ranks − 1) / ranks · bytes ·
// beta): alpha the mean of a 256-byte all-reduce (one exchange: pure latency), beta from a 4 MiB
// one's time beyond its two (at least 0); busy_alpha an exchange's cost among ranks computing
// between collectives — half a 64 KiB all-reduce's, its bandwidth term aside.
absl::StatusOr<HostCollectives> FitHostCollectives(int64_t ranks, int repeats) {
  const std::vector<int64_t> bytes = {256, 4 << 20};
  auto seconds = TimeAllReduces(ranks, bytes, repeats);
  if (!seconds.ok()) return seconds.status();
  HostCollectives c;
  c.ranks = ranks;
  c.alpha = (*seconds)[0];
  const double moved = 2.0 * static_cast<double>(ranks - 1) / static_cast<double>(ranks) * static_cast<double>(bytes[1]);
  c.beta = std::max(0.0, ((*seconds)[1] - 2 * c.alpha) / moved);
  // Its 64 KiB's bandwidth term taken out (the model adds it back by size); a noisy difference,
  // never under the latency itself.
  const double busy_moved = 2.0 * static_cast<double>(ranks - 1) / static_cast<double>(ranks) * static_cast<double>(kBusyAllReduceBytes);
  c.busy_alpha = std::max(c.alpha, ((*seconds)[2] - busy_moved * c.beta) / 2);
  return c;
}

// Seconds of one SmallTrainingStep, averaged over `min_seconds`: the workload whose speed alone
// and beside others gives a rank's share of the host.
double TrainingStepSeconds(double min_seconds) {
  SmallTrainingStep step;
  return TimePerCall(step, min_seconds);
}

// The registry's FLOPs (forward and the input's gradient) of `op` on one [rows, cols] fp32
// input that needs a gradient — what the profiler charges the op.
// A loss (`targets`) has a second input, the [rows] class indices, and a scalar output.
double RegistryFlops(const std::string& op, int64_t rows, int64_t cols, const AttrMap& attrs, bool targets = false) {
  const OpDef* def = OpRegistry::Global().Find(op);
  if (def == nullptr || !def->cost) return 0;
  const TensorType x{v1::FLOAT32, {rows, cols}};
  const TensorType classes{v1::INT64, {rows}};
  const std::vector<TensorType> outputs{targets ? TensorType{v1::FLOAT32, {}} : x};
  // OpContext keeps references: its name and inputs live here.
  const std::string node = "calibrate";
  const std::vector<const TensorType*> inputs = targets ? std::vector<const TensorType*>{&x, &classes} : std::vector<const TensorType*>{&x};
  const OpContext ctx(node, op, inputs, attrs);
  const OpCost cost = def->cost(CostContext{ctx, outputs, {true, false}, {true}});
  double flops = cost.flops;
  for (double g : cost.grad_flops) flops += g;
  return flops;
}

// Elementwise arithmetic's rates as training pays them, on a [512, 512] fp32 tensor, forward and
// backward, each op's registry FLOPs over its time (the profiler charges an op its FLOPs at its
// rate, or its bytes at the memory bandwidth, whichever is longer, so the measured time includes
// the memory traffic that rate then covers): per op into `op_rates` — erf GELU, tanh GELU, layer norm,
// softmax, log_softmax and the cross-entropy loss, whose log_softmax backward runs at ~10 ns an
// element here where softmax's forward takes ~1.3 — and the first three together as the vector
// rate of every other elementwise op.
double VectorFlops(double min_seconds, std::map<std::string, double>* op_rates) {
  constexpr int64_t kRows = 512, kCols = 512;
  at::Tensor x = at::randn({kRows, kCols}).requires_grad_(true);
  const at::Tensor grad = at::ones({kRows, kCols});
  const at::Tensor target = at::randint(kCols, {kRows}, at::kLong);
  double flops = 0, seconds = 0;
  auto measure = [&](const std::string& op, const AttrMap& attrs, const std::function<void()>& forward_backward, bool vector,
                     bool targets = false) {
    const double s = TimePerCall(
        [&] {
          forward_backward();
          x.mutable_grad().reset();
        },
        min_seconds / 5);
    const double f = RegistryFlops(op.substr(0, op.find(':')), kRows, kCols, attrs, targets);  // (an OpRateKey)
    if (s > 0 && f > 0) (*op_rates)[op] = f / s;
    if (!vector) return;
    seconds += s;
    flops += f;
  };
  measure("gelu", Attrs().Str("approximate", "none").map(), [&] { at::gelu(x).backward(grad); }, true);
  measure("gelu:tanh", Attrs().Str("approximate", "tanh").map(), [&] { at::gelu(x, "tanh").backward(grad); }, false);
  measure("layer_norm", Attrs().Ints("normalized_shape", {kCols}).map(), [&] { at::layer_norm(x, {kCols}).backward(grad); }, true);
  measure("softmax", Attrs().Int("dim", -1).map(), [&] { at::softmax(x, -1).backward(grad); }, true);
  measure("log_softmax", Attrs().Int("dim", -1).map(), [&] { at::log_softmax(x, -1).backward(grad); }, false);
  measure("cross_entropy", Attrs().Str("reduction", "mean").map(), [&] { at::cross_entropy_loss(x, target).backward(); }, false,
          /*targets=*/true);
  return seconds > 0 ? flops / seconds : 0;
}

// A rank's compute speed while `ranks` rank processes (forked from this one) run the training
// step at once, relative to this process running it alone: the mean of their step times against
// the lone one's. Each process runs a little longer than it measures, so the measurements overlap.
// The lone step is measured before and after, the faster kept, and the speed is at most 1: ranks
// beside each other never compute faster than one alone — a speed above 1 (1.18 for 2 ranks
// once here) was a lone measurement slowed by something else on the machine.
absl::StatusOr<double> ComputeSpeed(int64_t ranks, double min_seconds) {
  const double before = TrainingStepSeconds(min_seconds);
  auto seconds = RunInForkedProcesses(
      ranks,
      [&](int64_t, int fd) {
        (void)TrainingStepSeconds(min_seconds / 4);  // until every process has started
        const double s = TrainingStepSeconds(min_seconds);
        (void)TrainingStepSeconds(min_seconds / 4);  // while the slower ones finish
        return write(fd, &s, sizeof s) == static_cast<ssize_t>(sizeof s) ? 0 : 1;
      },
      "the compute measurement");
  if (!seconds.ok()) return seconds.status();
  double total = 0;
  for (double s : *seconds) total += s;
  if (static_cast<int64_t>(seconds->size()) != ranks || !(total > 0)) return absl::UnavailableError("calibrate: a process did not report its step");
  const double alone = std::min(before, TrainingStepSeconds(min_seconds));
  return std::min(1.0, alone / (total / static_cast<double>(ranks)));
}

// One round of the single-process measurements: a profile with the matmul rates, bandwidth,
// per-kernel overhead and elementwise rates (nothing else set).
absl::StatusOr<DeviceProfile> MeasureCompute(const CalibrateOptions& options) {
  DeviceProfile p;
  try {
    const int64_t n = options.matmul_size;
    at::Tensor a = at::randn({n, n});
    at::Tensor b = at::randn({n, n});
    const double mm32 = TimePerCall([&] { (void)at::matmul(a, b); }, options.min_seconds);
    p.fp32_flops = 2.0 * n * n * n / mm32;
    // Smaller products, down to 16 x 16: far below the peak here (dispatch, cache, packing).
    for (int64_t s = 16; s < n; s *= 2) {
      at::Tensor x = at::randn({s, s}), y = at::randn({s, s});
      const double t = TimePerCall([&] { (void)at::matmul(x, y); }, options.min_seconds / 4);
      p.matmul_rates.push_back({2.0 * s * s * s, 2.0 * s * s * s / t});
    }
    p.matmul_rates.push_back({2.0 * n * n * n, p.fp32_flops});
    at::Tensor a16 = a.to(at::kBFloat16), b16 = b.to(at::kBFloat16);
    const double mm16 = TimePerCall([&] { (void)at::matmul(a16, b16); }, options.min_seconds);
    p.bf16_flops = 2.0 * n * n * n / mm16;
    at::Tensor src = at::ones({options.copy_bytes / 4});
    at::Tensor dst = at::empty_like(src);
    const double copy = TimePerCall([&] { dst.copy_(src); }, options.min_seconds);
    p.memory_bandwidth = 2.0 * static_cast<double>(options.copy_bytes) / copy;  // read + write
    // Per kernel as training pays it: a chain of tiny multiplies recorded by autograd and
    // differentiated (32 kernels forward, 32 backward, and the sum's pair), not a bare add.
    at::Tensor x = at::ones({1}).requires_grad_(true);
    constexpr int kChain = 32;
    const double chain = TimePerCall(
        [&] {
          at::Tensor y = x;
          for (int i = 0; i < kChain; ++i) y = y * 1.0001;
          y.sum().backward();
          x.mutable_grad().reset();
        },
        options.min_seconds / 3);
    p.kernel_overhead_seconds = chain / (2 * kChain + 2);
    p.vector_flops = VectorFlops(options.min_seconds, &p.op_rates);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("calibrate: LibTorch error: ", e.what()));
  }
  return p;
}

// One round of the measurements among `ranks` local processes: their collectives' fit and
// compute speed.
absl::StatusOr<HostCollectives> MeasureHost(const CalibrateOptions& options, int64_t ranks) {
  auto fit = FitHostCollectives(ranks, options.min_seconds < 0.1 ? 10 : 50);
  if (!fit.ok()) return fit.status();
  auto speed = ComputeSpeed(ranks, options.min_seconds);
  if (!speed.ok()) return speed.status();
  fit->compute_speed = *speed;
  return *fit;
}

// Each figure of `rounds` (same shape: one calibration's rounds) replaced by its median over them.
DeviceProfile MedianProfile(const std::vector<DeviceProfile>& rounds) {
  DeviceProfile p = rounds.front();
  auto median = [&](const std::function<double(const DeviceProfile&)>& field) {
    std::vector<double> v;
    for (const DeviceProfile& r : rounds) v.push_back(field(r));
    return Median(std::move(v));
  };
  p.fp32_flops = median([](const DeviceProfile& r) { return r.fp32_flops; });
  p.bf16_flops = median([](const DeviceProfile& r) { return r.bf16_flops; });
  p.memory_bandwidth = median([](const DeviceProfile& r) { return r.memory_bandwidth; });
  p.kernel_overhead_seconds = median([](const DeviceProfile& r) { return r.kernel_overhead_seconds; });
  p.vector_flops = median([](const DeviceProfile& r) { return r.vector_flops; });
  for (size_t i = 0; i < p.matmul_rates.size(); ++i) {
    p.matmul_rates[i].rate = median([i](const DeviceProfile& r) { return r.matmul_rates.at(i).rate; });
  }
  for (auto& [op, rate] : p.op_rates) {
    rate = median([&op = op](const DeviceProfile& r) { return r.op_rates.count(op) ? r.op_rates.at(op) : 0.0; });
  }
  for (size_t i = 0; i < p.host_collectives.size(); ++i) {
    HostCollectives& c = p.host_collectives[i];
    c.alpha = median([i](const DeviceProfile& r) { return r.host_collectives.at(i).alpha; });
    c.beta = median([i](const DeviceProfile& r) { return r.host_collectives.at(i).beta; });
    c.busy_alpha = median([i](const DeviceProfile& r) { return r.host_collectives.at(i).busy_alpha; });
    c.compute_speed = median([i](const DeviceProfile& r) { return r.host_collectives.at(i).compute_speed; });
  }
  return p;
}

}  // namespace

CalibrateOptions HostCalibrateOptions() {
  CalibrateOptions o;
  o.name = "this-host";
  o.min_seconds = 0.15;
  o.copy_bytes = 64LL << 20;
  o.rounds = 3;
  const int64_t most = std::min<int64_t>(8, 2 * std::max<int64_t>(1, std::thread::hardware_concurrency()));
  for (int64_t n = 2; n <= most; n *= 2) o.collective_ranks.push_back(n);
  return o;
}

absl::StatusOr<DeviceProfile> CalibrateCpu(const CalibrateOptions& options) {
  if (auto st = options.Validate(); !st.ok()) return st;
  // Rates at the threads a rank runs on: LibTorch's, and the BLAS library's pool kept to it.
  SetBlasThreads(at::get_num_threads());
  // The rounds one after another, each measuring everything once, and every figure their median:
  // this host's speed drifts by 10-40% over minutes, and a calibration made in one slow minute
  // (elementwise 11.7 GFLOP/s where others measured 15-18, 4.6 us a kernel against 2.6-2.9)
  // overpredicted every plan by 1.1-1.5x.
  std::vector<DeviceProfile> rounds;
  for (int r = 0; r < options.rounds; ++r) {
    auto p = MeasureCompute(options);
    if (!p.ok()) return p.status();
    for (int64_t ranks : options.collective_ranks) {
      auto host = MeasureHost(options, ranks);
      if (!host.ok()) return host.status();
      p->host_collectives.push_back(*host);
    }
    rounds.push_back(*std::move(p));
  }
  DeviceProfile p = MedianProfile(rounds);
  p.name = options.name;
  p.source = "measured";
  p.memory_bytes = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
  p.host_threads = static_cast<int64_t>(std::thread::hardware_concurrency());
  p.threads = at::get_num_threads();
  p.description = absl::StrCat("measured on this machine: ", std::thread::hardware_concurrency(), " hardware threads, ",
                               at::get_num_threads(), " LibTorch threads",
                               options.rounds > 1 ? absl::StrCat("; each figure the median of ", options.rounds, " rounds") : "");
  if (auto st = p.Validate(); !st.ok()) return st;
  return p;
}

}  // namespace mapd

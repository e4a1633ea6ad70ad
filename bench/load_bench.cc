// load_bench: the coordinator under load on loopback (docs/coordinator.md, "Under load").
//
// Starts a real `mapd` (its own process, defaults but for the per-host Watch cap: every client
// here is one host) and drives it at once with
//   --workers   simulated workers (default 256) that register and heartbeat at the interval
//               mapd gives them, each heartbeat timed;
//   --watchers  Watch streams (default 500) open on a job for the whole run;
//   --clients   clients (default 1,000), each on its own connection, calling Get, List, Events
//               and ListWorkers in turn with --think-ms between calls, retrying transient codes
//               with backoff as mapctl does.
// The job is one no worker can take (it asks for CUDA devices; the workers have CPUs), so it
// stays PENDING and its watchers wait. After --seconds: every client must have been served
// (each call answered OK, none failing for good), every watcher still open, no worker lost
// (each heartbeat OK, all ALIVE in the coordinator's list). Prints the counts and the
// heartbeat latency percentiles; exit status 0 only when all of that held.
//
//   build/bench/load_bench [--mapd build/server/mapd] [--clients N] [--watchers N] [--workers N]
//                          [--seconds S] [--think-ms MS]
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/rpc/auth.h"
#include "common/rpc/grpc_status.h"
#include "proto/mapd/v1/job_service.grpc.pb.h"
#include "proto/mapd/v1/workers.grpc.pb.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr char kClientToken[] = "load-bench-client-token";
constexpr char kWorkerToken[] = "load-bench-worker-token";
constexpr double kCallTimeoutSeconds = 30;

struct Options {
  std::string mapd;
  int clients = 1000;
  int watchers = 500;
  int workers = 256;
  double seconds = 30;
  int think_ms = 100;
};

// A running mapd child process and the port it serves on.
struct Coordinator {
  pid_t pid = -1;
  int port = 0;
  ~Coordinator() {
    if (pid > 0) {
      kill(pid, SIGTERM);
      waitpid(pid, nullptr, 0);
    }
  }
};

bool StartCoordinator(const Options& o, int watchers, Coordinator& c) {
  int out[2];
  if (pipe(out) != 0) return false;
  c.pid = fork();
  if (c.pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    setenv("MAPD_TOKEN", kClientToken, 1);
    setenv("MAPD_WORKER_TOKEN", kWorkerToken, 1);
    const std::string per_client = std::to_string(std::max(watchers, 1));
    execl(o.mapd.c_str(), o.mapd.c_str(), "--listen", "127.0.0.1:0", "--max-watch-streams-per-client", per_client.c_str(),
          static_cast<char*>(nullptr));
    std::perror("exec mapd");
    _exit(127);
  }
  close(out[1]);
  FILE* f = fdopen(out[0], "r");
  char line[512];
  while (f != nullptr && std::fgets(line, sizeof line, f) != nullptr) {
    if (const char* p = std::strstr(line, "serving on port ")) {
      c.port = std::atoi(p + std::strlen("serving on port "));
      return c.port > 0;  // the pipe stays open: mapd may go on writing to it
    }
  }
  return false;
}

// Each client, watcher and worker has a connection of its own (no shared subchannel).
std::shared_ptr<grpc::Channel> Connect(int port) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials(), args);
}

// A unary call retried on transient codes with backoff (50 ms doubling to 1 s, jittered), until
// kCallTimeoutSeconds; `retries` counts the transient answers.
template <typename Call>
grpc::Status CallWithRetry(Call call, std::atomic<int64_t>& retries, std::mt19937& rng) {
  const auto give_up = Clock::now() + std::chrono::duration<double>(kCallTimeoutSeconds);
  double backoff = 0.05;
  for (;;) {
    grpc::Status st = call();
    if (st.ok() || !mapd::IsTransient(st) || Clock::now() > give_up) return st;
    ++retries;
    std::uniform_real_distribution<double> jitter(0.5, 1.0);
    std::this_thread::sleep_for(std::chrono::duration<double>(backoff * jitter(rng)));
    backoff = std::min(backoff * 2, 1.0);
  }
}

struct Shared {
  int port = 0;
  int64_t job_id = 0;
  std::atomic<bool> stop{false};
  // clients
  std::atomic<int64_t> calls_ok{0}, calls_failed{0}, call_retries{0};
  std::atomic<int> clients_never_served{0};
  std::string first_failure;
  // watchers
  std::atomic<int> watchers_open{0}, watchers_ended_early{0};
  // workers
  std::atomic<int64_t> heartbeats_failed{0}, heartbeat_retries{0};
  std::atomic<int> workers_registered{0}, workers_lost{0};
  std::mutex mu;
  std::vector<double> heartbeat_ms;  // every heartbeat's latency (retries included)
};

void RunWorker(Shared& s, int index) {
  auto stub = mapd::v1::WorkerService::NewStub(Connect(s.port));
  std::mt19937 rng(index);
  mapd::v1::RegisterWorkerRequest reg;
  reg.set_hostname("load-" + std::to_string(index));
  auto* device = reg.add_devices();
  device->set_name("cpu");
  device->set_memory_bytes(int64_t{16} << 30);
  mapd::v1::RegisterWorkerResponse registered;
  grpc::Status st = CallWithRetry([&] {
    grpc::ClientContext ctx;
    mapd::AuthorizeCall(ctx, kWorkerToken, 10);
    return stub->Register(&ctx, reg, &registered);
  }, s.heartbeat_retries, rng);
  if (!st.ok()) {
    ++s.workers_lost;
    return;
  }
  ++s.workers_registered;
  std::vector<double> latencies;
  const auto interval = std::chrono::duration<double>(registered.heartbeat_seconds());
  auto next = Clock::now() + std::chrono::duration<double>(std::uniform_real_distribution<double>(0, 1)(rng) * interval.count());
  while (!s.stop) {
    std::this_thread::sleep_until(next);
    next += std::chrono::duration_cast<Clock::duration>(interval);
    mapd::v1::HeartbeatRequest hb;
    hb.set_worker_id(registered.worker_id());
    hb.set_session(registered.session());
    mapd::v1::HeartbeatResponse resp;
    const auto start = Clock::now();
    st = CallWithRetry([&] {
      grpc::ClientContext ctx;
      mapd::AuthorizeCall(ctx, kWorkerToken, 10);
      return stub->Heartbeat(&ctx, hb, &resp);
    }, s.heartbeat_retries, rng);
    latencies.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    if (!st.ok()) {
      ++s.heartbeats_failed;
      if (st.error_code() == grpc::StatusCode::NOT_FOUND) {
        ++s.workers_lost;
        return;
      }
    }
  }
  std::lock_guard<std::mutex> lock(s.mu);
  s.heartbeat_ms.insert(s.heartbeat_ms.end(), latencies.begin(), latencies.end());
}

void RunWatcher(Shared& s, grpc::ClientContext& ctx) {
  auto stub = mapd::v1::JobService::NewStub(Connect(s.port));
  mapd::AuthorizeCall(ctx, kClientToken, 0);
  mapd::v1::WatchJobRequest req;
  req.set_id(s.job_id);
  auto reader = stub->Watch(&ctx, req);
  mapd::v1::JobEvent event;
  bool opened = false;
  while (reader->Read(&event)) {
    if (!opened) ++s.watchers_open;
    opened = true;
  }
  (void)reader->Finish();
  if (!s.stop) ++s.watchers_ended_early;
  if (opened) --s.watchers_open;
}

void RunClient(Shared& s, const Options& o, int index) {
  auto channel = Connect(s.port);
  auto jobs = mapd::v1::JobService::NewStub(channel);
  auto workers = mapd::v1::WorkerService::NewStub(channel);
  std::mt19937 rng(100000 + index);
  std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(0, o.think_ms)(rng)));
  int64_t served = 0;
  for (int i = index; !s.stop; ++i) {
    const grpc::Status st = CallWithRetry([&] {
      grpc::ClientContext ctx;
      mapd::AuthorizeCall(ctx, kClientToken, 10);
      switch (i % 4) {
        case 0: {
          mapd::v1::GetJobRequest req;
          req.set_id(s.job_id);
          mapd::v1::Job job;
          return jobs->Get(&ctx, req, &job);
        }
        case 1: {
          mapd::v1::ListJobsResponse list;
          return jobs->List(&ctx, {}, &list);
        }
        case 2: {
          mapd::v1::JobEventsRequest req;
          req.set_id(s.job_id);
          mapd::v1::JobEventsResponse events;
          return jobs->Events(&ctx, req, &events);
        }
        default: {
          mapd::v1::ListWorkersResponse list;
          return workers->List(&ctx, {}, &list);
        }
      }
    }, s.call_retries, rng);
    if (st.ok()) {
      ++s.calls_ok;
      ++served;
    } else {
      ++s.calls_failed;
      std::lock_guard<std::mutex> lock(s.mu);
      if (s.first_failure.empty()) s.first_failure = std::to_string(st.error_code()) + " " + st.error_message();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(o.think_ms));
  }
  if (served == 0) ++s.clients_never_served;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

// The job the watchers follow: one that waits for devices no simulated worker has.
int64_t SubmitPendingJob(int port) {
  auto jobs = mapd::v1::JobService::NewStub(Connect(port));
  mapd::v1::SubmitJobRequest req;
  req.mutable_spec()->set_name("load-bench");
  req.mutable_spec()->set_model("mlp:in=16,hidden=16,layers=1,out=4,batch=4");
  req.mutable_spec()->mutable_training()->set_steps(10);
  req.mutable_spec()->set_ranks(1);
  req.mutable_spec()->set_device("cuda");
  mapd::v1::Job job;
  grpc::ClientContext ctx;
  mapd::AuthorizeCall(ctx, kClientToken, 60);
  const grpc::Status st = jobs->Submit(&ctx, req, &job);
  if (!st.ok()) std::fprintf(stderr, "load_bench: submit: %s\n", st.error_message().c_str());
  return st.ok() ? job.id() : 0;
}

int CountAliveWorkers(int port) {
  auto workers = mapd::v1::WorkerService::NewStub(Connect(port));
  mapd::v1::ListWorkersResponse list;
  grpc::ClientContext ctx;
  mapd::AuthorizeCall(ctx, kClientToken, 30);
  if (!workers->List(&ctx, {}, &list).ok()) return -1;
  return static_cast<int>(std::count_if(list.workers().begin(), list.workers().end(),
                                        [](const mapd::v1::Worker& w) { return w.state() == mapd::v1::ALIVE; }));
}

bool ParseOptions(int argc, char** argv, Options& o) {
  std::string self = argv[0];
  o.mapd = self.substr(0, self.rfind('/') + 1) + "../server/mapd";
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "-h" || flag == "--help") return false;
    if (i + 1 >= argc) return false;
    const char* v = argv[++i];
    if (flag == "--mapd") o.mapd = v;
    else if (flag == "--clients") o.clients = std::atoi(v);
    else if (flag == "--watchers") o.watchers = std::atoi(v);
    else if (flag == "--workers") o.workers = std::atoi(v);
    else if (flag == "--seconds") o.seconds = std::atof(v);
    else if (flag == "--think-ms") o.think_ms = std::atoi(v);
    else return false;
  }
  return o.clients >= 0 && o.watchers >= 0 && o.workers >= 1 && o.seconds > 0 && o.think_ms >= 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!ParseOptions(argc, argv, o)) {
    std::fprintf(stderr, "usage: load_bench [--mapd PATH] [--clients N] [--watchers N] [--workers N] [--seconds S] [--think-ms MS]\n");
    return 2;
  }
  Coordinator coordinator;
  if (!StartCoordinator(o, o.watchers, coordinator)) {
    std::fprintf(stderr, "load_bench: %s did not start (give --mapd PATH)\n", o.mapd.c_str());
    return 2;
  }
  Shared s;
  s.port = coordinator.port;
  s.job_id = SubmitPendingJob(s.port);
  if (s.job_id == 0) return 2;

  std::vector<std::thread> threads;
  for (int i = 0; i < o.workers; ++i) threads.emplace_back(RunWorker, std::ref(s), i);
  std::vector<std::unique_ptr<grpc::ClientContext>> watch_contexts;
  for (int i = 0; i < o.watchers; ++i) {
    watch_contexts.push_back(std::make_unique<grpc::ClientContext>());
    threads.emplace_back(RunWatcher, std::ref(s), std::ref(*watch_contexts.back()));
  }
  for (int i = 0; i < o.clients; ++i) threads.emplace_back(RunClient, std::ref(s), std::cref(o), i);
  const auto start = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
  const int watchers_open = s.watchers_open.load();
  const int alive = CountAliveWorkers(s.port);
  s.stop = true;
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  for (auto& ctx : watch_contexts) ctx->TryCancel();
  for (auto& t : threads) t.join();

  const bool passed = s.calls_failed == 0 && s.clients_never_served == 0 && watchers_open == o.watchers &&
                      s.watchers_ended_early == 0 && s.workers_lost == 0 && s.heartbeats_failed == 0 &&
                      alive == o.workers;
  std::printf("| what | figure |\n|---|---|\n");
  std::printf("| load | %d clients (think %d ms), %d Watch streams, %d workers, %.0f s on loopback |\n", o.clients,
              o.think_ms, o.watchers, o.workers, elapsed);
  std::printf("| client calls answered OK | %lld (%.0f/s); failed for good: %lld; clients never served: %d |\n",
              static_cast<long long>(s.calls_ok.load()), static_cast<double>(s.calls_ok.load()) / elapsed,
              static_cast<long long>(s.calls_failed.load()), s.clients_never_served.load());
  std::printf("| transient answers retried | clients %lld, workers %lld |\n", static_cast<long long>(s.call_retries.load()),
              static_cast<long long>(s.heartbeat_retries.load()));
  std::printf("| Watch streams open at the end | %d of %d (%d ended early) |\n", watchers_open, o.watchers,
              s.watchers_ended_early.load());
  std::printf("| workers ALIVE at the end | %d of %d (lost: %d, failed heartbeats: %lld) |\n", alive, o.workers,
              s.workers_lost.load(), static_cast<long long>(s.heartbeats_failed.load()));
  std::printf("| heartbeats | %zu; latency p50 %.1f ms, p99 %.1f ms, max %.1f ms |\n", s.heartbeat_ms.size(),
              Percentile(s.heartbeat_ms, 0.5), Percentile(s.heartbeat_ms, 0.99), Percentile(s.heartbeat_ms, 1.0));
  if (!s.first_failure.empty()) std::printf("first failed call: %s\n", s.first_failure.c_str());
  std::printf("load_bench: %s\n", passed ? "PASSED" : "FAILED");
  return passed ? 0 : 1;
}

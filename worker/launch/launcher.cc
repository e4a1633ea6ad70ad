#include "worker/launch/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/store_secret.h"
#include "worker/launch/rank_events.h"

extern char** environ;

namespace mapd {

namespace {

using Clock = std::chrono::steady_clock;

struct Child {
  pid_t pid = -1;  // -1: not started (yet)
  int out = -1, err = -1;  // read ends
  RankEventReader events;
  std::string err_tail;
  bool exited = false;
  int status = 0;
  Clock::time_point last_heard;
};

std::string Describe(int status) {
  if (WIFSIGNALED(status)) return absl::StrCat("was killed by signal ", WTERMSIG(status), " (", strsignal(WTERMSIG(status)), ")");
  if (WIFEXITED(status)) return absl::StrCat("exited with status ", WEXITSTATUS(status));
  return "ended";
}

std::string Tail(const std::string& s) {
  std::string t;  // without the rank's progress lines (rank_events.h)
  for (absl::string_view line : absl::StrSplit(s, '\n')) {
    if (!absl::StartsWith(line, kRankProgressPrefix)) absl::StrAppend(&t, line, "\n");
  }
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  const size_t keep = 600;
  return t.size() > keep ? "..." + t.substr(t.size() - keep) : t;
}

// The status code a rank's last words end with ("... [RESOURCE_EXHAUSTED]"), removed from
// `text`; ABORTED when there is none.
absl::StatusCode TrailingCode(std::string* text) {
  const size_t open = text->rfind(" [");
  if (open == std::string::npos || text->empty() || text->back() != ']') return absl::StatusCode::kAborted;
  const std::string name = text->substr(open + 2, text->size() - open - 3);
  for (int c = 1; c <= 16; ++c) {
    const auto code = static_cast<absl::StatusCode>(c);
    if (absl::StatusCodeToString(code) == name) {
      text->erase(open);
      return code;
    }
  }
  return absl::StatusCode::kAborted;
}

// The processes of one launch, polled from one thread.
class RankGroup {
 public:
  using OnEvent = std::function<void(int, const v1::RankEvent&)>;
  RankGroup(const LaunchOptions& options, OnEvent on_event) : o_(options), on_event_(std::move(on_event)), children_(options.ranks) {
    bool threads_given = std::getenv("OMP_NUM_THREADS") != nullptr;
    for (const std::string& e : o_.env) threads_given |= e.rfind("OMP_NUM_THREADS=", 0) == 0;
    if (!threads_given) threads_env_ = absl::StrCat("OMP_NUM_THREADS=", DefaultRankThreads(o_.ranks));
    secret_env_ = absl::StrCat(kStoreSecretEnv, "=", o_.store_secret);
  }
  ~RankGroup() { KillAll(); }

  absl::Status Run();

 private:
  int Name(int i) const { return i < static_cast<int>(o_.rank_names.size()) ? o_.rank_names[i] : i; }
  absl::Status StartAll(const std::string& store);
  absl::Status Spawn(int i, const std::string& store);
  absl::Status Pump();      // reads what the ranks wrote; hands events on
  absl::Status Handle(int i, const char* data, size_t n);
  void Said(int i, const char* data, size_t n);  // what rank i wrote on stderr
  absl::Status Reap(int* running);  // notices exits; a failed one ends the run
  absl::Status CheckSilence() const;
  void Drain();             // after every exit: the rest of the pipes
  void KillAll();

  const LaunchOptions& o_;
  OnEvent on_event_;
  std::vector<Child> children_;
  std::string threads_env_;
  std::string secret_env_;  // MAPD_STORE_SECRET=…
};

absl::Status RankGroup::Spawn(int i, const std::string& store) {
  int out[2], err[2];
  if (pipe(out) != 0) return absl::InternalError(absl::StrCat("pipe: ", strerror(errno)));
  if (pipe(err) != 0) {
    close(out[0]), close(out[1]);
    return absl::InternalError(absl::StrCat("pipe: ", strerror(errno)));
  }
  const std::vector<std::string> args = o_.argv_for(i, store);
  [[maybe_unused]] const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return absl::ResourceExhaustedError(absl::StrCat("fork for rank ", Name(i), ": ", strerror(errno)));
  if (pid == 0) {  // the rank
#ifdef __linux__
    // A rank dies with the thread that launched it (a killed mapd-worker or `mapctl run`): left
    // running it would hold its peers in collectives with nobody reading its output.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(137);  // the launcher died before the line above
#endif
    dup2(out[1], 1);
    dup2(err[1], 2);
    close(out[0]), close(err[0]), close(out[1]), close(err[1]);
    for (const std::string& e : o_.env) putenv(const_cast<char*>(e.c_str()));
    if (!threads_env_.empty()) putenv(const_cast<char*>(threads_env_.c_str()));
    putenv(const_cast<char*>(secret_env_.c_str()));
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    std::fprintf(stderr, "cannot start %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  close(out[1]), close(err[1]);
  fcntl(out[0], F_SETFL, O_NONBLOCK);
  fcntl(err[0], F_SETFL, O_NONBLOCK);
  Child& c = children_[i];
  c.pid = pid, c.out = out[0], c.err = err[0], c.last_heard = Clock::now();
  return absl::OkStatus();
}

absl::Status RankGroup::StartAll(const std::string& store) {
  for (int i = 0; i < o_.ranks; ++i) {
    if (children_[i].pid < 0) {
      if (auto st = Spawn(i, store); !st.ok()) return st;
    }
  }
  return absl::OkStatus();
}

absl::Status RankGroup::Handle(int i, const char* data, size_t n) {
  std::vector<v1::RankEvent> events;
  if (auto st = children_[i].events.Feed(data, n, &events); !st.ok()) {
    return absl::DataLossError(absl::StrCat("rank ", Name(i), ": ", st.message()));
  }
  for (const v1::RankEvent& e : events) {
    if (i == o_.store_host_index && e.has_store_ready()) {
      if (auto st = StartAll(absl::StrCat(o_.store_host, ":", e.store_ready().port())); !st.ok()) return st;
    }
    on_event_(i, e);
  }
  return absl::OkStatus();
}

void RankGroup::Said(int i, const char* data, size_t n) {
  Child& c = children_[i];
  c.err_tail.append(data, n);
  if (c.err_tail.size() > 8192) c.err_tail.erase(0, c.err_tail.size() - 4096);
  if (o_.on_output) o_.on_output(i, std::string_view(data, n));
}

absl::Status RankGroup::Pump() {
  std::vector<pollfd> fds;
  std::vector<std::pair<int, bool>> who;  // (process, is_stdout)
  for (int i = 0; i < o_.ranks; ++i) {
    if (children_[i].out >= 0) fds.push_back({children_[i].out, POLLIN, 0}), who.push_back({i, true});
    if (children_[i].err >= 0) fds.push_back({children_[i].err, POLLIN, 0}), who.push_back({i, false});
  }
  if (fds.empty()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return absl::OkStatus();
  }
  poll(fds.data(), fds.size(), 200);
  char buf[4096];
  for (size_t k = 0; k < fds.size(); ++k) {
    if (!(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    Child& c = children_[who[k].first];
    int& fd = who[k].second ? c.out : c.err;
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n <= 0) {
      if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) close(fd), fd = -1;
      continue;
    }
    if (!who[k].second) {
      Said(who[k].first, buf, static_cast<size_t>(n));
      continue;
    }
    c.last_heard = Clock::now();
    if (auto st = Handle(who[k].first, buf, static_cast<size_t>(n)); !st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::Status RankGroup::Reap(int* running) {
  char buf[4096];
  for (int i = 0; i < o_.ranks; ++i) {
    Child& c = children_[i];
    if (c.pid < 0 || c.exited) continue;
    int status = 0;
    if (waitpid(c.pid, &status, WNOHANG) != c.pid) continue;
    c.exited = true;
    c.status = status;
    --*running;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) continue;
    if (c.err >= 0) {  // what it said last
      ssize_t n;
      while ((n = read(c.err, buf, sizeof(buf))) > 0) Said(i, buf, static_cast<size_t>(n));
    }
    // A rank that failed cleanly ends its last line with its status code ("error: ...
    // [RESOURCE_EXHAUSTED]"): the run fails with that code; a crash is ABORTED.
    std::string said = Tail(c.err_tail);
    const absl::StatusCode code = WIFEXITED(status) ? TrailingCode(&said) : absl::StatusCode::kAborted;
    return absl::Status(code, absl::StrCat("rank ", Name(i), " ", Describe(status), said.empty() ? "" : absl::StrCat(": ", said)));
  }
  return absl::OkStatus();
}

absl::Status RankGroup::CheckSilence() const {
  const auto now = Clock::now();
  for (int i = 0; i < o_.ranks; ++i) {
    const Child& c = children_[i];
    if (c.pid < 0 || c.exited || now - c.last_heard < o_.silence_timeout) continue;
    return absl::DeadlineExceededError(absl::StrCat(
        "rank ", Name(i), " sent nothing for ", std::chrono::duration_cast<std::chrono::seconds>(o_.silence_timeout).count(),
        " s and was stopped with the others (hung?)", c.err_tail.empty() ? "" : absl::StrCat(": ", Tail(c.err_tail))));
  }
  return absl::OkStatus();
}

void RankGroup::Drain() {
  char buf[4096];
  for (int i = 0; i < o_.ranks; ++i) {
    Child& c = children_[i];
    if (c.out >= 0) {
      fcntl(c.out, F_SETFL, 0);
      ssize_t n;
      while ((n = read(c.out, buf, sizeof(buf))) > 0) {
        if (!Handle(i, buf, static_cast<size_t>(n)).ok()) break;
      }
      close(c.out);
      c.out = -1;
    }
    if (c.err >= 0) {
      fcntl(c.err, F_SETFL, 0);
      ssize_t n;
      while ((n = read(c.err, buf, sizeof(buf))) > 0) Said(i, buf, static_cast<size_t>(n));
      close(c.err);
      c.err = -1;
    }
  }
}

void RankGroup::KillAll() {
  for (auto& c : children_) {
    if (!c.exited && c.pid > 0) kill(c.pid, SIGTERM);
  }
  const auto deadline = Clock::now() + std::chrono::seconds(3);
  for (auto& c : children_) {
    while (!c.exited && c.pid > 0) {
      int status = 0;
      const pid_t r = waitpid(c.pid, &status, WNOHANG);
      if (r == c.pid || r < 0) {
        c.exited = true, c.status = status;
        break;
      }
      if (Clock::now() > deadline) {
        kill(c.pid, SIGKILL);
        waitpid(c.pid, &status, 0);
        c.exited = true, c.status = status;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  for (auto& c : children_) {
    if (c.out >= 0) close(c.out), c.out = -1;
    if (c.err >= 0) close(c.err), c.err = -1;
  }
}

absl::Status RankGroup::Run() {
  const absl::Status started = o_.store_host_index >= 0 ? Spawn(o_.store_host_index, "") : StartAll(o_.store);
  if (!started.ok()) return started;
  int running = o_.ranks;
  while (running > 0) {
    if (o_.cancel != nullptr && o_.cancel->load()) return absl::CancelledError("the ranks were stopped (cancelled)");
    if (auto st = Pump(); !st.ok()) return st;
    if (auto st = Reap(&running); !st.ok()) return st;
    if (auto st = CheckSilence(); !st.ok()) return st;
    // The host rank ended (OK) before it reported the store: the others can never start.
    const bool waiting = std::any_of(children_.begin(), children_.end(), [](const Child& c) { return c.pid < 0; });
    if (waiting && o_.store_host_index >= 0 && children_[o_.store_host_index].exited) {
      return absl::InternalError(absl::StrCat("rank ", Name(o_.store_host_index), " ended without reporting its rendezvous store"));
    }
  }
  Drain();  // every rank has exited: what is left in the pipes is complete
  return absl::OkStatus();
}

}  // namespace

int DefaultRankThreads(int ranks) {
  const unsigned cores = std::thread::hardware_concurrency();
  return std::max(1, static_cast<int>(cores == 0 ? 1 : cores) / std::max(1, ranks));
}

absl::Status LaunchRanks(const LaunchOptions& options, const std::function<void(int, const v1::RankEvent&)>& on_event) {
  if (options.ranks < 1) return absl::InvalidArgumentError(absl::StrCat("cannot launch ", options.ranks, " ranks"));
  if (!options.argv_for) return absl::InvalidArgumentError("no program to launch");
  if (options.store_host_index >= options.ranks) {
    return absl::InvalidArgumentError(absl::StrCat("the store host is process ", options.store_host_index, " of ", options.ranks));
  }
  LaunchOptions o = options;
  if (o.store_secret.empty() && o.store_host_index >= 0) {
    auto secret = NewStoreSecret();
    if (!secret.ok()) return secret.status();
    o.store_secret = *std::move(secret);
  }
  if (auto st = CheckStoreSecret(o.store_secret); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("the ranks' rendezvous secret: ", st.message(),
                                                   o.store_secret.empty() ? " (a launch that joins another's store is given its secret)" : ""));
  }
  RankGroup group(o, on_event);
  return group.Run();
}

}  // namespace mapd

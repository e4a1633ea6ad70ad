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

#include "absl/strings/str_cat.h"

extern char** environ;

namespace mapd {

namespace {

using Clock = std::chrono::steady_clock;

struct Child {
  pid_t pid = -1;
  int out = -1, err = -1;  // read ends
  std::string out_buf, err_tail;
  bool exited = false;
  int status = 0;
  Clock::time_point last_heard;
};

void KillAll(std::vector<Child>& children) {
  for (auto& c : children) {
    if (!c.exited && c.pid > 0) kill(c.pid, SIGTERM);
  }
  const auto deadline = Clock::now() + std::chrono::seconds(3);
  for (auto& c : children) {
    while (!c.exited && c.pid > 0) {
      int status = 0;
      const pid_t r = waitpid(c.pid, &status, WNOHANG);
      if (r == c.pid || r < 0) {
        c.exited = true;
        c.status = status;
        break;
      }
      if (Clock::now() > deadline) {
        kill(c.pid, SIGKILL);
        waitpid(c.pid, &status, 0);
        c.exited = true;
        c.status = status;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

std::string Describe(int status) {
  if (WIFSIGNALED(status)) return absl::StrCat("was killed by signal ", WTERMSIG(status), " (", strsignal(WTERMSIG(status)), ")");
  if (WIFEXITED(status)) return absl::StrCat("exited with status ", WEXITSTATUS(status));
  return "ended";
}

std::string Tail(const std::string& s) {
  std::string t = s;
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

}  // namespace

int DefaultRankThreads(int ranks) {
  const unsigned cores = std::thread::hardware_concurrency();
  return std::max(1, static_cast<int>(cores == 0 ? 1 : cores) / std::max(1, ranks));
}

absl::Status LaunchRanks(const LaunchOptions& options, const std::function<void(int, const std::string&)>& on_line) {
  if (options.ranks < 1) return absl::InvalidArgumentError(absl::StrCat("cannot launch ", options.ranks, " ranks"));
  if (!options.argv_for) return absl::InvalidArgumentError("no program to launch");
  std::vector<Child> children(options.ranks);
  std::string threads_env;
  bool threads_given = std::getenv("OMP_NUM_THREADS") != nullptr;
  for (const std::string& e : options.env) threads_given |= e.rfind("OMP_NUM_THREADS=", 0) == 0;
  if (!threads_given) threads_env = absl::StrCat("OMP_NUM_THREADS=", DefaultRankThreads(options.ranks));
  for (int r = 0; r < options.ranks; ++r) {
    int out[2], err[2];
    if (pipe(out) != 0 || pipe(err) != 0) {
      KillAll(children);
      return absl::InternalError(absl::StrCat("pipe: ", strerror(errno)));
    }
    const std::vector<std::string> args = options.argv_for(r);
    [[maybe_unused]] const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0) {
      KillAll(children);
      return absl::ResourceExhaustedError(absl::StrCat("fork for rank ", r, ": ", strerror(errno)));
    }
    if (pid == 0) {  // the rank
#ifdef __linux__
      // A rank dies with the thread that launched it (a killed mapd-worker or `mapctl run`):
      // left running it would hold its peers in collectives with nobody reading its output.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(137);  // the launcher died before the line above
#endif
      dup2(out[1], 1);
      dup2(err[1], 2);
      close(out[0]);
      close(err[0]);
      close(out[1]);
      close(err[1]);
      for (const std::string& e : options.env) putenv(const_cast<char*>(e.c_str()));
      if (!threads_env.empty()) putenv(const_cast<char*>(threads_env.c_str()));
      std::vector<char*> argv;
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      std::fprintf(stderr, "cannot start %s: %s\n", argv[0], strerror(errno));
      _exit(127);
    }
    close(out[1]);
    close(err[1]);
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    fcntl(err[0], F_SETFL, O_NONBLOCK);
    children[r].pid = pid;
    children[r].out = out[0];
    children[r].err = err[0];
    children[r].last_heard = Clock::now();
  }

  auto name = [&](int r) { return r < static_cast<int>(options.rank_names.size()) ? options.rank_names[r] : r; };
  int running = options.ranks;
  while (running > 0) {
    if (options.cancel != nullptr && options.cancel->load()) {
      KillAll(children);
      return absl::CancelledError("the ranks were stopped (cancelled)");
    }
    std::vector<pollfd> fds;
    std::vector<std::pair<int, bool>> who;  // (rank, is_stdout)
    for (int r = 0; r < options.ranks; ++r) {
      if (children[r].out >= 0) fds.push_back({children[r].out, POLLIN, 0}), who.push_back({r, true});
      if (children[r].err >= 0) fds.push_back({children[r].err, POLLIN, 0}), who.push_back({r, false});
    }
    if (!fds.empty()) poll(fds.data(), fds.size(), 200);
    else std::this_thread::sleep_for(std::chrono::milliseconds(50));
    char buf[4096];
    for (size_t i = 0; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Child& c = children[who[i].first];
      int& fd = who[i].second ? c.out : c.err;
      const ssize_t n = read(fd, buf, sizeof(buf));
      if (n <= 0) {
        if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
          close(fd);
          fd = -1;
        }
        continue;
      }
      if (who[i].second) {
        c.last_heard = Clock::now();
        c.out_buf.append(buf, static_cast<size_t>(n));
        size_t nl;
        while ((nl = c.out_buf.find('\n')) != std::string::npos) {
          on_line(who[i].first, c.out_buf.substr(0, nl));
          c.out_buf.erase(0, nl + 1);
        }
      } else {
        c.err_tail.append(buf, static_cast<size_t>(n));
        if (c.err_tail.size() > 8192) c.err_tail.erase(0, c.err_tail.size() - 4096);
      }
    }
    // Exits.
    for (int r = 0; r < options.ranks; ++r) {
      Child& c = children[r];
      if (c.exited) continue;
      int status = 0;
      if (waitpid(c.pid, &status, WNOHANG) != c.pid) continue;
      c.exited = true;
      c.status = status;
      --running;
      if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        // Drain what it said last.
        if (c.err >= 0) {
          ssize_t n;
          while ((n = read(c.err, buf, sizeof(buf))) > 0) c.err_tail.append(buf, static_cast<size_t>(n));
        }
        KillAll(children);
        // A rank that failed cleanly ends its last line with its status code ("error: ...
        // [RESOURCE_EXHAUSTED]"): the run fails with that code; a crash is ABORTED.
        std::string said = Tail(c.err_tail);
        const absl::StatusCode code = WIFEXITED(status) ? TrailingCode(&said) : absl::StatusCode::kAborted;
        return absl::Status(code, absl::StrCat("rank ", name(r), " ", Describe(status), said.empty() ? "" : absl::StrCat(": ", said)));
      }
    }
    // Silence.
    const auto now = Clock::now();
    for (int r = 0; r < options.ranks; ++r) {
      Child& c = children[r];
      if (c.exited || now - c.last_heard < options.silence_timeout) continue;
      KillAll(children);
      return absl::DeadlineExceededError(absl::StrCat(
          "rank ", name(r), " sent nothing for ", std::chrono::duration_cast<std::chrono::seconds>(options.silence_timeout).count(),
          " s and was stopped with the others (hung?)", c.err_tail.empty() ? "" : absl::StrCat(": ", Tail(c.err_tail))));
    }
  }
  // Every rank has exited: what is left in the pipes is complete.
  char buf[4096];
  for (int r = 0; r < options.ranks; ++r) {
    Child& c = children[r];
    if (c.out >= 0) {
      fcntl(c.out, F_SETFL, 0);
      ssize_t n;
      while ((n = read(c.out, buf, sizeof(buf))) > 0) c.out_buf.append(buf, static_cast<size_t>(n));
      size_t nl;
      while ((nl = c.out_buf.find('\n')) != std::string::npos) {
        on_line(r, c.out_buf.substr(0, nl));
        c.out_buf.erase(0, nl + 1);
      }
      close(c.out);
    }
    if (c.err >= 0) close(c.err);
  }
  return absl::OkStatus();
}

}  // namespace mapd

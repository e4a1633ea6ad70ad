// mapctl logs and watch: a job's events (progress sampled unless --all-steps), followed through
// the coordinator's Watch stream, which is opened again from the last event seen when the
// coordinator goes away and comes back; a rank's output (--rank), followed by asking for what
// came after the last offset seen.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/mapctl/command_table.h"
#include "client/mapctl/commands.h"
#include "client/mapctl/job_client.h"
#include "client/mapctl/job_output.h"
#include "common/bytes.h"
#include "common/job_state.h"
#include "nlohmann/json.hpp"

namespace mapd::cli {

namespace {

// Progress events `mapctl logs` shows by default (evenly spread, the last always).
constexpr size_t kShownStepEvents = 50;
// How long a follow keeps trying to reach a coordinator that went away.
constexpr double kReconnectSeconds = 120;

// The job's outcome as an exit code: 0 succeeded, 1 failed, 3 cancelled (anything else: 1).
int OutcomeCode(v1::JobState s) {
  if (s == v1::SUCCEEDED) return kExitOk;
  if (s == v1::CANCELLED) return kExitJobCancelled;
  return kExitFailed;
}

bool IsTransient(const grpc::Status& st) {
  return st.error_code() == grpc::StatusCode::UNAVAILABLE || st.error_code() == grpc::StatusCode::CANCELLED ||
         st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED || st.error_code() == grpc::StatusCode::ABORTED;
}

// Calls `on_event` for each of the job's events after `after_seq` until it finishes; opens the
// stream again from the last event seen when it breaks (a coordinator restarting), for up to
// kReconnectSeconds without an answer. The job's last state.
absl::StatusOr<v1::JobState> FollowEvents(const Client& client, int64_t id, int64_t after_seq, v1::JobState state,
                                          const std::function<void(const v1::JobEvent&)>& on_event) {
  double failing_since = -1, wait = 0.5;
  for (;;) {
    grpc::ClientContext ctx;
    client.Prepare(ctx, /*timeout_seconds=*/0);  // a watch lasts as long as the job
    v1::WatchJobRequest req;
    req.set_id(id);
    req.set_after_seq(after_seq);
    auto reader = client.stub->Watch(&ctx, req);
    v1::JobEvent e;
    while (reader->Read(&e)) {
      failing_since = -1, wait = 0.5;
      after_seq = e.seq();
      state = e.state();
      on_event(e);
    }
    const grpc::Status st = reader->Finish();
    if (st.ok() && IsFinished(state)) return state;
    if (!st.ok() && !IsTransient(st)) return FromGrpc(st, absl::StrCat("watch ", id));
    const double now = NowUnixSeconds();
    if (failing_since < 0) failing_since = now;
    if (now - failing_since > kReconnectSeconds) return FromGrpc(st, absl::StrCat("watch ", id));
    std::cerr << "\nmapctl: lost the coordinator (" << (st.ok() ? "stream closed" : st.error_message())
              << "); following job " << id << " again from event #" << after_seq << "\n";
    std::this_thread::sleep_for(std::chrono::duration<double>(wait));
    wait = std::min(wait * 2, 5.0);
  }
}

std::string Duration(double seconds) {
  const int64_t s = static_cast<int64_t>(seconds);
  if (s >= 3600) return absl::StrFormat("%dh%02dm", s / 3600, s / 60 % 60);
  if (s >= 60) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%ds", s);
}

// The live progress line: percent, step, loss, throughput, memory, elapsed and time left.
class ProgressBar {
 public:
  explicit ProgressBar(const v1::Job& job) : job_(job) {}
  void Draw(const v1::JobEvent& e) {
    const double now = NowUnixSeconds();
    if (first_seen_ < 0) first_seen_ = now, first_step_ = e.step() - 1;
    const int64_t total = std::max<int64_t>(job_.spec().training().steps(), 1);
    const double fraction = std::min(1.0, static_cast<double>(e.step()) / total);
    const int width = 24, filled = static_cast<int>(width * fraction);
    const double rate = (now - first_seen_) > 0 ? (e.step() - first_step_) / (now - first_seen_) : 0;
    const std::string eta = rate > 0 ? Duration(static_cast<double>(total - e.step()) / rate) : "-";
    std::cout << "\r[" << std::string(filled, '#') << std::string(width - filled, '.') << "] "
              << absl::StrFormat("%3.0f%%  step %lld/%lld  loss %.4f  lr %.3g  %.0f tokens/s  mem %s / %s  elapsed %s  ETA %s", 100 * fraction,
                                 static_cast<long long>(e.step()), static_cast<long long>(total), e.loss(), e.lr(), e.items_per_second(),
                                 FormatBytes(e.peak_bytes()),
                                 job_.spec().memory_per_device() > 0 ? FormatBytes(job_.spec().memory_per_device()) : "-",
                                 Duration(now - job_.created_unix_seconds()), eta)
              << "\033[K" << std::flush;
    on_line_ = true;
  }
  void EndLine() {
    if (on_line_) std::cout << "\n";
    on_line_ = false;
  }

 private:
  const v1::Job& job_;
  double first_seen_ = -1;
  int64_t first_step_ = 0;
  bool on_line_ = false;
};

// The events to print: all but progress, and at most kShownStepEvents progress events.
std::vector<const v1::JobEvent*> Sampled(const v1::JobEventsResponse& out, bool all_steps, size_t* hidden) {
  size_t steps = 0;
  for (const auto& e : out.events()) steps += e.step() > 0;
  const size_t stride = all_steps || steps <= kShownStepEvents ? 1 : (steps + kShownStepEvents - 1) / kShownStepEvents;
  std::vector<const v1::JobEvent*> shown;
  size_t k = 0;
  *hidden = 0;
  for (const auto& e : out.events()) {
    const bool last_step = e.step() > 0 && ++k == steps;
    if (e.step() > 0 && (k - 1) % stride != 0 && !last_step) {
      ++*hidden;
      continue;
    }
    shown.push_back(&e);
  }
  return shown;
}

int RankLogs(const Client& client, const JobArgs& a, int64_t id, const LogsArgs& logs) {
  v1::JobLogsRequest req;
  req.set_id(id);
  req.set_rank(logs.rank);
  req.set_tail_lines(logs.tail);
  double failing_since = -1;
  for (;;) {
    v1::JobLogsResponse out;
    grpc::ClientContext ctx;
    client.Prepare(ctx);
    const grpc::Status st = client.stub->Logs(&ctx, req, &out);
    if (!st.ok()) {
      const double now = NowUnixSeconds();
      if (!logs.follow || !IsTransient(st) || (failing_since >= 0 && now - failing_since > kReconnectSeconds)) {
        return ReportError(FromGrpc(st, absl::StrCat("logs ", id, " --rank ", logs.rank)));
      }
      if (failing_since < 0) failing_since = now;
      std::this_thread::sleep_for(std::chrono::seconds(1));
      continue;
    }
    failing_since = -1;
    if (out.dropped_bytes() > 0) {
      std::cerr << "mapctl: " << out.dropped_bytes() << " bytes of rank " << logs.rank
                << "'s output are no longer kept by the coordinator (its worker's rank_" << logs.rank << ".log has them)\n";
    }
    if (a.format == "json") {
      std::cout << nlohmann::json{{"rank", logs.rank}, {"offset", out.start_offset()}, {"text", out.text()}}.dump() << "\n";
    } else {
      std::cout << out.text();
    }
    std::cout << std::flush;
    // The coordinator reads whether the job has finished before its output: a finished answer
    // has everything.
    if (!logs.follow || out.finished()) return kExitOk;
    req.set_after_offset(out.next_offset());
    req.set_tail_lines(0);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

// Prints rank `rank`'s output as its worker captured it, whole lines only, under `print`, every
// half second until the coordinator says the job has finished (that answer has everything) or
// `job_done` is set and one more read has been made. A failed read is tried again; a refusal
// that will not pass (the rank unknown, no permission) is said once and ends it.
void FollowRankOutput(const Client& client, int64_t id, int rank, const std::atomic<bool>& job_done, std::mutex& print) {
  v1::JobLogsRequest req;
  req.set_id(id);
  req.set_rank(rank);
  std::string partial;
  auto flush = [&](bool all) {
    const size_t end = all ? partial.size() : partial.rfind('\n') + 1;  // npos + 1 = 0: no whole line yet
    if (end == 0) return;
    std::lock_guard<std::mutex> lock(print);
    std::cout << partial.substr(0, end) << (all && partial.back() != '\n' ? "\n" : "") << std::flush;
    partial.erase(0, end);
  };
  for (;;) {
    const bool last = job_done.load();  // read first: an answer after the job ended has everything
    v1::JobLogsResponse out;
    grpc::ClientContext ctx;
    client.Prepare(ctx);
    const grpc::Status st = client.stub->Logs(&ctx, req, &out);
    if (st.ok()) {
      partial += out.text();
      req.set_after_offset(out.next_offset());
      flush(out.finished());
      if (out.finished()) return;
    } else if (!IsTransient(st)) {
      std::lock_guard<std::mutex> lock(print);
      std::cerr << "mapctl: rank " << rank << "'s output: " << FromGrpc(st, absl::StrCat("logs ", id)).message() << "\n";
      return;
    }
    if (last) return flush(true);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

}  // namespace

int RunFollow(const JobArgs& a, int64_t id) {
  auto client = Connect(a);
  if (!client.ok()) return ReportError(client.status());
  auto got = GetJob(*client, id, absl::StrCat("follow ", id));
  if (!got.ok()) return ReportError(got.status());
  const int64_t steps = got->spec().training().steps();
  std::atomic<bool> job_done{false};
  std::mutex print;
  std::thread output([&] { FollowRankOutput(*client, id, 0, job_done, print); });
  auto end = FollowEvents(*client, id, 0, got->state(), [&](const v1::JobEvent& e) {
    std::lock_guard<std::mutex> lock(print);
    if (a.format == "json") std::cout << ToJson(e).dump() << "\n" << std::flush;
    else std::cout << EventLine(e, steps) << "\n" << std::flush;
  });
  job_done = true;
  output.join();
  if (!end.ok()) return ReportError(end.status());
  return OutcomeCode(*end);
}

int RunLogs(const JobArgs& a, int64_t id, const LogsArgs& logs) {
  auto client = Connect(a);
  if (!client.ok()) return ReportError(client.status());
  if (logs.rank >= 0) return RankLogs(*client, a, id, logs);
  v1::JobEventsRequest req;
  req.set_id(id);
  v1::JobEventsResponse out;
  if (auto st = client->Call(absl::StrCat("logs ", id), [&](grpc::ClientContext* ctx) { return client->stub->Events(ctx, req, &out); });
      !st.ok()) {
    return ReportError(st);
  }
  const v1::Job job = GetJob(*client, id, "").value_or(v1::Job());  // the step total and the state
  size_t hidden = 0;
  std::vector<const v1::JobEvent*> shown = Sampled(out, logs.all_steps || IsDocumentFormat(a.format), &hidden);
  if (logs.tail > 0 && shown.size() > static_cast<size_t>(logs.tail)) shown.erase(shown.begin(), shown.end() - logs.tail);
  if (IsDocumentFormat(a.format)) {
    nlohmann::json j = nlohmann::json::array();
    for (const v1::JobEvent* e : shown) j.push_back(ToJson(*e));
    PrintDocument(a.format, j);
  } else {
    if (hidden > 0 && logs.tail == 0) {
      std::cout << "(" << hidden << " of the progress events left out; --all-steps shows every one)\n";
    }
    for (const v1::JobEvent* e : shown) std::cout << EventLine(*e, job.spec().training().steps()) << "\n";
  }
  if (!logs.follow) return kExitOk;
  const int64_t last = out.events_size() > 0 ? out.events(out.events_size() - 1).seq() : 0;
  v1::JobState state = out.events_size() > 0 ? out.events(out.events_size() - 1).state() : job.state();
  if (IsFinished(state)) return kExitOk;
  auto end = FollowEvents(*client, id, last, state, [&](const v1::JobEvent& e) {
    if (a.format == "json") std::cout << ToJson(e).dump() << "\n" << std::flush;
    else if (a.format == "yaml") std::cout << "---\n" << ToYaml(ToJson(e)) << std::flush;  // a document an event
    else std::cout << EventLine(e, job.spec().training().steps()) << "\n" << std::flush;
  });
  if (!end.ok()) return ReportError(end.status());
  return kExitOk;
}

int RunWatch(const JobArgs& a, int64_t id) {
  auto client = Connect(a);
  if (!client.ok()) return ReportError(client.status());
  auto got = GetJob(*client, id, absl::StrCat("watch ", id));
  if (!got.ok()) return ReportError(got.status());
  const v1::Job& job = *got;
  const bool tty = isatty(STDOUT_FILENO) && a.format != "json";
  ProgressBar bar(job);
  auto end = FollowEvents(*client, id, 0, job.state(), [&](const v1::JobEvent& e) {
    if (a.format == "json") {
      std::cout << ToJson(e).dump() << "\n" << std::flush;
    } else if (e.step() > 0 && tty) {
      bar.Draw(e);
    } else {
      bar.EndLine();
      std::cout << EventLine(e, job.spec().training().steps()) << "\n" << std::flush;
    }
  });
  bar.EndLine();
  if (!end.ok()) return ReportError(end.status());
  return OutcomeCode(*end);
}

void AddLogCommands(CLI::App& app, Commands& out) {
  auto conn = std::make_shared<JobArgs>();
  auto id = std::make_shared<int64_t>(0);
  auto logs_args = std::make_shared<LogsArgs>();
  CLI::App* watch = AddJobIdCommand(app, "watch", "Follow a job until it finishes (progress bar on a terminal); exits 0 succeeded, 1 failed, 3 cancelled",
                                    id.get(), conn.get());
  CLI::App* logs = AddJobIdCommand(app, "logs", "Print a job's events (progress sampled), or a rank's output with --rank", id.get(), conn.get());
  logs->add_option("--rank", logs_args->rank, "Print this rank's output (its stderr, as its worker captured it) instead of the events");
  logs->add_flag("-f,--follow", logs_args->follow, "Keep printing as it comes, until the job finishes");
  logs->add_option("--tail", logs_args->tail, "Only the last N lines (events or output)")->check(CLI::Range(1, 100000));
  logs->add_flag("--all-steps", logs_args->all_steps, "Every progress event (by default at most 50, spread over the job)");
  out.push_back({watch, [conn, id] { return RunWatch(*conn, *id); }});
  out.push_back({logs, [conn, id, logs_args] { return RunLogs(*conn, *id, *logs_args); }});
}

}  // namespace mapd::cli

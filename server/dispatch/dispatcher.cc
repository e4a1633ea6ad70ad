#include "server/dispatch/dispatcher.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "planner/profile/timeline_svg.h"  // FormatBytes

namespace mapd {

namespace {

// "2-3" or "2".
std::string RankRange(const v1::RankAssignment& a) {
  if (a.ranks().empty()) return "";
  const int lo = a.ranks(0), hi = a.ranks(a.ranks_size() - 1);
  return lo == hi ? absl::StrCat(lo) : absl::StrCat(lo, "-", hi);
}

void SetError(v1::Job& job, const std::string& why) { job.set_error(why); }

// "cuda" for "cuda:1".
std::string DeviceKind(const std::string& device) { return device.substr(0, device.find(':')); }

}  // namespace

absl::Status DispatchOptions::Validate() const {
  if (advertise_host.empty()) return absl::InvalidArgumentError("--advertise-host: give the address workers reach this coordinator at");
  return absl::OkStatus();
}

Dispatcher::Dispatcher(JobManager* jobs, WorkerRegistry* workers, RendezvousHost* rendezvous, DispatchOptions options, PlanJobFn plan)
    : jobs_(jobs), workers_(workers), rendezvous_(rendezvous), options_(std::move(options)), plan_(std::move(plan)) {}

void Dispatcher::FailOrphans() {
  orphans_checked_ = true;
  for (const v1::Job& job : jobs_->List()) {
    if (job.state() != v1::PLANNING && job.state() != v1::RUNNING && job.state() != v1::RESTARTING) continue;
    const std::string why = absl::StrCat("the coordinator restarted while the job was ", v1::JobState_Name(job.state()),
                                         "; its ranks were stopped (their rendezvous is gone) — submit it again");
    (void)jobs_->Transition(job.id(), v1::FAILED, why, [&](v1::Job& j) { SetError(j, why); });
  }
}

std::map<std::string, std::vector<std::string>> Dispatcher::FreeDevicesLocked(const std::string& kind, int64_t min_memory) const {
  std::map<std::string, std::set<std::string>> busy;
  for (const auto& [id, job] : active_) {
    for (const Part& p : job.parts) {
      if (!p.finished) busy[p.worker_id].insert(p.assignment.devices().begin(), p.assignment.devices().end());
    }
  }
  std::map<std::string, std::vector<std::string>> free;
  for (const v1::Worker& w : workers_->List()) {
    if (w.state() != v1::ALIVE) continue;
    for (const v1::Device& d : w.devices()) {
      if (DeviceKind(d.name()) == kind && d.memory_bytes() >= min_memory && !busy[w.id()].count(d.name())) {
        free[w.id()].push_back(d.name());
      }
    }
  }
  return free;
}

std::map<std::string, int> Dispatcher::BusyDevices() const {
  absl::MutexLock lock(&mu_);
  std::map<std::string, int> out;
  for (const auto& [id, job] : active_) {
    for (const Part& p : job.parts) {
      if (!p.finished) out[p.worker_id] += p.assignment.devices_size();
    }
  }
  return out;
}

bool Dispatcher::TryStart(const v1::Job& job) {
  const v1::JobSpec& spec = job.spec();
  const int ranks = spec.ranks();
  const int64_t budget = spec.memory_per_device();
  const std::string kind = spec.device().empty() ? "cpu" : spec.device();
  auto count = [](const std::map<std::string, std::vector<std::string>>& free) {
    int n = 0;
    for (const auto& [w, d] : free) n += static_cast<int>(d.size());
    return n;
  };
  {
    absl::MutexLock lock(&mu_);
    const auto free = FreeDevicesLocked(kind, budget);
    if (count(free) < ranks) {
      if (told_waiting_.insert(job.id()).second) {
        (void)jobs_->Note(job.id(), absl::StrCat("waiting for ", ranks, " free ", kind, " device(s)",
                                                 budget > 0 ? absl::StrCat(" with ", FormatBytes(budget), " each") : "", "; ",
                                                 count(free), " free on ALIVE workers now"));
      }
      return false;
    }
  }
  if (!jobs_->Transition(job.id(), v1::PLANNING, absl::StrCat("planning for ", ranks, " rank(s)")).ok()) return true;  // cancelled
  auto plan = plan_(spec);
  if (!plan.ok()) {
    const std::string why = absl::StrCat(absl::StatusCodeToString(plan.status().code()), ": ", plan.status().message());
    (void)jobs_->Transition(job.id(), v1::FAILED, why, [&](v1::Job& j) { SetError(j, why); });
    return true;
  }
  absl::MutexLock lock(&mu_);
  told_waiting_.erase(job.id());
  // Devices may have gone while planning (a lost worker): then the job queues again.
  const auto free = FreeDevicesLocked(kind, budget);
  if (count(free) < ranks) {
    (void)jobs_->Transition(job.id(), v1::PENDING, "back in the queue: devices went away while planning");
    return false;
  }
  std::vector<std::pair<std::string, std::vector<std::string>>> order(free.begin(), free.end());
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
  auto port = rendezvous_->Open(job.id());
  if (!port.ok()) {
    const std::string why = absl::StrCat("cannot open the job's rendezvous store: ", port.status().message());
    (void)jobs_->Transition(job.id(), v1::FAILED, why, [&](v1::Job& j) { SetError(j, why); });
    return true;
  }
  ActiveJob active;
  active.world = ranks;
  int next_rank = 0;
  for (const auto& [worker_id, devices] : order) {
    if (next_rank == ranks) break;
    Part part;
    part.worker_id = worker_id;
    v1::RankAssignment& a = part.assignment;
    a.set_job_id(job.id());
    for (size_t i = 0; i < devices.size() && next_rank < ranks; ++i, ++next_rank) {
      a.add_ranks(next_rank);
      a.add_devices(devices[i]);
      *a.add_programs() = plan->lowered.programs[next_rank];
      a.add_predicted_peak_bytes(plan->lowered.predicted[next_rank].peak_bytes);
      a.add_predicted_step_seconds(plan->lowered.predicted[next_rank].step_seconds());
    }
    for (int64_t d : plan->mesh) a.add_mesh(d);
    *a.mutable_graph() = plan->graph;
    a.set_store_address(absl::StrCat(options_.advertise_host, ":", *port));
    a.set_steps(spec.steps());
    a.set_optimizer(spec.optimizer());
    a.set_lr(spec.lr());
    a.set_data(spec.data());
    a.set_seed(spec.seed());
    a.set_memory_cap(budget);
    a.set_checkpoint_every(spec.checkpoint_every());
    a.set_items_per_step(plan->items.count);
    a.set_item_unit(plan->items.unit);
    a.set_model_flops_per_step(plan->model_flops_per_step);
    a.set_device_peak_flops(plan->device_peak_flops);
    a.set_plan(plan->summary);
    active.parts.push_back(std::move(part));
  }
  std::vector<std::string> where;
  for (const Part& p : active.parts) where.push_back(absl::StrCat(p.worker_id, " (rank ", RankRange(p.assignment), ")"));
  const int64_t peak = plan->predicted_peak_bytes;
  const std::string summary = plan->summary;
  auto running = jobs_->Transition(job.id(), v1::RUNNING,
                                   absl::StrCat("running on ", absl::StrJoin(where, ", "), "; plan: ", summary, "; ",
                                                FormatBytes(peak), " per rank predicted"),
                                   [&](v1::Job& j) {
                                     j.set_plan_summary(summary);
                                     j.set_predicted_peak_bytes(peak);
                                   });
  if (!running.ok()) {  // cancelled while planning
    rendezvous_->Close(job.id());
    return true;
  }
  active_[job.id()] = std::move(active);
  return true;
}

void Dispatcher::FailLocked(int64_t id, ActiveJob& job, const std::string& why) {
  job.failed = true;
  job.stopping = true;
  (void)jobs_->Transition(id, v1::FAILED, why, [&](v1::Job& j) { SetError(j, why); });
}

void Dispatcher::ReapLocked() {
  for (auto it = active_.begin(); it != active_.end();) {
    bool ended = true;
    for (const Part& p : it->second.parts) ended = ended && p.finished;
    if (ended) {
      rendezvous_->Close(it->first);
      it = active_.erase(it);
    } else {
      ++it;
    }
  }
}

void Dispatcher::Tick() {
  if (!orphans_checked_) FailOrphans();
  {
    absl::MutexLock lock(&mu_);
    std::map<std::string, v1::WorkerState> state;
    for (const v1::Worker& w : workers_->List()) state[w.id()] = w.state();
    for (auto& [id, job] : active_) {
      if (!job.stopping) {
        auto j = jobs_->Get(id);
        if (j.ok() && IsFinished(j->state())) job.stopping = true;  // cancelled by the user
      }
      for (Part& part : job.parts) {
        if (part.finished || state[part.worker_id] == v1::ALIVE) continue;
        part.finished = true;  // nothing to wait for from a lost worker
        if (!job.stopping) {
          FailLocked(id, job, absl::StrCat("worker ", part.worker_id, " was lost (its lease ran out) while running rank ",
                                           RankRange(part.assignment), "; the other ranks were stopped"));
        }
      }
    }
    ReapLocked();
    for (auto it = told_waiting_.begin(); it != told_waiting_.end();) {
      auto j = jobs_->Get(*it);
      it = (!j.ok() || j->state() != v1::PENDING) ? told_waiting_.erase(it) : std::next(it);
    }
  }
  for (const v1::Job& job : jobs_->Pending()) TryStart(job);
}

void Dispatcher::OnHeartbeat(const std::string& worker_id, const std::vector<int64_t>& running, v1::HeartbeatResponse* out) {
  absl::MutexLock lock(&mu_);
  const std::set<int64_t> runs(running.begin(), running.end());
  for (auto& [id, job] : active_) {
    for (Part& part : job.parts) {
      if (part.worker_id != worker_id || part.finished) continue;
      if (job.stopping) {
        out->add_cancel_job_ids(id);
        if (!runs.count(id)) part.finished = true;  // never started there, or already ended
      } else if (!runs.count(id)) {
        *out->add_assignments() = part.assignment;
      }
    }
  }
  for (int64_t id : runs) {
    auto it = active_.find(id);
    bool ours = false;
    if (it != active_.end()) {
      for (const Part& p : it->second.parts) ours = ours || p.worker_id == worker_id;
    }
    if (!ours) out->add_cancel_job_ids(id);  // a job this coordinator does not run there
  }
  ReapLocked();
}

absl::StatusOr<v1::ReportResponse> Dispatcher::OnReport(const v1::ReportRequest& report) {
  absl::MutexLock lock(&mu_);
  auto it = active_.find(report.job_id());
  Part* part = nullptr;
  if (it != active_.end()) {
    for (Part& p : it->second.parts) {
      if (p.worker_id == report.worker_id()) part = &p;
    }
  }
  if (part == nullptr) {
    return absl::NotFoundError(absl::StrCat("job ", report.job_id(), " does not run on worker ", report.worker_id(),
                                            " here; stop its ranks"));
  }
  const int64_t id = report.job_id();
  ActiveJob& job = it->second;
  const v1::RankAssignment& a = part->assignment;
  for (const v1::RankStep& s : report.steps()) {
    job.worst_peak_bytes = std::max(job.worst_peak_bytes, s.peak_bytes());
    if (s.rank() != 0) continue;
    if (job.last_step == 0) job.first_loss = s.loss();
    job.last_step = s.step();
    job.last_loss = s.loss();
    if (job.stopping) continue;
    JobProgress p;
    p.step = s.step();
    p.loss = s.loss();
    p.items_per_second = s.seconds() > 0 ? static_cast<double>(a.items_per_step()) / s.seconds() : 0;
    p.peak_bytes = job.worst_peak_bytes;
    (void)jobs_->ReportProgress(id, p);
  }
  if (report.checkpoint_step() > 0 && !job.stopping &&
      ++job.checkpoints[report.checkpoint_step()] == static_cast<int>(job.parts.size())) {
    (void)jobs_->Note(id, absl::StrCat("checkpoint: step ", report.checkpoint_step(), " committed on every worker"));
  }
  v1::ReportResponse out;
  if (report.finished() && !part->finished) {
    part->finished = true;
    if (report.code() != 0 && !job.stopping) {
      FailLocked(id, job, absl::StrCat("worker ", report.worker_id(), ": ", report.error()));
    } else if (!job.stopping) {
      bool all = true;
      for (const Part& p : job.parts) all = all && p.finished;
      if (all) {
        job.stopping = true;
        (void)jobs_->Transition(id, v1::SUCCEEDED,
                                absl::StrFormat("trained %d steps on %d rank(s): loss %.4f -> %.4f; worst rank's peak %s", job.last_step,
                                                job.world, job.first_loss, job.last_loss, FormatBytes(job.worst_peak_bytes)));
      }
    }
  }
  out.set_cancel(job.stopping && !report.finished());
  ReapLocked();
  return out;
}

}  // namespace mapd

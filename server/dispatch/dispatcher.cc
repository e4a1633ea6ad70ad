#include "server/dispatch/dispatcher.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/bytes.h"
#include "common/checkpoint/checkpoint_commit.h"
#include "common/report_limits.h"

namespace mapd {

namespace {

// Device counts an elastic job is planned for in one round of the planning thread: a job whose
// plans do not fit many counts (a client's min_devices 1 on thousands of devices) goes on being
// planned in later rounds, after the other jobs' starts, rather than hold the thread for each.
constexpr int kElasticPlansPerRound = 4;

// The most rank steps one report may carry (workers send theirs at least every 256, job_runner.cc).
constexpr int kMaxStepsPerReport = 4096;
// And evaluations (one per eval_every steps at most; a worker sends each as it comes).
constexpr int kMaxEvaluationsPerReport = 256;

// "2-3" or "2".
std::string RankRange(const v1::RankAssignment& a) {
  if (a.ranks().empty()) return "";
  const int lo = a.ranks(0), hi = a.ranks(a.ranks_size() - 1);
  return lo == hi ? absl::StrCat(lo) : absl::StrCat(lo, "-", hi);
}

// FAILED with `why` as the event and the job's error (no-op for a job already finished).
void MarkFailed(JobManager* jobs, int64_t id, const std::string& why) {
  (void)jobs->Transition(id, v1::FAILED, why, [&](v1::Job& j) { j.set_error(why); });
}

// "cuda" for "cuda:1".
std::string DeviceKind(const std::string& device) { return device.substr(0, device.find(':')); }

// The kind of device the job runs on (jobs stored before the field existed: cpu).
std::string JobDeviceKind(const v1::JobSpec& spec) { return spec.device().empty() ? "cpu" : spec.device(); }

int Count(const std::map<std::string, std::vector<std::string>>& free) {
  int n = 0;
  for (const auto& [w, d] : free) n += static_cast<int>(d.size());
  return n;
}

// The committed step `job` would resume from was written under another plan than its own.
bool WrittenUnderAnotherPlan(const v1::CheckpointMeta& committed_under, const RunnablePlan& plan) {
  return !CheckCheckpointMatches(committed_under, plan.world(), plan.mesh, plan.checkpoint_plan, "").ok();
}

bool HasRankZero(const v1::RankAssignment& a) {
  return std::find(a.ranks().begin(), a.ranks().end(), 0) != a.ranks().end();
}

// A store address a worker reports: host:port, bounded, printable, no spaces.
absl::Status CheckStoreAddress(const std::string& address) {
  const size_t colon = address.rfind(':');
  int port = 0;
  const bool printable = std::all_of(address.begin(), address.end(), [](char c) { return c > ' ' && c < 127; });
  if (address.size() > 256 || !printable || colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 1 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("store_address '", address.substr(0, 64), "' is not host:port (at most 256 characters)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status DispatchOptions::Validate() const {
  if (max_restarts < 0) return absl::InvalidArgumentError(absl::StrCat("--max-restarts ", max_restarts, ": give 0 or more"));
  if (keep_checkpoints < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--keep-checkpoints ", keep_checkpoints, ": give 1 or more (the last committed step is always kept)"));
  }
  if (!(elastic_grace_seconds >= 0) || elastic_grace_seconds > 86400) {
    return absl::InvalidArgumentError(absl::StrCat("--elastic-grace-seconds ", elastic_grace_seconds, ": give 0 to 86400 seconds"));
  }
  if (!checkpoint_dir.empty() && checkpoint_dir[0] != '/') {
    return absl::InvalidArgumentError(absl::StrCat("--checkpoint-dir ", checkpoint_dir, ": give an absolute path (workers use it as is)"));
  }
  return absl::OkStatus();
}

const char* Dispatcher::PhaseName(Phase p) {
  switch (p) {
    case Phase::kRunning: return "running";
    case Phase::kStopping: return "stopping";
    case Phase::kRestarting: return "restarting";
    case Phase::kRecovering: return "recovering";
  }
  return "?";
}

void Dispatcher::MoveLocked(int64_t id, ActiveJob& job, Phase to) {
  const Phase from = job.phase;
  // The diagram in dispatcher.h; staying where one is, is always allowed.
  const bool allowed = from == to || to == Phase::kStopping || (to == Phase::kRunning && from != Phase::kStopping) ||
                       (to == Phase::kRestarting && from != Phase::kRecovering);
  if (!allowed) {
    std::fprintf(stderr, "mapd: dispatcher bug: job %lld moved from %s to %s\n", static_cast<long long>(id), PhaseName(from), PhaseName(to));
    std::abort();
  }
  job.phase = to;
}

void Dispatcher::RunEffects() {
  absl::MutexLock order(&effects_mu_);  // one batch at a time, in the order they were queued
  for (;;) {  // (an effect may queue more: a committed checkpoint lets a job grow)
    std::vector<std::function<void()>> run;
    {
      absl::MutexLock lock(&mu_);
      run.swap(effects_);
    }
    if (run.empty()) return;
    for (auto& effect : run) effect();
  }
}

Dispatcher::Dispatcher(JobManager* jobs, WorkerRegistry* workers, DispatchOptions options, PlanJobFn plan, AdmittedPlans* admitted)
    : jobs_(jobs), workers_(workers), options_(std::move(options)), plan_(std::move(plan)), admitted_(admitted) {}

void Dispatcher::RecoverOrphans() {
  double recover_after = 0;
  {
    absl::MutexLock lock(&mu_);
    recover_after = recover_after_ = workers_->NowUnixSeconds() + workers_->lease().lease_seconds;
  }
  for (const v1::Job& job : jobs_->List()) {
    if (job.state() == v1::PLANNING) {
      (void)jobs_->Transition(job.id(), v1::PENDING, "the coordinator restarted while planning the job; back in the queue");
      continue;
    }
    if (job.state() != v1::RUNNING && job.state() != v1::RESTARTING) continue;
    auto recovered = RecoverJob(job);
    if (!recovered.ok()) {
      MarkFailed(jobs_, job.id(),
                 absl::StrCat("the coordinator restarted while the job was ", v1::JobState_Name(job.state()), " and ",
                              recovered.status().message(), "; its ranks were stopped (a restarted coordinator does not adopt running ranks) — submit it again"));
      continue;
    }
    const std::string why = absl::StrCat("the coordinator restarted; restarting from the checkpoint of step ", recovered->checkpoints.committed(),
                                         " (restart ", recovered->restarts, " of at most ", options_.max_restarts,
                                         ") once no worker runs the job's earlier ranks",
                                         WrittenUnderAnotherPlan(recovered->committed_under, *recovered->plan)
                                             ? absl::StrCat("; planned anew as ", recovered->plan->checkpoint_plan,
                                                            ", so the checkpoint is resharded into it")
                                             : "");
    auto noted = job.state() == v1::RUNNING ? jobs_->Transition(job.id(), v1::RESTARTING, why) : jobs_->Note(job.id(), why);
    if (!noted.ok()) continue;  // cancelled meanwhile
    absl::MutexLock lock(&mu_);
    // An elastic job waits a grace past the workers' return for as many devices as it last had.
    recovered->resize_after = recover_after + options_.elastic_grace_seconds;
    active_[job.id()] = *std::move(recovered);
  }
  orphans_checked_ = true;
}

absl::StatusOr<Dispatcher::ActiveJob> Dispatcher::RecoverJob(const v1::Job& job) {
  if (options_.checkpoint_dir.empty()) {
    return absl::FailedPreconditionError("it has no checkpoint to resume from (no --checkpoint-dir)");
  }
  auto meta = ReadLatestCheckpoint(JobCheckpointDir(job.id()));
  if (!meta.ok()) return absl::FailedPreconditionError(absl::StrCat("it cannot resume: ", meta.status().message()));
  // (Jobs stored before Job.restarts existed, and jobs that are not elastic, restart with every
  // attempt.)
  const int restarted = job.spec().has_elastic() ? job.restarts() : std::max(job.attempt(), job.restarts());
  if (restarted + 1 > options_.max_restarts) {
    return absl::FailedPreconditionError(absl::StrCat("it has restarted ", restarted, " time(s) already (--max-restarts ", options_.max_restarts, ")"));
  }
  auto plan = plan_(job.spec());
  if (!plan.ok()) return absl::FailedPreconditionError(absl::StrCat("planning it again failed: ", plan.status().message()));
  ActiveJob active;
  // A plan other than the checkpoint's (the planner or its cost model changed, or an elastic job
  // ran on fewer devices) resumes resharded: each rank takes its blocks of the whole tensors.
  active.committed_under = *meta;
  active.spec = job.spec();
  active.plan = std::make_shared<const RunnablePlan>(*std::move(plan));
  active.phase = Phase::kRecovering;
  active.attempt = job.attempt() + 1;
  active.restarts = restarted + 1;
  if (active.spec.has_elastic()) {
    active.plans.Found(active.plan);
    active.devices_before = meta->ranks();
  }
  active.checkpoints.Committed(meta->step());
  active.progress.last_step = meta->step();
  return active;
}

bool Dispatcher::RecoveredMayResumeLocked(const ActiveJob& job) const {
  if (workers_->NowUnixSeconds() < recover_after_) return false;
  std::set<std::string> alive;
  for (const v1::Worker& w : workers_->List()) {
    if (w.state() == v1::ALIVE) alive.insert(w.id());
  }
  for (const std::string& w : job.held_by) {
    if (alive.count(w)) return false;
  }
  return true;
}

std::map<std::string, std::set<std::string>> Dispatcher::BusyLocked() const {
  std::map<std::string, std::set<std::string>> busy;
  for (const auto& [id, job] : active_) {
    for (const Part& p : job.parts) {
      if (!p.finished) busy[p.worker_id].insert(p.assignment.devices().begin(), p.assignment.devices().end());
    }
  }
  return busy;
}

std::map<std::string, std::vector<std::string>> Dispatcher::FreeDevicesLocked(const std::string& kind, int64_t min_memory) const {
  std::map<std::string, std::set<std::string>> busy = BusyLocked();
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
  for (const auto& [worker, devices] : BusyLocked()) out[worker] = static_cast<int>(devices.size());
  return out;
}

std::string Dispatcher::WaitingMessage(const v1::JobSpec& spec, int devices, int free) {
  const int64_t budget = spec.memory_per_device();
  return absl::StrCat("waiting for ", devices, " free ", JobDeviceKind(spec), " device(s)",
                      budget > 0 ? absl::StrCat(" with ", FormatBytes(budget), " each") : "", "; ", free, " free on ALIVE workers now");
}

absl::Status Dispatcher::PlaceLocked(int64_t id, ActiveJob& job, int64_t resume_step) {
  const v1::JobSpec& spec = job.spec;
  const RunnablePlan& plan = *job.plan;
  const int ranks = plan.world();
  const auto free = FreeDevicesLocked(JobDeviceKind(spec), spec.memory_per_device());
  if (Count(free) < ranks) return absl::FailedPreconditionError(WaitingMessage(spec, ranks, Count(free)));
  std::vector<std::pair<std::string, std::vector<std::string>>> order(free.begin(), free.end());
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
  job.parts.clear();
  MoveLocked(id, job, Phase::kRunning);
  job.checkpoints.NewAttempt();
  int next_rank = 0;
  for (const auto& [worker_id, devices] : order) {
    if (next_rank == ranks) break;
    Part part;
    part.worker_id = worker_id;
    v1::RankAssignment& a = part.assignment;
    a.set_job_id(id);
    for (size_t i = 0; i < devices.size() && next_rank < ranks; ++i, ++next_rank) {
      a.add_ranks(next_rank);
      a.add_devices(devices[i]);
      *a.add_programs() = plan.lowered.programs[next_rank];
      a.add_predicted_peak_bytes(plan.lowered.predicted[next_rank].peak_bytes);
      a.add_predicted_step_seconds(plan.lowered.predicted[next_rank].step_seconds());
    }
    // The job's world mesh: a pipeline's stages are its outermost axis (every rank's program says
    // where it stands; stage s holds ranks s·(ranks/stages) on, placed in order).
    if (plan.pipeline_stages > 1) a.add_mesh(plan.pipeline_stages);
    for (int64_t d : plan.mesh) a.add_mesh(d);
    *a.mutable_graph() = plan.graph;
    // store_address stays empty until rank 0 (in the first part) reports where it hosts the store.
    *a.mutable_training() = spec.training();
    a.set_memory_cap(spec.memory_per_device());
    a.set_items_per_step(plan.items.count);
    a.set_item_unit(plan.items.unit);
    a.set_model_flops_per_step(plan.model_flops_per_step);
    a.set_device_peak_flops(plan.device_peak_flops);
    a.set_plan(plan.checkpoint_plan);
    if (!options_.checkpoint_dir.empty()) a.set_checkpoint_dir(JobCheckpointDir(id));
    a.set_resume_step(resume_step);
    a.set_resume_resharded(resume_step > 0 && WrittenUnderAnotherPlan(job.committed_under, plan));
    a.set_attempt(job.attempt);
    job.parts.push_back(std::move(part));
  }
  return absl::OkStatus();
}

std::string Dispatcher::Where(const ActiveJob& job) {
  std::vector<std::string> where;
  for (const Part& p : job.parts) where.push_back(absl::StrCat(p.worker_id, " (rank ", RankRange(p.assignment), ")"));
  return absl::StrJoin(where, ", ");
}

std::string Dispatcher::JobCheckpointDir(int64_t id) const { return absl::StrCat(options_.checkpoint_dir, "/job-", id); }

absl::StatusOr<RunnablePlan> Dispatcher::PlanSmallerStart(const v1::JobSpec& spec, int devices) const {
  // The few largest counts (kElasticPlansPerRound): a job that fits none of them waits for all.
  const int lo = std::max(BoundsOf(spec).min_devices, devices - kElasticPlansPerRound + 1);
  ElasticPlans plans;
  for (int n = devices; n >= lo; --n) {
    auto plan = PlanForDevices(plan_, spec, n);
    if (plan.ok() || plan.status().code() != absl::StatusCode::kFailedPrecondition) return plan;
    plans.Refused(n, std::string(plan.status().message()));
  }
  return absl::FailedPreconditionError(plans.Choose(lo, devices).why);
}

bool Dispatcher::TryStart(const v1::Job& job) {
  const v1::JobSpec& spec = job.spec();
  const int64_t id = job.id();
  int devices = spec.ranks();
  {
    absl::MutexLock lock(&mu_);
    const int free = FreeForLocked(spec);
    // An elastic job starts on the devices free, at least its min_devices, rather than wait (it
    // grows at its checkpoints) — unless no plan fitted so few before.
    const bool smaller = spec.has_elastic() && free >= BoundsOf(spec).min_devices && !small_start_refused_.count(id);
    if (free < spec.ranks() && !smaller) {
      if (told_waiting_.insert(id).second) {
        Defer([this, id, why = WaitingMessage(spec, spec.ranks(), free)] { (void)jobs_->Note(id, why); });
      }
      return false;
    }
    devices = std::min(free, spec.ranks());
  }
  const bool fewer = devices < spec.ranks();
  const std::string elastic_start = fewer ? absl::StrCat(" of its ", spec.ranks(), " (elastic: it grows at its checkpoints)") : "";
  // Admission planned the job for its ranks: it starts on that plan unless it gets fewer devices
  // (or the plan is gone: dropped past mapd --admitted-plan-bytes, or made before a restart).
  std::shared_ptr<const RunnablePlan> admitted = admitted_ != nullptr && !fewer ? admitted_->Take(id) : nullptr;
  if (admitted != nullptr && admitted->world() != devices) admitted = nullptr;
  const std::string planning =
      admitted != nullptr ? absl::StrCat("placing on the plan admission made for ", devices, " rank(s)")
                          : absl::StrCat("planning for ", devices, " rank(s)", elastic_start,
                                         fewer ? "" : (admitted_ != nullptr ? " (admission's plan is no longer kept)" : ""));
  if (!jobs_->Transition(id, v1::PLANNING, planning).ok()) return true;  // cancelled
  absl::StatusOr<std::shared_ptr<const RunnablePlan>> plan = admitted;
  if (admitted == nullptr) {
    auto made = fewer ? PlanSmallerStart(spec, devices) : plan_(spec);
    if (made.ok()) plan = std::make_shared<const RunnablePlan>(*std::move(made));
    else plan = made.status();
  }
  if (!plan.ok() && fewer && plan.status().code() == absl::StatusCode::kFailedPrecondition) {
    // Nothing fits the devices free now: the job waits for all it asks for.
    absl::MutexLock lock(&mu_);
    small_start_refused_.insert(id);
    Defer([this, id, why = absl::StrCat("back in the queue: ", plan.status().message(), "; waiting for ", spec.ranks(), " devices")] {
      (void)jobs_->Transition(id, v1::PENDING, why);
    });
    return false;
  }
  if (!plan.ok()) {
    MarkFailed(jobs_, id, absl::StrCat(absl::StatusCodeToString(plan.status().code()), ": ", plan.status().message()));
    return true;
  }
  absl::MutexLock lock(&mu_);
  told_waiting_.erase(id);
  small_start_refused_.erase(id);
  ActiveJob active;
  active.spec = spec;
  active.plan = *std::move(plan);
  if (spec.has_elastic()) {
    active.plans.Found(active.plan);
    // Started on fewer devices: admission's plan for all of them is the one it grows back into.
    if (std::shared_ptr<const RunnablePlan> all = fewer && admitted_ != nullptr ? admitted_->Take(id) : nullptr) active.plans.Found(all);
  }
  if (auto st = PlaceLocked(id, active, 0); !st.ok()) {
    const std::string why(st.message());
    if (st.code() == absl::StatusCode::kFailedPrecondition) {  // devices went away while planning (a lost worker)
      if (!fewer && admitted_ != nullptr) admitted_->Put(id, active.plan);  // kept for its next try
      Defer([this, id, why] { (void)jobs_->Transition(id, v1::PENDING, absl::StrCat("back in the queue: ", why)); });
      return false;
    }
    Defer([this, id, why] { MarkFailed(jobs_, id, why); });
    return true;
  }
  const int64_t peak = active.plan->predicted_peak_bytes;
  const std::string summary = active.plan->summary;
  const std::string message = absl::StrCat("running on ", Where(active), "; plan: ", summary, "; ", FormatBytes(peak), " per rank predicted",
                                           fewer ? absl::StrCat("; ", devices, elastic_start) : "");
  // Cancelled while planning: the transition fails, and Watch stops the job as any cancelled one.
  Defer([this, id, message, summary, peak, devices] {
    StopIfUnrecorded(id, jobs_->Transition(id, v1::RUNNING, message, [&](v1::Job& j) {
      j.set_plan_summary(summary);
      j.set_predicted_peak_bytes(peak);
      j.set_devices(devices);
    }).status());
  });
  active_[id] = std::move(active);
  return true;
}

void Dispatcher::TellWaitLocked(int64_t id, ActiveJob& job, const std::string& kind, const std::string& why) {
  if (job.told_wait == kind) return;
  job.told_wait = kind;
  Defer([this, id, why] { (void)jobs_->Note(id, why); });
}

void Dispatcher::TryResumeLocked(int64_t id, ActiveJob& job) {
  const int64_t from = job.checkpoints.committed();
  // The devices it ran on (after a coordinator restart: its checkpoint's world, not the plan
  // found for `ranks`).
  const int before = job.devices_before > 0 ? job.devices_before : job.plan->world();
  if (job.spec.has_elastic() && !ChooseElasticPlanLocked(id, job)) return;
  if (auto st = PlaceLocked(id, job, from); !st.ok()) {  // (parts unchanged: they have all ended)
    TellWaitLocked(id, job, "devices", absl::StrCat(st.message(), " (to resume from step ", from, ")"));
    return;
  }
  job.told_wait.clear();
  job.held_by.clear();
  job.progress.last_step = from;
  const RunnablePlan& plan = *job.plan;
  std::string message = absl::StrCat("resumed from the checkpoint of step ", from, " on ", Where(job));
  if (job.spec.has_elastic()) {
    message = absl::StrCat("resumed on ", plan.world(), " of ", BoundsOf(job.spec).max_devices, " devices from the checkpoint of step ", from,
                           before != plan.world() ? absl::StrCat(" (", before, " before)") : "", ": plan ", plan.summary, "; on ", Where(job));
  }
  // Cancelled meanwhile: the transition fails, and Watch stops the job as any cancelled one.
  Defer([this, id, attempt = job.attempt, restarts = job.restarts, devices = plan.world(), summary = plan.summary,
         peak = plan.predicted_peak_bytes, message] {
    StopIfUnrecorded(id, jobs_->Transition(id, v1::RUNNING, message, [&](v1::Job& j) {
      j.set_attempt(attempt);
      j.set_restarts(restarts);
      j.set_devices(devices);
      j.set_plan_summary(summary);
      j.set_predicted_peak_bytes(peak);
    }).status());
  });
}

bool Dispatcher::ChooseElasticPlanLocked(int64_t id, ActiveJob& job) {
  const DeviceBounds bounds = BoundsOf(job.spec);
  const int free = FreeForLocked(job.spec);
  const double now = workers_->NowUnixSeconds();
  const bool in_grace = now < job.resize_after && job.devices_before > bounds.min_devices;
  const int lo = in_grace ? job.devices_before : bounds.min_devices;
  const int hi = std::min(bounds.max_devices, free);
  if (hi < lo) {
    if (in_grace) {
      TellWaitLocked(id, job, "grace",
                     absl::StrCat(WaitingMessage(job.spec, job.devices_before, free), " (to resume from step ", job.checkpoints.committed(),
                                  "); going on with fewer, at least ", bounds.min_devices, ", if none come within ",
                                  absl::StrFormat("%.0f", job.resize_after - now), " s"));
    } else {
      TellWaitLocked(id, job, "devices",
                     absl::StrCat(WaitingMessage(job.spec, bounds.min_devices, free), " (the elastic job's min_devices, to resume from step ",
                                  job.checkpoints.committed(), ")"));
    }
    return false;
  }
  const ElasticPlans::Choice choice = job.plans.Choose(lo, hi);
  if (choice.plan_from > 0) {
    job.plan_from = choice.plan_from, job.plan_to = choice.plan_to;  // StartPending plans them
    TellWaitLocked(id, job, "planning",
                   absl::StrCat("planning the job for ", choice.plan_from,
                                choice.plan_to < choice.plan_from ? absl::StrCat(" (or down to ", choice.plan_to, ")") : "", " device(s), ",
                                free, " free now, to resume from step ", job.checkpoints.committed()));
    return false;
  }
  if (choice.plan == nullptr) {
    TellWaitLocked(id, job, "plan", absl::StrCat("waiting: ", choice.why, "; ", free, " free devices now (to resume from step ",
                                                 job.checkpoints.committed(), ")"));
    return false;
  }
  job.plan = choice.plan;
  return true;
}

void Dispatcher::MaybeGrowLocked(int64_t id, ActiveJob& job, int64_t step) {
  if (!job.spec.has_elastic() || job.phase != Phase::kRunning) return;
  const int world = job.plan->world();
  const int free = FreeForLocked(job.spec);
  const int hi = GrowthCeilingLocked(job, free);
  // Devices a queued job waits for are not grown into.
  if (hi <= world || jobs_->HasPending()) return;
  const ElasticPlans::Choice choice = job.plans.Choose(world + 1, hi);
  if (choice.plan == nullptr) return;  // (WantGrowthPlansLocked asks for the plans)
  MoveLocked(id, job, Phase::kRestarting);
  ++job.attempt;  // a new attempt, but no restart
  job.devices_before = 0;
  job.resize_after = 0;
  job.told_wait.clear();
  Defer([this, id, message = absl::StrCat("growing from ", world, " to ", choice.plan->world(), " devices at the checkpoint of step ", step,
                                          ": ", free, " more free")] { (void)jobs_->Transition(id, v1::RESTARTING, message); });
}

int Dispatcher::FreeForLocked(const v1::JobSpec& spec) const {
  return Count(FreeDevicesLocked(JobDeviceKind(spec), spec.memory_per_device()));
}

int Dispatcher::GrowthCeilingLocked(const ActiveJob& job, int free) const {
  return std::min(BoundsOf(job.spec).max_devices, job.plan->world() + free);
}

void Dispatcher::WantGrowthPlansLocked() {
  std::optional<bool> queued;  // a job is PENDING (asked once, and only when some job could grow)
  for (auto& [id, job] : active_) {
    if (!job.spec.has_elastic() || job.phase != Phase::kRunning) continue;
    const int world = job.plan->world();
    const int hi = GrowthCeilingLocked(job, FreeForLocked(job.spec));
    if (hi <= world) continue;
    if (!queued.has_value()) queued = jobs_->HasPending();
    if (*queued) return;
    const ElasticPlans::Choice choice = job.plans.Choose(world + 1, hi);
    if (choice.plan_from > 0) job.plan_from = choice.plan_from, job.plan_to = choice.plan_to;
  }
}

void Dispatcher::PlanElasticCounts() {
  struct Wanted {
    int64_t id;
    v1::JobSpec spec;
    int from, to;
  };
  std::vector<Wanted> wanted;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, job] : active_) {
      if (job.plan_from == 0) continue;
      wanted.push_back({id, job.spec, job.plan_from, job.plan_to});
      job.plan_from = job.plan_to = 0;
    }
  }
  for (const Wanted& w : wanted) {
    // Largest first, down to the first count a plan fits: the dispatcher takes the largest (the
    // counts below, if none of these fits, in a later round: Choose asks for them).
    for (int n = w.from; n >= w.to && n > w.from - kElasticPlansPerRound; --n) {
      auto plan = PlanForDevices(plan_, w.spec, n);
      absl::MutexLock lock(&mu_);
      auto it = active_.find(w.id);
      if (it == active_.end()) break;
      if (plan.ok()) {
        it->second.plans.Found(std::make_shared<const RunnablePlan>(*std::move(plan)));
        break;
      }
      it->second.plans.Refused(n, std::string(plan.status().message()));
    }
  }
}

void Dispatcher::LoseLocked(int64_t id, ActiveJob& job, const std::string& why) {
  const int64_t committed = job.checkpoints.committed();
  const bool can_restart = !options_.checkpoint_dir.empty() && committed > 0 && job.restarts < options_.max_restarts;
  if (!can_restart) {
    FailLocked(id, job,
               absl::StrCat(why, options_.checkpoint_dir.empty() ? ""
                                 : committed == 0 ? " (no checkpoint committed yet to restart from)"
                                                           : absl::StrCat(" (restarted ", job.restarts, " time(s) already)")));
    return;
  }
  MoveLocked(id, job, Phase::kRestarting);
  ++job.restarts;
  ++job.attempt;  // the next attempt's number
  job.told_wait.clear();
  // An elastic job waits the grace for as many devices as it had, then goes on with fewer.
  job.devices_before = job.plan->world();
  job.resize_after = workers_->NowUnixSeconds() + options_.elastic_grace_seconds;
  Defer([this, id, message = absl::StrCat(why, "; restarting from the checkpoint of step ", committed, " (restart ", job.restarts,
                                          " of at most ", options_.max_restarts, ")")] {
    (void)jobs_->Transition(id, v1::RESTARTING, message);
  });
}

void Dispatcher::StopIfUnrecorded(int64_t id, const absl::Status& moved) {
  // OK, or FAILED_PRECONDITION: cancelled meanwhile, and Watch stops the job as any cancelled one.
  if (moved.ok() || moved.code() == absl::StatusCode::kFailedPrecondition) return;
  // The store refused the write (a full disk, an I/O error): ranks must not run on a start no
  // restart would know of. Stop them and fail the job; if that cannot be written either, the job
  // stays PLANNING in the store, and a restarted coordinator queues it again.
  std::cerr << "mapd: job " << id << ": its start could not be recorded: " << moved << "; stopping its ranks\n";
  absl::MutexLock lock(&mu_);
  auto it = active_.find(id);
  if (it == active_.end() || it->second.stopping()) return;
  FailLocked(id, it->second,
             absl::StrCat("the coordinator could not record the job's start (", moved.message(), "); its ranks were stopped"));
}

void Dispatcher::FailLocked(int64_t id, ActiveJob& job, const std::string& why) {
  MoveLocked(id, job, Phase::kStopping);
  Defer([this, id, why] { MarkFailed(jobs_, id, why); });
}

void Dispatcher::SettleFailureLocked(int64_t id, ActiveJob& job) {
  const std::string failure = std::exchange(job.failure, "");
  if (!job.lost.empty()) {
    LoseLocked(id, job, std::exchange(job.lost, ""));
  } else {
    FailLocked(id, job, failure);
  }
}

void Dispatcher::ReapLocked() {
  for (auto it = active_.begin(); it != active_.end();) {
    if (!it->second.parts_ended()) {
      ++it;
      continue;
    }
    if (!it->second.failure.empty()) SettleFailureLocked(it->first, it->second);
    if (it->second.restarting()) {
      ++it;
    } else {
      it = active_.erase(it);
    }
  }
}

void Dispatcher::Tick() {
  Watch();
  StartPending();
}

void Dispatcher::StartPending() {
  if (!orphans_checked_) return;  // the previous coordinator's jobs first: they hold checkpoints
  PlanElasticCounts();
  for (const v1::Job& job : jobs_->Pending()) {
    TryStart(job);
    RunEffects();
  }
}

void Dispatcher::Watch() {
  if (!orphans_checked_) RecoverOrphans();
  {
    absl::MutexLock lock(&mu_);
    std::map<std::string, v1::WorkerState> state;
    for (const v1::Worker& w : workers_->List()) state[w.id()] = w.state();
    for (auto& [id, job] : active_) {
      auto j = jobs_->Get(id);
      const bool finished = j.ok() && IsFinished(j->state());  // cancelled by the user
      if (finished) {
        MoveLocked(id, job, Phase::kStopping);
        job.failure.clear();
        job.lost.clear();
      }
      for (Part& part : job.parts) {
        if (part.finished || state[part.worker_id] == v1::ALIVE) continue;
        part.finished = true;  // nothing to wait for from a lost worker
        const std::string why = absl::StrCat("worker ", part.worker_id, " was lost (its lease ran out) while running rank ",
                                             RankRange(part.assignment), "; the other ranks were stopped");
        if (!job.stopping()) {
          LoseLocked(id, job, why);
        } else if (!job.failure.empty() && job.lost.empty()) {
          job.lost = why;  // the reported failure was (likely) this loss's doing: settled in ReapLocked
        }
      }
    }
    ReapLocked();
    // Jobs whose ranks have all stopped after a lost worker: placed again when devices allow.
    for (auto& [id, job] : active_) {
      const bool may_resume = job.phase == Phase::kRestarting || (job.phase == Phase::kRecovering && RecoveredMayResumeLocked(job));
      if (may_resume && job.parts_ended()) TryResumeLocked(id, job);
    }
    WantGrowthPlansLocked();
    for (std::set<int64_t>* pending : {&told_waiting_, &small_start_refused_}) {
      for (auto it = pending->begin(); it != pending->end();) {
        auto j = jobs_->Get(*it);
        it = (!j.ok() || j->state() != v1::PENDING) ? pending->erase(it) : std::next(it);
      }
    }
  }
  RunEffects();
}

void Dispatcher::OnHeartbeat(const std::string& worker_id, const std::vector<int64_t>& running, v1::HeartbeatResponse* out) {
  {
    absl::MutexLock lock(&mu_);
    HeartbeatLocked(worker_id, running, out);
  }
  RunEffects();
}

void Dispatcher::HeartbeatLocked(const std::string& worker_id, const std::vector<int64_t>& running, v1::HeartbeatResponse* out) {
  const std::set<int64_t> runs(running.begin(), running.end());
  for (auto& [id, job] : active_) {
    // A job recovered after a coordinator restart waits for the ranks of its earlier attempt
    // (told to stop below: no part of it runs there yet).
    if (job.phase == Phase::kRecovering) {
      if (runs.count(id)) {
        job.held_by.insert(worker_id);
      } else {
        job.held_by.erase(worker_id);
      }
    }
    for (Part& part : job.parts) {
      if (part.worker_id != worker_id || part.finished) continue;
      if (job.stopping()) {
        out->add_cancel_job_ids(id);
        if (!runs.count(id)) part.finished = true;  // never started there, or already ended
      } else if (!runs.count(id) && (HasRankZero(part.assignment) || !part.assignment.store_address().empty())) {
        // The part with rank 0 first; the others once rank 0 hosts the rendezvous store.
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

namespace {

// The ranks' output a report carries: only this worker's ranks, within the per-report bound.
absl::Status CheckRankOutputs(const v1::ReportRequest& report, const v1::RankAssignment& assignment) {
  // A worker keeps at least kMinRankOutputBufferBytes a rank, so a report may carry that much
  // for each of its ranks even past the per-report bound.
  const int64_t bound = std::max<int64_t>(kMaxRankOutputBytesPerReport, kMinRankOutputBufferBytes * assignment.ranks_size());
  int64_t bytes = 0;
  for (const v1::RankOutput& o : report.outputs()) {
    if (std::find(assignment.ranks().begin(), assignment.ranks().end(), o.rank()) == assignment.ranks().end()) {
      return absl::InvalidArgumentError(absl::StrCat("output of rank ", o.rank(), ", which does not run on worker ", report.worker_id()));
    }
    if (o.dropped_bytes() < 0) return absl::InvalidArgumentError(absl::StrCat("output of rank ", o.rank(), ": dropped_bytes < 0"));
    bytes += static_cast<int64_t>(o.text().size());
  }
  if (bytes > bound) {
    return absl::InvalidArgumentError(absl::StrCat("a report of ", bytes, " bytes of ranks' output; workers send at most ", bound));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::ReportResponse> Dispatcher::OnReport(const v1::ReportRequest& report) {
  absl::StatusOr<v1::ReportResponse> out;
  {
    absl::MutexLock lock(&mu_);
    out = ReportLocked(report);
  }
  RunEffects();
  return out;
}

absl::StatusOr<v1::ReportResponse> Dispatcher::ReportLocked(const v1::ReportRequest& report) {
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
  if (report.attempt() != job.attempt) {
    // From the attempt before a restart: its ranks are to stop (and their end lets the job be
    // placed again).
    if (job.restarting() && report.finished()) part->finished = true;
    v1::ReportResponse out;
    out.set_cancel(true);
    ReapLocked();
    return out;
  }
  // Nothing of a report that no rank of this job could send is taken.
  if (report.steps_size() > kMaxStepsPerReport) {
    return absl::InvalidArgumentError(absl::StrCat("a report of ", report.steps_size(), " steps; workers send at most ",
                                                   kMaxStepsPerReport, " at once"));
  }
  if (report.evaluations_size() > kMaxEvaluationsPerReport ||
      (report.evaluations_size() > 0 && (job.spec.training().eval_every() <= 0 || !HasRankZero(part->assignment)))) {
    return absl::InvalidArgumentError(absl::StrCat("a report of ", report.evaluations_size(), " evaluations of job ", id,
                                                   ", whose rank 0 evaluates every ", job.spec.training().eval_every(), " steps"));
  }
  if (auto st = CheckRankOutputs(report, part->assignment); !st.ok()) return st;
  if (report.checkpoint_step() > job.spec.training().steps()) {
    // No rank of this job writes such a step: a forged or broken report, not counted.
    return absl::InvalidArgumentError(absl::StrCat("checkpoint step ", report.checkpoint_step(), " of job ", id,
                                                   ", which trains ", job.spec.training().steps(), " steps"));
  }
  if (!report.store_address().empty() && HasRankZero(part->assignment)) {
    if (auto st = CheckStoreAddress(report.store_address()); !st.ok()) return st;
    for (Part& p : job.parts) {
      if (!HasRankZero(p.assignment)) p.assignment.set_store_address(report.store_address());
    }
  }
  const v1::RankAssignment& a = part->assignment;
  const bool was_stopping = job.stopping();
  for (const v1::RankStep& s : report.steps()) {
    if (!job.progress.Add(s, job.spec.training().steps()) || job.stopping()) continue;
    JobProgress p;
    p.step = s.step();
    p.loss = s.loss();
    p.items_per_second = s.seconds() > 0 ? static_cast<double>(a.items_per_step()) / s.seconds() : 0;
    p.peak_bytes = job.progress.worst_peak_bytes;
    p.lr = s.lr();
    Defer([this, id, p] { (void)jobs_->ReportProgress(id, p); });
  }
  // Output counts even from a job that is stopping: a failing rank's last words are in it.
  for (const v1::RankOutput& o : report.outputs()) {
    Defer([this, id, o] { jobs_->AppendRankOutput(id, o.rank(), o.text(), o.dropped_bytes()); });
  }
  for (const v1::Evaluation& e : report.evaluations()) {
    if (e.step() < 1 || e.step() > job.spec.training().steps() || job.stopping()) continue;
    Defer([this, id, e] { (void)jobs_->ReportEvaluation(id, e); });
  }
  const int part_index = static_cast<int>(part - job.parts.data());
  if (report.checkpoint_step() > 0 && !job.stopping() &&
      job.checkpoints.Written(report.checkpoint_step(), part_index, static_cast<int>(job.parts.size()))) {
    const int64_t step = report.checkpoint_step();
    if (options_.checkpoint_dir.empty()) {
      Defer([this, id, step] { (void)jobs_->Note(id, absl::StrCat("checkpoint: step ", step, " committed on every worker")); });
    } else {
      // Every rank's shard is on the shared storage: commit the step (checkpoint_commit.h),
      // outside the lock; the job resumes from it once it is recorded.
      Defer([this, id, attempt = job.attempt, dir = JobCheckpointDir(id),
             meta = CheckpointMetaFor(step, job.plan->world(), job.plan->mesh, job.plan->checkpoint_plan)] {
        const absl::Status st = CommitCheckpointStep(dir, meta, options_.keep_checkpoints);
        if (st.ok()) {
          absl::MutexLock lock(&mu_);
          auto it = active_.find(id);
          if (it != active_.end() && it->second.attempt == attempt) {
            it->second.checkpoints.Committed(meta.step());
            it->second.committed_under = meta;
            MaybeGrowLocked(id, it->second, meta.step());  // (its event comes after this batch's)
          }
        }
        (void)jobs_->Note(id, st.ok() ? absl::StrCat("checkpoint: step ", meta.step(), " committed to ", CheckpointStepDir(dir, meta.step()))
                                      : absl::StrCat("checkpoint: step ", meta.step(), " not committed: ", st.message()));
      });
    }
  }
  v1::ReportResponse out;
  if (report.finished() && !part->finished) {
    part->finished = true;
    if (report.code() != 0 && !job.stopping()) {
      // Stop the other parts; FAILED or RESTARTING once they have ended (SettleFailureLocked).
      MoveLocked(id, job, Phase::kStopping);
      job.failure = absl::StrCat("worker ", report.worker_id(), ": ", report.error());
      if (!job.parts_ended()) Defer([this, id, why = absl::StrCat(job.failure, "; stopping the other ranks")] { (void)jobs_->Note(id, why); });
    } else if (!job.stopping() && job.parts_ended()) {
      MoveLocked(id, job, Phase::kStopping);
      const JobProgressStats& p = job.progress;
      Defer([this, id, message = absl::StrFormat("trained %d steps on %d rank(s): loss %.4f -> %.4f; worst rank's peak %s", p.last_step,
                                                 job.plan->world(), p.first_loss, p.last_loss, FormatBytes(p.worst_peak_bytes))] {
        (void)jobs_->Transition(id, v1::SUCCEEDED, message);
      });
    }
  }
  // A finished report is told whether the job was stopping before it came (its ranks were then
  // stopped, or failed because their peers were); a running one whether to stop now.
  out.set_cancel(report.finished() ? was_stopping : job.stopping());
  ReapLocked();
  return out;
}

}  // namespace mapd

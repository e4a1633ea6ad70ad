// The dispatcher's placement: the devices free per worker, and a job placed on them — a PENDING
// job started (TryStart: on admission's plan, or planned here for the devices it gets) and any
// job's ranks given to workers (PlaceLocked: the workers with the most free devices first,
// consecutive ranks together, so the innermost mesh axis stays inside a worker).
#include "server/dispatch/dispatcher.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/bytes.h"
#include "common/store_secret.h"
#include "server/dispatch/dispatcher_internal.h"

namespace mapd {

using dispatcher_internal::MarkFailed;
using dispatcher_internal::RankRange;
using dispatcher_internal::WrittenUnderAnotherPlan;

namespace {

// "cuda" for "cuda:1".
std::string DeviceKind(const std::string& device) { return device.substr(0, device.find(':')); }

// The kind of device the job runs on (jobs stored before the field existed: cpu).
std::string JobDeviceKind(const v1::JobSpec& spec) { return spec.device().empty() ? "cpu" : spec.device(); }

int Count(const std::map<std::string, std::vector<std::string>>& free) {
  int n = 0;
  for (const auto& [w, d] : free) n += static_cast<int>(d.size());
  return n;
}

}  // namespace

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

int Dispatcher::FreeForLocked(const v1::JobSpec& spec) const {
  return Count(FreeDevicesLocked(JobDeviceKind(spec), spec.memory_per_device()));
}

std::string Dispatcher::WaitingMessage(const v1::JobSpec& spec, int devices, int free) {
  const int64_t budget = spec.memory_per_device();
  return absl::StrCat("waiting for ", devices, " free ", JobDeviceKind(spec), " device(s)",
                      budget > 0 ? absl::StrCat(" with ", FormatBytes(budget), " each") : "", "; ", free, " free on ALIVE workers now");
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
  // Costed on another profile than the workers' now (they registered, or changed, since): planned again.
  const bool other_profile = admitted != nullptr && admitted->device_type != CostedSpec(spec).device_type();
  if (other_profile) admitted = nullptr;
  const std::string planning =
      admitted != nullptr ? absl::StrCat("placing on the plan admission made for ", devices, " rank(s)")
                          : absl::StrCat("planning for ", devices, " rank(s)", elastic_start,
                                         fewer          ? ""
                                         : other_profile ? " (admission's plan was costed on another device profile than the workers' now)"
                                         : admitted_ != nullptr ? " (admission's plan is no longer kept)"
                                                                : "");
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
  return StartOnPlanLocked(spec, id, *std::move(plan), devices, elastic_start);
}

bool Dispatcher::StartOnPlanLocked(const v1::JobSpec& spec, int64_t id, std::shared_ptr<const RunnablePlan> plan, int devices,
                                   const std::string& elastic_start) {
  const bool fewer = devices < spec.ranks();
  told_waiting_.erase(id);
  small_start_refused_.erase(id);
  ActiveJob active;
  active.spec = spec;
  active.plan = std::move(plan);
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
  const double predicted_step = active.plan->predicted_step_seconds;
  Defer([this, id, message, summary, peak, devices, predicted_step] {
    StopIfUnrecorded(id, jobs_->Transition(id, v1::RUNNING, message, [&](v1::Job& j) {
      j.set_plan_summary(summary);
      j.set_predicted_step_seconds(predicted_step);
      j.set_predicted_peak_bytes(peak);
      j.set_devices(devices);
    }).status());
  });
  active_[id] = std::move(active);
  return true;
}

absl::Status Dispatcher::PlaceLocked(int64_t id, ActiveJob& job, int64_t resume_step) {
  const v1::JobSpec& spec = job.spec;
  const RunnablePlan& plan = *job.plan;
  const int ranks = plan.world();
  const auto free = FreeDevicesLocked(JobDeviceKind(spec), spec.memory_per_device());
  if (Count(free) < ranks) return absl::FailedPreconditionError(WaitingMessage(spec, ranks, Count(free)));
  std::vector<std::pair<std::string, std::vector<std::string>>> order(free.begin(), free.end());
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
  // The attempt's rendezvous secret: ranks of an earlier attempt (a paused worker's) cannot join
  // this one's store.
  auto secret = NewStoreSecret();
  if (!secret.ok()) return secret.status();
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
    a.set_store_secret(*secret);
    job.parts.push_back(std::move(part));
  }
  // Without shared storage, peers keep each other's shards (dispatcher_shards.cc).
  return options_.checkpoint_dir.empty() ? AssignShardPeersLocked(job, resume_step) : absl::OkStatus();
}

std::string Dispatcher::Where(const ActiveJob& job) {
  std::vector<std::string> where;
  for (const Part& p : job.parts) where.push_back(absl::StrCat(p.worker_id, " (rank ", RankRange(p.assignment), ")"));
  return absl::StrJoin(where, ", ");
}

}  // namespace mapd

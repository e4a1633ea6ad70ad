// The dispatcher without processes: a stand-in planner, workers as registry
// entries driven by hand (heartbeats, reports, a lease running out) on a fake clock.
#include "server/dispatch/dispatcher.h"

#include <gtest/gtest.h>

#include <map>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <thread>

#include "absl/synchronization/notification.h"
#include "common/checkpoint/checkpoint_commit.h"
#include "server/jobs/job_spec.h"
#include "server/store/job_store.h"

namespace mapd {
namespace {

absl::StatusOr<RunnablePlan> FakePlan(const v1::JobSpec& spec) {
  if (spec.training().steps() == 13) return absl::FailedPreconditionError("no plan fits 1 KiB per device");
  RunnablePlan p;
  p.mesh = {spec.ranks()};
  for (int r = 0; r < spec.ranks(); ++r) {
    v1::RankProgram program;
    program.set_rank(r);
    p.lowered.programs.push_back(program);
    RankPrediction pred;
    pred.peak_bytes = 1000 + r;
    p.lowered.predicted.push_back(pred);
  }
  p.summary = "mesh " + std::to_string(spec.ranks());
  p.device_type = spec.device_type().empty() ? "cpu" : spec.device_type();  // as PlanJob costs a spec without one
  p.checkpoint_plan = p.summary;
  p.predicted_peak_bytes = 1003;
  p.items = {256, "tokens"};
  return p;
}

v1::JobSpec Spec(int ranks, int64_t steps = 10) {
  v1::JobSpec s;
  s.set_model("gpt2:layers=1,hidden=32");
  s.mutable_training()->set_steps(steps);
  s.set_ranks(ranks);
  return s;
}

class DispatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = NewMemoryJobStore();
    jobs_ = *JobManager::Create(store_.get(), &clock_);
    workers_ = std::make_unique<WorkerRegistry>(LeaseOptions{}, &clock_);
    dispatcher_ = std::make_unique<Dispatcher>(jobs_.get(), workers_.get(), DispatchOptions{}, FakePlan);
  }
  std::string AddWorker(int devices, const std::string& kind = "cpu", const std::string& shard_address = "") {
    v1::RegisterWorkerRequest r;
    r.set_hostname("host");
    r.set_shard_address(shard_address);
    for (int i = 0; i < devices; ++i) {
      auto* d = r.add_devices();
      d->set_name(kind + ":" + std::to_string(i));
      d->set_memory_bytes(1 << 30);
    }
    auto registered = workers_->Register(r);
    sessions_[registered->worker_id()] = registered->session();
    return registered->worker_id();
  }
  v1::HeartbeatResponse Beat(const std::string& worker, std::vector<int64_t> running = {}) {
    auto out = workers_->Heartbeat(worker, sessions_[worker]);
    EXPECT_TRUE(out.ok());
    dispatcher_->OnHeartbeat(worker, running, &*out);
    return *out;
  }
  absl::StatusOr<v1::ReportResponse> Finish(const std::string& worker, int64_t job, int code = 0, const std::string& error = "",
                                            int attempt = 0) {
    v1::ReportRequest r;
    r.set_worker_id(worker);
    r.set_job_id(job);
    r.set_attempt(attempt);
    r.set_finished(true);
    r.set_code(code);
    r.set_error(error);
    if (code == 0) {
      // As a worker whose ranks trained to the end: each reported the last step first (the
      // dispatcher takes those of this worker's ranks; the loss is the job's last, unchanged).
      const v1::Job j = *jobs_->Get(job);
      for (int rank = 0; rank < j.spec().ranks(); ++rank) {
        v1::RankStep* last = r.add_steps();
        last->set_rank(rank);
        last->set_step(j.spec().training().steps());
        last->set_loss(j.loss());
      }
    }
    return dispatcher_->OnReport(r);
  }
  // `worker`'s rank 0 of `job` hosts the rendezvous store at `address`.
  absl::Status ReportStore(const std::string& worker, int64_t job, const std::string& address, int attempt = 0) {
    v1::ReportRequest r;
    r.set_worker_id(worker);
    r.set_job_id(job);
    r.set_attempt(attempt);
    r.set_store_address(address);
    return dispatcher_->OnReport(r).status();
  }
  // A dispatcher with shared checkpoint storage in a fresh directory (removed at the end).
  std::string UseCheckpointDir(const std::string& name, int max_restarts = 3, double elastic_grace_seconds = 10,
                               PlanJobFn plan = FakePlan) {
    checkpoint_dir_ = ::testing::TempDir() + "/" + name + "_" + std::to_string(getpid());
    std::filesystem::remove_all(checkpoint_dir_);
    DispatchOptions o;
    o.checkpoint_dir = checkpoint_dir_;
    o.max_restarts = max_restarts;
    o.elastic_grace_seconds = elastic_grace_seconds;
    dispatcher_ = std::make_unique<Dispatcher>(jobs_.get(), workers_.get(), o, std::move(plan));
    return checkpoint_dir_;
  }
  void TearDown() override {
    if (!checkpoint_dir_.empty()) std::filesystem::remove_all(checkpoint_dir_);
  }
  // Starts job 1: 2 ranks, a checkpoint every 5 steps, RUNNING.
  void StartCheckpointedJob() {
    v1::JobSpec spec = Spec(2);
    spec.mutable_training()->set_checkpoint_every(5);
    ASSERT_TRUE(jobs_->Submit(spec).ok());
    dispatcher_->Tick();
    ASSERT_EQ(State(1), v1::RUNNING);
  }
  // Each of `workers` reports its shards of `step` of `job` written.
  void ReportCheckpoint(const std::vector<std::string>& workers, int64_t job, int64_t step, int attempt = 0) {
    for (const std::string& w : workers) {
      v1::ReportRequest r;
      r.set_worker_id(w);
      r.set_job_id(job);
      r.set_attempt(attempt);
      r.set_checkpoint_step(step);
      ASSERT_TRUE(dispatcher_->OnReport(r).ok());
    }
  }
  // Time passes with only `alive` heartbeating (running `job`) until the other workers' leases
  // run out; then a round.
  void LoseAllBut(const std::string& alive, int64_t job) {
    clock_.Advance(4);
    Beat(alive, {job});
    clock_.Advance(2);
    workers_->ExpireLeases();
    dispatcher_->Tick();
  }
  v1::JobState State(int64_t id) { return jobs_->Get(id)->state(); }
  std::vector<std::string> Messages(int64_t id) {
    std::vector<std::string> out;
    const auto events = jobs_->Events(id);
    for (const auto& e : *events) out.push_back(e.message());
    return out;
  }

  FakeClock clock_;
  std::unique_ptr<JobStore> store_;
  std::unique_ptr<JobManager> jobs_;
  std::unique_ptr<WorkerRegistry> workers_;
  std::unique_ptr<Dispatcher> dispatcher_;
  std::string checkpoint_dir_;  // UseCheckpointDir's
  std::map<std::string, std::string> sessions_;  // worker id → its registration's session
};

TEST_F(DispatcherTest, PlacesConsecutiveRanksOnTheWorkersWithMostFreeDevicesFirst) {
  const std::string small = AddWorker(1), big = AddWorker(2);
  ASSERT_TRUE(jobs_->Submit(Spec(3)).ok());
  dispatcher_->Tick();
  EXPECT_EQ(State(1), v1::RUNNING);
  const v1::HeartbeatResponse to_big = Beat(big);
  ASSERT_EQ(to_big.assignments_size(), 1);
  const v1::RankAssignment& a = to_big.assignments(0);
  EXPECT_EQ(std::vector<int>(a.ranks().begin(), a.ranks().end()), (std::vector<int>{0, 1}));
  EXPECT_EQ(std::vector<std::string>(a.devices().begin(), a.devices().end()), (std::vector<std::string>{"cpu:0", "cpu:1"}));
  ASSERT_EQ(a.programs_size(), 2);
  EXPECT_EQ(a.programs(1).rank(), 1);
  EXPECT_EQ(a.store_address(), "");  // rank 0 is there: it hosts the rendezvous store
  EXPECT_EQ(a.predicted_peak_bytes(1), 1001);
  EXPECT_EQ(a.items_per_step(), 256);
  // The other worker's part waits for the store's address, which only rank 0's worker gives.
  EXPECT_EQ(Beat(small).assignments_size(), 0);
  EXPECT_EQ(ReportStore(small, 1, "10.9.9.9:1").code(), absl::StatusCode::kOk);  // not rank 0's: ignored
  EXPECT_EQ(Beat(small).assignments_size(), 0);
  EXPECT_EQ(ReportStore(big, 1, "10.0.0.1:99999").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReportStore(big, 1, "10.0.0.1 :1001").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReportStore(big, 1, std::string(300, 'h') + ":1001").code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(ReportStore(big, 1, "10.0.0.1:1001").ok());
  const v1::HeartbeatResponse to_small = Beat(small);
  ASSERT_EQ(to_small.assignments_size(), 1);
  EXPECT_EQ(to_small.assignments(0).ranks(0), 2);
  EXPECT_EQ(to_small.assignments(0).store_address(), "10.0.0.1:1001");
  // Sent again until the worker says it runs the job; not after.
  EXPECT_EQ(Beat(big).assignments_size(), 1);
  EXPECT_EQ(Beat(big, {1}).assignments_size(), 0);
  EXPECT_EQ(dispatcher_->BusyDevices(), (std::map<std::string, int>{{small, 1}, {big, 2}}));
  EXPECT_NE(Messages(1).back().find("running on " + big + " (rank 0-1), " + small + " (rank 2)"), std::string::npos) << Messages(1).back();
}

// A job is searched once: the dispatcher starts it on the plan admission kept for it, and plans
// again only when that plan is gone (saying so) or is for other devices.
TEST_F(DispatcherTest, AJobStartsOnThePlanAdmissionKeptForIt) {
  AdmittedPlans admitted(int64_t{1} << 20);
  int searches = 0;
  PlanJobFn counted = [&searches](const v1::JobSpec& spec) {
    ++searches;
    return FakePlan(spec);
  };
  dispatcher_ = std::make_unique<Dispatcher>(jobs_.get(), workers_.get(), DispatchOptions{}, counted, &admitted);
  const std::string w = AddWorker(4);
  // Job 1: admission's plan (marked so it can be told from one made here) is kept and used.
  auto kept = FakePlan(Spec(2));
  ASSERT_TRUE(kept.ok());
  kept->summary = "mesh 2 (admitted)";
  ASSERT_TRUE(jobs_->Submit(Spec(2)).ok());
  admitted.Put(1, std::make_shared<const RunnablePlan>(*kept));
  EXPECT_EQ(admitted.count(), 1);
  dispatcher_->Tick();
  ASSERT_EQ(State(1), v1::RUNNING);
  EXPECT_EQ(searches, 0);
  EXPECT_EQ(admitted.count(), 0);
  EXPECT_EQ(admitted.bytes(), 0);
  auto job = jobs_->Get(1);
  EXPECT_EQ(job->plan_summary(), "mesh 2 (admitted)");
  const auto one = Messages(1);
  EXPECT_TRUE(std::any_of(one.begin(), one.end(), [](const std::string& m) { return m.find("placing on the plan admission made for 2 rank(s)") != std::string::npos; }));
  // Job 2: no plan kept for it (as after a restart): planned here, and the event says why.
  ASSERT_TRUE(jobs_->Submit(Spec(2)).ok());
  dispatcher_->Tick();
  ASSERT_EQ(State(2), v1::RUNNING);
  EXPECT_EQ(searches, 1);
  const auto two = Messages(2);
  EXPECT_TRUE(std::any_of(two.begin(), two.end(), [](const std::string& m) { return m.find("(admission's plan is no longer kept)") != std::string::npos; }));
  dispatcher_.reset();  // before `admitted`
}

TEST(AdmittedPlansTest, KeepsPlansWithinItsBudgetOldestDroppedFirst) {
  auto plan = FakePlan(Spec(4));
  ASSERT_TRUE(plan.ok());
  auto shared = std::make_shared<const RunnablePlan>(*plan);
  const int64_t each = AdmittedPlans::BytesOf(*shared);
  ASSERT_GT(each, 0);
  AdmittedPlans plans(2 * each);
  plans.Put(1, shared);
  plans.Put(2, shared);
  EXPECT_EQ(plans.bytes(), 2 * each);
  plans.Put(3, shared);  // over the budget: job 1's goes
  EXPECT_EQ(plans.count(), 2);
  EXPECT_EQ(plans.Take(1), nullptr);
  EXPECT_EQ(plans.Take(2), shared);
  EXPECT_EQ(plans.Take(2), nullptr);  // taken once
  AdmittedPlans none(0);              // keeps none
  none.Put(1, shared);
  EXPECT_EQ(none.Take(1), nullptr);
}

TEST_F(DispatcherTest, AJobWaitsForDevicesWithOneEventWhileASmallerOneStarts) {
  AddWorker(2);
  ASSERT_TRUE(jobs_->Submit(Spec(4)).ok());
  ASSERT_TRUE(jobs_->Submit(Spec(2)).ok());
  dispatcher_->Tick();
  dispatcher_->Tick();
  EXPECT_EQ(State(1), v1::PENDING);
  EXPECT_EQ(State(2), v1::RUNNING);
  const auto messages = Messages(1);
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_NE(messages[1].find("waiting for 4 free cpu device(s); 2 free"), std::string::npos) << messages[1];
}

TEST_F(DispatcherTest, AJobRunsOnlyOnDevicesOfItsKind) {
  AddWorker(4);
  const std::string gpus = AddWorker(1, "cuda");
  v1::JobSpec on_gpus = Spec(2);
  on_gpus.set_device("cuda");
  ASSERT_TRUE(jobs_->Submit(on_gpus).ok());
  on_gpus.set_ranks(1);
  ASSERT_TRUE(jobs_->Submit(on_gpus).ok());
  dispatcher_->Tick();
  EXPECT_EQ(State(1), v1::PENDING);  // 2 GPUs wanted, 1 there: the 4 CPUs do not count
  EXPECT_NE(Messages(1).back().find("waiting for 2 free cuda device(s); 1 free"), std::string::npos) << Messages(1).back();
  ASSERT_EQ(State(2), v1::RUNNING);
  const v1::HeartbeatResponse hb = Beat(gpus);
  ASSERT_EQ(hb.assignments_size(), 1);
  EXPECT_EQ(hb.assignments(0).devices(0), "cuda:0");
}

TEST_F(DispatcherTest, ProgressComesFromRankZeroAndTheJobSucceedsWhenEveryWorkerHasFinished) {
  const std::string w1 = AddWorker(1), w2 = AddWorker(1);
  ASSERT_TRUE(jobs_->Submit(Spec(2)).ok());
  dispatcher_->Tick();
  v1::ReportRequest steps;
  steps.set_worker_id(w1);
  steps.set_job_id(1);
  for (int s = 1; s <= 2; ++s) {
    v1::RankStep* step = steps.add_steps();
    step->set_rank(0);
    step->set_step(s);
    step->set_loss(5.0 - s);
    step->set_seconds(0.5);
    step->set_peak_bytes(4096);
  }
  auto r = dispatcher_->OnReport(steps);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->cancel());
  auto job = jobs_->Get(1);
  EXPECT_EQ(job->step(), 2);
  EXPECT_DOUBLE_EQ(job->loss(), 3.0);
  const auto events = *jobs_->Events(1);
  EXPECT_DOUBLE_EQ(events.back().items_per_second(), 512);  // 256 tokens in 0.5 s
  EXPECT_EQ(events.back().peak_bytes(), 4096);
  ASSERT_TRUE(Finish(w1, 1).ok());
  EXPECT_EQ(State(1), v1::RUNNING);  // w2's ranks have not ended
  ASSERT_TRUE(Finish(w2, 1).ok());
  EXPECT_EQ(State(1), v1::SUCCEEDED);
  EXPECT_NE(Messages(1).back().find("loss 4.0000 -> 3.0000"), std::string::npos) << Messages(1).back();
  EXPECT_TRUE(dispatcher_->BusyDevices().empty());
  EXPECT_EQ(Finish(w2, 1).status().code(), absl::StatusCode::kNotFound);  // no longer run here
}

TEST_F(DispatcherTest, RanksOutputIsKeptFromTheirOwnWorkerAndBounded) {
  const std::string w1 = AddWorker(1), w2 = AddWorker(1);
  ASSERT_TRUE(jobs_->Submit(Spec(2)).ok());
  dispatcher_->Tick();  // rank 0 on w1, rank 1 on w2
  v1::ReportRequest r;
  r.set_worker_id(w2);
  r.set_job_id(1);
  v1::RankOutput* o = r.add_outputs();
  o->set_rank(1);
  o->set_text("[rank 1] step 1/4 loss 4.0\n");
  ASSERT_TRUE(dispatcher_->OnReport(r).ok());
  o->set_text("error: rank 1: out of memory\n");
  o->set_dropped_bytes(100);
  ASSERT_TRUE(dispatcher_->OnReport(r).ok());
  v1::JobLogsRequest req;
  req.set_id(1);
  req.set_rank(1);
  auto logs = jobs_->RankOutput(req);
  ASSERT_TRUE(logs.ok()) << logs.status();
  EXPECT_EQ(logs->text(),
            "[rank 1] step 1/4 loss 4.0\n[mapd: 100 bytes of rank 1's output dropped by its worker; its rank_1.log has them]\n"
            "error: rank 1: out of memory\n");
  EXPECT_FALSE(logs->finished());
  // Another worker's rank, a forged size, a rank the job has not: refused, nothing kept.
  o->set_rank(0);
  EXPECT_EQ(dispatcher_->OnReport(r).status().code(), absl::StatusCode::kInvalidArgument);
  o->set_rank(1);
  o->set_text(std::string((2 << 20), 'x'));
  EXPECT_EQ(dispatcher_->OnReport(r).status().code(), absl::StatusCode::kInvalidArgument);
  req.set_rank(2);
  EXPECT_EQ(jobs_->RankOutput(req).status().code(), absl::StatusCode::kInvalidArgument);
  req.set_rank(0);
  EXPECT_EQ(jobs_->RankOutput(req)->text(), "");  // rank 0 said nothing
  // A finished job can be deleted with its output; a running one cannot.
  EXPECT_EQ(jobs_->Delete(1).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(Finish(w1, 1).ok());
  ASSERT_TRUE(Finish(w2, 1).ok());
  req.set_rank(1);
  EXPECT_TRUE(jobs_->RankOutput(req)->finished());
  ASSERT_TRUE(jobs_->Delete(1).ok());
  EXPECT_EQ(jobs_->RankOutput(req).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(jobs_->Get(1).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(DispatcherTest, AFailedRankFailsTheJobAndTheOtherWorkersAreToldToStop) {
  const std::string w1 = AddWorker(1), w2 = AddWorker(1);
  ASSERT_TRUE(jobs_->Submit(Spec(2)).ok());
  dispatcher_->Tick();
  // The failing worker is not told the job was stopping: its ranks failed first.
  EXPECT_FALSE(Finish(w2, 1, 8, "rank 1 exited with status 1: out of memory [RESOURCE_EXHAUSTED]")->cancel());
  // The job's fate waits for its other ranks (their worker might be dying: see the next test).
  EXPECT_EQ(State(1), v1::RUNNING);
  EXPECT_NE(Messages(1).back().find("worker " + w2 + ": rank 1 exited with status 1: out of memory [RESOURCE_EXHAUSTED]; stopping the other ranks"),
            std::string::npos)
      << Messages(1).back();
  const v1::HeartbeatResponse hb = Beat(w1, {1});
  EXPECT_EQ(std::vector<int64_t>(hb.cancel_job_ids().begin(), hb.cancel_job_ids().end()), std::vector<int64_t>{1});
  EXPECT_EQ(hb.assignments_size(), 0);
  v1::ReportRequest step;
  step.set_worker_id(w1);
  step.set_job_id(1);
  EXPECT_TRUE(dispatcher_->OnReport(step)->cancel());
  EXPECT_EQ(dispatcher_->BusyDevices().count(w1), 1u);  // until its ranks have ended
  // Its ranks' end (here a failure: their peer was gone) is the coordinator's doing.
  EXPECT_TRUE(Finish(w1, 1, 10, "rank 0 exited with status 1: Connection reset by peer [ABORTED]")->cancel());
  EXPECT_TRUE(dispatcher_->BusyDevices().empty());
  EXPECT_EQ(State(1), v1::FAILED);
  EXPECT_NE(jobs_->Get(1)->error().find("worker " + w2 + ": rank 1 exited"), std::string::npos) << jobs_->Get(1)->error();
}

TEST_F(DispatcherTest, PlanningANewJobDoesNotDelayNoticingALostWorker) {
  // The server runs StartPending and Watch on threads of their own: a plan that takes long (here
  // one that waits to be released) must not hold up the other half.
  absl::Notification planning, release;
  dispatcher_ = std::make_unique<Dispatcher>(jobs_.get(), workers_.get(), DispatchOptions{},
                                             [&](const v1::JobSpec& spec) -> absl::StatusOr<RunnablePlan> {
                                               if (spec.training().steps() == 99) {
                                                 planning.Notify();
                                                 release.WaitForNotification();
                                               }
                                               return FakePlan(spec);
                                             });
  const std::string w1 = AddWorker(1), w2 = AddWorker(1);
  ASSERT_TRUE(jobs_->Submit(Spec(1)).ok());
  dispatcher_->Tick();
  ASSERT_EQ(State(1), v1::RUNNING);
  ASSERT_EQ(Beat(w1).assignments_size(), 1);
  ASSERT_TRUE(jobs_->Submit(Spec(1, /*steps=*/99)).ok());
  std::thread starter([&] { dispatcher_->StartPending(); });
  planning.WaitForNotification();
  EXPECT_EQ(State(2), v1::PLANNING);
  clock_.Advance(4);
  Beat(w2);
  clock_.Advance(2);  // w1 silent past its lease while job 2 is being planned
  workers_->ExpireLeases();
  dispatcher_->Watch();
  EXPECT_EQ(State(1), v1::FAILED);
  EXPECT_NE(jobs_->Get(1)->error().find("worker " + w1 + " was lost"), std::string::npos) << jobs_->Get(1)->error();
  EXPECT_NE(jobs_->Get(1)->error().find("(no checkpoint committed yet to restart from)"), std::string::npos)
      << jobs_->Get(1)->error();
  EXPECT_EQ(State(2), v1::PLANNING);
  release.Notify();
  starter.join();
  EXPECT_EQ(State(2), v1::RUNNING);
  EXPECT_EQ(Beat(w2).assignments_size(), 1);
}

TEST_F(DispatcherTest, ALostWorkerFailsItsJobAndACancelledJobIsStoppedOnItsWorkers) {
  const std::string w1 = AddWorker(1), w2 = AddWorker(1);
  ASSERT_TRUE(jobs_->Submit(Spec(2)).ok());
  dispatcher_->Tick();
  clock_.Advance(4);
  Beat(w2, {1});
  clock_.Advance(2);  // w1 silent past its 5 s lease
  workers_->ExpireLeases();
  dispatcher_->Tick();
  EXPECT_EQ(State(1), v1::FAILED);
  EXPECT_NE(jobs_->Get(1)->error().find("worker " + w1 + " was lost"), std::string::npos) << jobs_->Get(1)->error();
  EXPECT_EQ(Beat(w2, {1}).cancel_job_ids_size(), 1);
  Beat(w2, {});  // its ranks have ended
  EXPECT_TRUE(dispatcher_->BusyDevices().empty());

  ASSERT_TRUE(jobs_->Submit(Spec(1)).ok());
  dispatcher_->Tick();
  ASSERT_EQ(State(2), v1::RUNNING);
  ASSERT_TRUE(jobs_->Cancel(2).ok());
  dispatcher_->Tick();
  EXPECT_EQ(Beat(w2, {2}).cancel_job_ids_size(), 1);
  EXPECT_TRUE(Finish(w2, 2, 1, "cancelled")->cancel());  // counted as stopped on the worker
  EXPECT_EQ(State(2), v1::CANCELLED);
}

TEST_F(DispatcherTest, PeersFailingBeforeADeadWorkersLeaseRunsOutRestartTheJobAsALostWorker) {
  // A worker process that dies takes its ranks with it; their peers on other workers fail at once
  // ("connection closed by peer"), seconds before the dead worker's lease runs out.
  UseCheckpointDir("dispatcher_peer");
  const std::string w1 = AddWorker(1), w2 = AddWorker(1), w3 = AddWorker(1);
  StartCheckpointedJob();
  ReportCheckpoint({w1, w2}, 1, 5);
  // w2 died: w1's rank fails first. The job stays RUNNING, stopping, until w2's part ends.
  clock_.Advance(4);
  Beat(w1, {1});
  Beat(w3);
  EXPECT_FALSE(Finish(w1, 1, 14, "rank 0 exited with status 1: Connection closed by peer [UNAVAILABLE]")->cancel());
  dispatcher_->Tick();
  EXPECT_EQ(State(1), v1::RUNNING);
  EXPECT_NE(Messages(1).back().find("stopping the other ranks"), std::string::npos) << Messages(1).back();
  // w2's lease runs out: the job restarts as any job whose worker was lost (every part has ended,
  // so it is placed again at once).
  clock_.Advance(2);
  workers_->ExpireLeases();
  dispatcher_->Tick();
  EXPECT_EQ(State(1), v1::RUNNING);
  const std::vector<std::string> messages = Messages(1);
  ASSERT_GE(messages.size(), 2u);
  const std::string& restarting = messages[messages.size() - 2];
  EXPECT_NE(restarting.find("worker " + w2 + " was lost (its lease ran out) while running rank 1"), std::string::npos) << restarting;
  EXPECT_NE(restarting.find("restarting from the checkpoint of step 5"), std::string::npos) << restarting;
  EXPECT_NE(messages.back().find("resumed from the checkpoint of step 5 on " + w1 + " (rank 0), " + w3 + " (rank 1)"), std::string::npos)
      << messages.back();
  ASSERT_TRUE(ReportStore(w1, 1, "10.0.0.1:29500", /*attempt=*/1).ok());
  EXPECT_EQ(Beat(w3).assignments(0).resume_step(), 5);
}

TEST_F(DispatcherTest, ALostWorkerRestartsTheJobFromItsLastCheckpointOnTheDevicesLeft) {
  const std::string dir = UseCheckpointDir("dispatcher_restart", /*max_restarts=*/1);
  const std::string w1 = AddWorker(1), w2 = AddWorker(1), w3 = AddWorker(1);
  StartCheckpointedJob();
  EXPECT_EQ(Beat(w1).assignments(0).checkpoint_dir(), dir + "/job-1");
  // Both workers' shards of step 5 are written: the coordinator commits the step.
  ReportCheckpoint({w1, w2}, 1, 5);
  EXPECT_TRUE(std::filesystem::exists(dir + "/job-1/step-00000005/meta.pb"));
  EXPECT_NE(Messages(1).back().find("checkpoint: step 5 committed to " + dir + "/job-1/step-00000005"), std::string::npos)
      << Messages(1).back();
  // w2 goes silent past its lease: RESTARTING, and w1 is told to stop its rank.
  clock_.Advance(4);
  Beat(w1, {1});
  Beat(w3);
  clock_.Advance(2);
  workers_->ExpireLeases();
  dispatcher_->Tick();
  EXPECT_EQ(State(1), v1::RESTARTING);
  EXPECT_NE(Messages(1).back().find("restarting from the checkpoint of step 5 (restart 1 of at most 1)"), std::string::npos)
      << Messages(1).back();
  EXPECT_EQ(Beat(w1, {1}).cancel_job_ids_size(), 1);
  dispatcher_->Tick();
  EXPECT_EQ(State(1), v1::RESTARTING);  // w1's rank has not ended yet
  ASSERT_TRUE(Finish(w1, 1, 1, "cancelled").ok());
  dispatcher_->Tick();
  ASSERT_EQ(State(1), v1::RUNNING);
  EXPECT_NE(Messages(1).back().find("resumed from the checkpoint of step 5 on " + w1 + " (rank 0), " + w3 + " (rank 1)"),
            std::string::npos)
      << Messages(1).back();
  // The new attempt's rank 0 hosts a new store: the other part waits for its address again.
  EXPECT_EQ(Beat(w3).assignments_size(), 0);
  ASSERT_TRUE(ReportStore(w1, 1, "10.0.0.1:29501", /*attempt=*/1).ok());
  const v1::HeartbeatResponse hb = Beat(w3);
  ASSERT_EQ(hb.assignments_size(), 1);
  EXPECT_EQ(hb.assignments(0).resume_step(), 5);
  EXPECT_EQ(hb.assignments(0).attempt(), 1);
  EXPECT_EQ(Beat(w1).assignments(0).attempt(), 1);  // its earlier attempt ended; this one is new
  // A late word from the first attempt changes nothing; that attempt was stopped.
  EXPECT_TRUE(Finish(w1, 1, 0, "", /*attempt=*/0)->cancel());
  EXPECT_EQ(State(1), v1::RUNNING);
  // Lost again: the one restart allowed is spent, so the job fails.
  clock_.Advance(4);
  Beat(w1, {1});
  clock_.Advance(2);
  workers_->ExpireLeases();
  dispatcher_->Tick();
  EXPECT_EQ(State(1), v1::FAILED);
  EXPECT_NE(jobs_->Get(1)->error().find("worker " + w3 + " was lost"), std::string::npos) << jobs_->Get(1)->error();
  EXPECT_NE(jobs_->Get(1)->error().find("restarted 1 time(s) already"), std::string::npos) << jobs_->Get(1)->error();
}

TEST_F(DispatcherTest, ARankFailureAfterACheckpointRestartsTheJobUnlessItsProgramIsAtFault) {
  UseCheckpointDir("dispatcher_rank_failure", /*max_restarts=*/1);
  const std::string w1 = AddWorker(1), w2 = AddWorker(1);
  StartCheckpointedJob();
  ReportCheckpoint({w1, w2}, 1, 5);
  // A link between the workers broke: w2's rank times out in a collective (UNAVAILABLE), then
  // w1's, stopped, ends too. Both workers live, so the job restarts on them from step 5.
  EXPECT_FALSE(Finish(w2, 1, 14, "rank 1 exited with status 1: ALL_REDUCE timed out")->cancel());
  EXPECT_TRUE(Finish(w1, 1, 10, "rank 0 exited with status 1: Connection reset by peer")->cancel());
  dispatcher_->Tick();
  EXPECT_EQ(State(1), v1::RUNNING);
  std::vector<std::string> messages = Messages(1);
  ASSERT_GE(messages.size(), 2u);
  const std::string& restarting = messages[messages.size() - 2];
  EXPECT_NE(restarting.find("worker " + w2 + ": rank 1 exited with status 1: ALL_REDUCE timed out; restarting from the checkpoint of step 5 "
                            "(restart 1 of at most 1)"),
            std::string::npos)
      << restarting;
  EXPECT_NE(messages.back().find("resumed from the checkpoint of step 5"), std::string::npos) << messages.back();
  EXPECT_EQ(jobs_->Get(1)->restarts(), 1);
  EXPECT_FALSE(Beat(w1).has_shard_keep());  // with shared storage, workers keep no shards for peers
  ASSERT_TRUE(ReportStore(w1, 1, "10.0.0.1:29501", /*attempt=*/1).ok());
  EXPECT_EQ(Beat(w2).assignments(0).resume_step(), 5);
  // Failing again: the one restart allowed is spent.
  EXPECT_FALSE(Finish(w1, 1, 4, "rank 0 exited with status 1: rendezvous timed out", /*attempt=*/1)->cancel());
  EXPECT_TRUE(Finish(w2, 1, 10, "rank 1 was stopped", /*attempt=*/1)->cancel());
  EXPECT_EQ(State(1), v1::FAILED);
  EXPECT_NE(jobs_->Get(1)->error().find("rendezvous timed out (restarted 1 time(s) already)"), std::string::npos) << jobs_->Get(1)->error();
  // A failure that is the program's (an invalid argument) fails at once, checkpoint or not.
  v1::JobSpec spec = Spec(2);
  spec.mutable_training()->set_checkpoint_every(5);
  ASSERT_TRUE(jobs_->Submit(spec).ok());
  dispatcher_->Tick();
  ASSERT_EQ(State(2), v1::RUNNING);
  ReportCheckpoint({w1, w2}, 2, 5);
  EXPECT_FALSE(Finish(w1, 2, 3, "rank 0 exited with status 1: node 'fc' (aten::mm): shapes [4,8] and [9,2]")->cancel());
  EXPECT_TRUE(Finish(w2, 2, 10, "rank 1 was stopped")->cancel());
  EXPECT_EQ(State(2), v1::FAILED);
  EXPECT_NE(jobs_->Get(2)->error().find("(INVALID_ARGUMENT: the job's program or input is at fault, so it is not restarted)"), std::string::npos)
      << jobs_->Get(2)->error();
}

TEST_F(DispatcherTest, WithoutSharedStorageALostWorkersJobResumesFromTheShardsItsPeerKept) {
  // Each worker's shards are pushed to the next part's worker (a ring); a step counts once every
  // worker has reported it kept so. w2 lost: its ranks' shards are on w1, and the job resumes on
  // w1 and w3, w3 fetching rank 1's shards from w1 first (w2, lost, last).
  const std::string w1 = AddWorker(1, "cpu", "10.0.0.1:30001"), w2 = AddWorker(1, "cpu", "10.0.0.2:30001"),
                    w3 = AddWorker(1, "cpu", "10.0.0.3:30001");
  StartCheckpointedJob();
  const v1::RankAssignment a1 = Beat(w1).assignments(0);
  EXPECT_TRUE(a1.checkpoint_dir().empty());
  EXPECT_EQ(a1.shard_peer(), "10.0.0.2:30001");
  EXPECT_EQ(a1.shard_secret().size(), 32u);
  ASSERT_TRUE(ReportStore(w1, 1, "10.0.0.1:29501").ok());
  const v1::RankAssignment a2 = Beat(w2).assignments(0);
  EXPECT_EQ(a2.shard_peer(), "10.0.0.1:30001");
  EXPECT_EQ(a2.shard_secret(), a1.shard_secret());
  ReportCheckpoint({w1, w2}, 1, 5);
  EXPECT_NE(Messages(1).back().find("checkpoint: step 5 committed on every worker; each worker's shards kept by a peer too (" + w1 + "'s on " +
                                    w2 + ", " + w2 + "'s on " + w1 + ")"),
            std::string::npos)
      << Messages(1).back();
  clock_.Advance(4);
  Beat(w1, {1});
  Beat(w3);
  clock_.Advance(2);
  workers_->ExpireLeases();
  dispatcher_->Tick();
  ASSERT_EQ(State(1), v1::RESTARTING);
  EXPECT_NE(Messages(1).back().find("restarting from the checkpoint of step 5 (restart 1 of at most 3), whose shards the workers left keep"),
            std::string::npos)
      << Messages(1).back();
  ASSERT_TRUE(Finish(w1, 1, 1, "cancelled").ok());
  dispatcher_->Tick();
  ASSERT_EQ(State(1), v1::RUNNING);
  ASSERT_TRUE(ReportStore(w1, 1, "10.0.0.1:29502", /*attempt=*/1).ok());
  const v1::RankAssignment resumed = Beat(w3).assignments(0);
  EXPECT_EQ(resumed.resume_step(), 5);
  EXPECT_EQ(resumed.shard_secret(), a1.shard_secret());  // the job's, for every attempt
  ASSERT_EQ(resumed.resume_shards_size(), 2);
  EXPECT_EQ(resumed.resume_shards(1).rank(), 1);
  EXPECT_EQ(std::vector<std::string>(resumed.resume_shards(1).addresses().begin(), resumed.resume_shards(1).addresses().end()),
            (std::vector<std::string>{"10.0.0.1:30001", "10.0.0.2:30001"}));
  // The workers go on keeping the job's shards: w3 runs a part, w1 runs one and holds step 5's.
  for (const std::string& w : {w1, w3}) {
    const v1::HeartbeatResponse hb = Beat(w, {1});
    ASSERT_TRUE(hb.has_shard_keep()) << w;
    EXPECT_EQ(std::vector<int64_t>(hb.shard_keep().job_ids().begin(), hb.shard_keep().job_ids().end()), std::vector<int64_t>{1}) << w;
  }

  // Two workers lost together (w1 and w3, keeping each other's): rank 0's and 1's shards of the
  // step committed next are gone, and the error says so.
  ReportCheckpoint({w1, w3}, 1, 10, /*attempt=*/1);
  clock_.Advance(6);
  workers_->ExpireLeases();
  dispatcher_->Tick();
  EXPECT_EQ(State(1), v1::FAILED);
  EXPECT_NE(jobs_->Get(1)->error().find("there is no shared checkpoint storage, and the shards of rank(s) 0,1 of step 10 were kept only on workers now lost"),
            std::string::npos)
      << jobs_->Get(1)->error();
  // An ended job's shards are kept nowhere: a worker is told to keep none.
  const v1::HeartbeatResponse later = Beat(AddWorker(1, "cpu", "10.0.0.4:30001"));
  EXPECT_TRUE(later.has_shard_keep());
  EXPECT_EQ(later.shard_keep().job_ids_size(), 0);
}

TEST_F(DispatcherTest, PlanningFailuresFailAndJobsOrphanedByARestartAreQueuedOrFail) {
  AddWorker(2);
  ASSERT_TRUE(jobs_->Submit(Spec(1, /*steps=*/13)).ok());
  // As a previous coordinator left them: job 2 PLANNING, job 3 RUNNING (no checkpoint storage).
  ASSERT_TRUE(jobs_->Submit(Spec(1)).ok());
  ASSERT_TRUE(jobs_->Transition(2, v1::PLANNING, "planning").ok());
  ASSERT_TRUE(jobs_->Submit(Spec(1)).ok());
  ASSERT_TRUE(jobs_->Transition(3, v1::PLANNING, "planning").ok());
  ASSERT_TRUE(jobs_->Transition(3, v1::RUNNING, "running").ok());
  dispatcher_->Tick();
  EXPECT_EQ(State(1), v1::FAILED);
  EXPECT_EQ(jobs_->Get(1)->error(), "FAILED_PRECONDITION: no plan fits 1 KiB per device");
  EXPECT_EQ(State(2), v1::RUNNING);  // back in the queue, then started
  const std::vector<std::string> messages = Messages(2);
  EXPECT_TRUE(std::find(messages.begin(), messages.end(), "the coordinator restarted while planning the job; back in the queue") !=
              messages.end());
  EXPECT_EQ(State(3), v1::FAILED);
  EXPECT_NE(jobs_->Get(3)->error().find("the coordinator restarted while the job was RUNNING and it has no checkpoint to resume from"),
            std::string::npos)
      << jobs_->Get(3)->error();
  // A worker still running its ranks is told to stop them.
  EXPECT_EQ(Beat("w-1", {3}).cancel_job_ids_size(), 1);
}

TEST_F(DispatcherTest, ARestartedCoordinatorResumesRunningJobsFromTheirCheckpoints) {
  const std::string dir = UseCheckpointDir("dispatcher_recover", /*max_restarts=*/2);
  auto commit = [&](int64_t job, int64_t step, int64_t mesh) {
    const v1::CheckpointMeta meta = CheckpointMetaFor(step, static_cast<int>(mesh), {mesh}, "mesh " + std::to_string(mesh));
    ASSERT_TRUE(CommitCheckpointStep(dir + "/job-" + std::to_string(job), meta).ok());
  };
  // As the previous coordinator left them, all RUNNING: job 1 with step 5 committed, job 2 with
  // nothing committed, job 3 with a checkpoint of another plan, job 4 with its restarts spent.
  for (int i = 1; i <= 4; ++i) {
    ASSERT_TRUE(jobs_->Submit(Spec(2)).ok());
    ASSERT_TRUE(jobs_->Transition(i, v1::PLANNING, "planning").ok());
    ASSERT_TRUE(jobs_->Transition(i, v1::RUNNING, "running", [&](v1::Job& j) { j.set_attempt(i == 4 ? 2 : 0); }).ok());
  }
  commit(1, 5, 2);
  commit(3, 5, 4);
  commit(4, 5, 2);
  const std::string w1 = AddWorker(1), w2 = AddWorker(1);
  dispatcher_->Tick();
  ASSERT_EQ(State(1), v1::RESTARTING);
  EXPECT_EQ(Messages(1).back(),
            "the coordinator restarted; restarting from the checkpoint of step 5 (restart 1 of at most 2) once no worker runs the job's "
            "earlier ranks");
  EXPECT_EQ(State(2), v1::FAILED);
  EXPECT_NE(jobs_->Get(2)->error().find("it cannot resume: no checkpoint committed in " + dir + "/job-2"), std::string::npos)
      << jobs_->Get(2)->error();
  // A checkpoint of another plan is resharded into the one found now.
  EXPECT_EQ(State(3), v1::RESTARTING);
  EXPECT_NE(Messages(3).back().find("; planned anew as mesh 2, so the checkpoint is resharded into it"), std::string::npos)
      << Messages(3).back();
  EXPECT_EQ(State(4), v1::FAILED);
  EXPECT_NE(jobs_->Get(4)->error().find("it has restarted 2 time(s) already (--max-restarts 2)"), std::string::npos)
      << jobs_->Get(4)->error();

  // w1 still runs job 1's and job 3's earlier ranks: told to stop them, and the jobs wait for
  // that even after the lease period.
  EXPECT_EQ(Beat(w1, {1, 3}).cancel_job_ids_size(), 2);
  v1::ReportRequest late;  // their reports are refused: they are to stop
  late.set_worker_id(w1);
  late.set_job_id(1);
  EXPECT_EQ(dispatcher_->OnReport(late).status().code(), absl::StatusCode::kNotFound);
  clock_.Advance(5);
  Beat(w2);
  EXPECT_EQ(Beat(w1, {1, 3}).cancel_job_ids_size(), 2);
  dispatcher_->Tick();
  EXPECT_EQ(State(1), v1::RESTARTING);
  EXPECT_EQ(State(3), v1::RESTARTING);
  // They have ended: the job is placed with the next attempt, from step 5.
  Beat(w1, {});
  dispatcher_->Tick();
  ASSERT_EQ(State(1), v1::RUNNING);
  EXPECT_NE(Messages(1).back().find("resumed from the checkpoint of step 5 on " + w1 + " (rank 0), " + w2 + " (rank 1)"), std::string::npos)
      << Messages(1).back();
  EXPECT_EQ(jobs_->Get(1)->attempt(), 1);
  ASSERT_TRUE(ReportStore(w1, 1, "10.0.0.1:29500", /*attempt=*/1).ok());
  const v1::HeartbeatResponse hb = Beat(w2);
  ASSERT_EQ(hb.assignments_size(), 1);
  EXPECT_EQ(hb.assignments(0).attempt(), 1);
  EXPECT_EQ(hb.assignments(0).resume_step(), 5);
  EXPECT_EQ(hb.assignments(0).checkpoint_dir(), dir + "/job-1");
  EXPECT_FALSE(hb.assignments(0).resume_resharded());  // its own plan's checkpoint
  // Job 1 ends; job 3 takes the devices and its ranks are told to reshard step 5.
  ASSERT_TRUE(Finish(w1, 1, 0, "", /*attempt=*/1).ok());
  ASSERT_TRUE(Finish(w2, 1, 0, "", /*attempt=*/1).ok());
  dispatcher_->Tick();
  ASSERT_EQ(State(3), v1::RUNNING);
  const v1::HeartbeatResponse first = Beat(w1);
  ASSERT_EQ(first.assignments_size(), 1);
  EXPECT_EQ(first.assignments(0).job_id(), 3);
  EXPECT_EQ(first.assignments(0).resume_step(), 5);
  EXPECT_TRUE(first.assignments(0).resume_resharded());
}

}  // namespace
}  // namespace mapd

namespace mapd {
namespace {

// A job store whose writes of one state fail, as a full disk would fail them.
class FailingStore : public JobStore {
 public:
  explicit FailingStore(v1::JobState failing) : failing_(failing) {}
  absl::Status Write(const v1::Job& job, const v1::JobEvent& event) override {
    if (job.state() == failing_) return absl::ResourceExhaustedError("disk full");
    return inner_->Write(job, event);
  }
  absl::StatusOr<std::vector<v1::Job>> LoadJobs() const override { return inner_->LoadJobs(); }
  absl::StatusOr<std::vector<v1::JobEvent>> LoadEvents(int64_t id, int64_t after) const override {
    return inner_->LoadEvents(id, after);
  }
  absl::Status Delete(int64_t id) override { return inner_->Delete(id); }
  absl::StatusOr<int64_t> MaxDeletedId() const override { return inner_->MaxDeletedId(); }

 private:
  v1::JobState failing_;
  std::unique_ptr<JobStore> inner_ = NewMemoryJobStore();
};

TEST_F(DispatcherTest, AStartTheStoreCannotRecordStopsTheJobsRanks) {
  // Read in the code for issue 18: a failed write of the move to RUNNING left the job PLANNING
  // while its ranks ran, unknown to any restart.
  FailingStore store(v1::RUNNING);
  auto jobs = JobManager::Create(&store, &clock_);
  ASSERT_TRUE(jobs.ok());
  Dispatcher dispatcher(jobs->get(), workers_.get(), DispatchOptions{}, FakePlan);
  const std::string w = AddWorker(2);
  ASSERT_TRUE((*jobs)->Submit(Spec(2)).ok());
  dispatcher.Tick();
  auto out = workers_->Heartbeat(w, sessions_[w]);
  ASSERT_TRUE(out.ok());
  dispatcher.OnHeartbeat(w, {1}, &*out);  // the worker started the ranks it was given
  dispatcher.Tick();
  out = workers_->Heartbeat(w, sessions_[w]);
  dispatcher.OnHeartbeat(w, {1}, &*out);
  EXPECT_EQ(std::count(out->cancel_job_ids().begin(), out->cancel_job_ids().end(), 1), 1) << "the ranks are told to stop";
  auto job = (*jobs)->Get(1);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state(), v1::FAILED);
  EXPECT_NE(job->error().find("could not record the job's start (disk full)"), std::string::npos) << job->error();
}

TEST_F(DispatcherTest, AForgedFinishedReportFromAWorkerTheJobDoesNotRunOnIsRefused) {
  // Probe of issue 18: a forged Report "finished, loss 0.0001" made the job SUCCEEDED and
  // cancelled its real ranks. Without the worker's session it is NOT_FOUND at the worker service
  // (WorkerRegistry.ACallWithoutTheSessionIsNotTheWorkers, WorkerService.AReportWithoutTheSession...);
  // here, a registered worker with no part of the job.
  const std::string w1 = AddWorker(2);
  ASSERT_TRUE(jobs_->Submit(Spec(2)).ok());
  dispatcher_->Tick();
  ASSERT_EQ(State(1), v1::RUNNING);
  const std::string stranger = AddWorker(1);
  v1::ReportRequest forged;
  forged.set_worker_id(stranger);
  forged.set_job_id(1);
  auto* step = forged.add_steps();
  step->set_rank(0);
  step->set_step(10);
  step->set_loss(0.0001);
  forged.set_finished(true);
  const auto answer = dispatcher_->OnReport(forged);
  EXPECT_EQ(answer.status().code(), absl::StatusCode::kNotFound) << answer.status();
  dispatcher_->Tick();
  EXPECT_EQ(State(1), v1::RUNNING);
  EXPECT_EQ(jobs_->Get(1)->step(), 0);  // no progress taken from it
  const v1::HeartbeatResponse hb = Beat(w1, {1});
  EXPECT_EQ(hb.cancel_job_ids_size(), 0) << "the real ranks go on";
}

// Issue 50: a worker that runs part of a job and reports its ranks finished OK after 0 of its 10
// steps — or after 9, or with only one of its two ranks at the last — does not end the job: the
// report is refused, named in the job's events (the first time), and the job goes on; once each of its ranks has
// reported step 10, the same report is taken and the job succeeds.
TEST_F(DispatcherTest, AWorkersReportOfAnEndBeforeTheLastStepIsRefusedAndTheJobGoesOn) {
  const std::string w1 = AddWorker(2);
  ASSERT_TRUE(jobs_->Submit(Spec(2)).ok());
  dispatcher_->Tick();
  ASSERT_EQ(State(1), v1::RUNNING);
  auto report = [&](std::vector<std::pair<int, int64_t>> steps) {
    v1::ReportRequest r;
    r.set_worker_id(w1);
    r.set_job_id(1);
    for (auto [rank, step] : steps) {
      v1::RankStep* s = r.add_steps();
      s->set_rank(rank);
      s->set_step(step);
      s->set_loss(2.0);
    }
    r.set_finished(true);
    return dispatcher_->OnReport(r);
  };
  for (const auto& steps : std::vector<std::vector<std::pair<int, int64_t>>>{{}, {{0, 9}, {1, 9}}, {{0, 10}}}) {
    const auto early = report(steps);
    EXPECT_EQ(early.status().code(), absl::StatusCode::kFailedPrecondition) << early.status();
    EXPECT_NE(early.status().message().find("never reported the last step (10); the report is refused and the job goes on"), std::string::npos)
        << early.status();
    dispatcher_->Tick();
    EXPECT_EQ(State(1), v1::RUNNING);
    EXPECT_EQ(Beat(w1, {1}).cancel_job_ids_size(), 0) << "its ranks are not stopped";
  }
  // The first refusal is in the job's events, and only the first: a worker cannot flood them.
  const std::vector<std::string> messages = Messages(1);
  EXPECT_EQ(std::count_if(messages.begin(), messages.end(), [](const std::string& m) { return m.find("the report is refused") != std::string::npos; }),
            1);
  EXPECT_TRUE(std::any_of(messages.begin(), messages.end(), [&](const std::string& m) {
    return m == "worker " + w1 + " reported its ranks of job 1 finished OK, but 2 of its 2 rank(s) never reported the last step (10); " +
                    "the report is refused and the job goes on";
  }));
  const auto done = report({{1, 10}});  // rank 0's step 10 was taken above
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(State(1), v1::SUCCEEDED);
}

TEST_F(DispatcherTest, ForgedCheckpointAndStepReportsCountForNothing) {
  // Probes of issue 18: a report committing checkpoint step 99999999; one worker saying twice
  // that it wrote a step of a two-worker job; a step again after it was committed; a report of
  // 20,000 steps; steps outside the job or not after rank 0's last.
  const std::string dir = UseCheckpointDir("dispatcher_forged");
  const std::string w1 = AddWorker(1), w2 = AddWorker(1);
  StartCheckpointedJob();
  v1::ReportRequest far;
  far.set_worker_id(w1);
  far.set_job_id(1);
  far.set_checkpoint_step(99999999);
  const auto refused = dispatcher_->OnReport(far);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("which trains 10 steps"), std::string::npos) << refused.status();
  ReportCheckpoint({w1, w1}, 1, 5);  // one part of two, however often
  EXPECT_FALSE(std::filesystem::exists(dir + "/job-1/step-00000005"));
  ReportCheckpoint({w2}, 1, 5);
  EXPECT_TRUE(std::filesystem::exists(dir + "/job-1/step-00000005/meta.pb"));
  const size_t events = Messages(1).size();
  ReportCheckpoint({w1, w2}, 1, 5);  // committed already: steps only move forward
  EXPECT_EQ(Messages(1).size(), events);
  v1::ReportRequest flood;
  flood.set_worker_id(w1);
  flood.set_job_id(1);
  for (int s = 1; s <= 20000; ++s) {
    v1::RankStep* step = flood.add_steps();
    step->set_rank(0);
    step->set_step(s);
  }
  EXPECT_EQ(dispatcher_->OnReport(flood).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Messages(1).size(), events);
  v1::ReportRequest odd;
  odd.set_worker_id(w1);
  odd.set_job_id(1);
  for (int64_t s : {3, 3, 2, 11, -1, 4}) {  // 3, then a repeat, a step back, past the end, negative; 4
    v1::RankStep* step = odd.add_steps();
    step->set_rank(0);
    step->set_step(s);
    step->set_loss(static_cast<double>(s));
  }
  ASSERT_TRUE(dispatcher_->OnReport(odd).ok());
  EXPECT_EQ(Messages(1).size(), events + 2);  // steps 3 and 4
  EXPECT_EQ(jobs_->Get(1)->step(), 4);
}

TEST_F(DispatcherTest, EvaluationsComeFromRankZerosWorkerOfAJobThatEvaluates) {
  const std::string w1 = AddWorker(1), w2 = AddWorker(1);
  v1::JobSpec spec = Spec(2);
  spec.mutable_training()->set_eval_every(5);
  ASSERT_TRUE(jobs_->Submit(spec).ok());
  dispatcher_->Tick();
  ASSERT_EQ(State(1), v1::RUNNING);
  auto report = [&](const std::string& worker, const std::vector<int64_t>& steps) {
    v1::ReportRequest r;
    r.set_worker_id(worker);
    r.set_job_id(1);
    for (int64_t s : steps) {
      v1::Evaluation* e = r.add_evaluations();
      e->set_step(s);
      e->set_loss(2.5);
      e->set_batches(3);
    }
    return dispatcher_->OnReport(r).status();
  };
  // The part of rank 0 reports; the other part's evaluations, a flood and steps outside the job
  // count for nothing.
  const v1::HeartbeatResponse first = Beat(w1);
  ASSERT_EQ(first.assignments_size(), 1);
  const std::string rank0 = first.assignments(0).ranks(0) == 0 ? w1 : w2;
  const std::string other = rank0 == w1 ? w2 : w1;
  const size_t events = Messages(1).size();
  EXPECT_EQ(report(other, {5}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(report(rank0, std::vector<int64_t>(300, 5)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Messages(1).size(), events);
  ASSERT_TRUE(report(rank0, {5, 0, 11}).ok());
  const auto messages = Messages(1);
  ASSERT_EQ(messages.size(), events + 1);
  EXPECT_EQ(messages.back(), "eval after step 5: loss 2.5000 (3 batches, no gradients)");
  EXPECT_EQ(jobs_->Get(1)->last_evaluation().step(), 5);
}

}  // namespace
}  // namespace mapd

namespace mapd {
namespace {

TEST(Elastic, BoundsPlansForFewerDevicesAndTheCountChosen) {
  v1::JobSpec spec = Spec(4);
  EXPECT_EQ(BoundsOf(spec).min_devices, 4);
  EXPECT_EQ(BoundsOf(spec).max_devices, 4);
  spec.mutable_elastic();
  EXPECT_EQ(BoundsOf(spec).min_devices, 1);
  EXPECT_EQ(BoundsOf(spec).max_devices, 4);
  // A pinned micro-batch count that no plan fits on fewer devices is left to the planner; a
  // pinned stage count is kept where it divides the devices.
  std::vector<v1::JobSpec> asked;
  PlanJobFn planner = [&](const v1::JobSpec& s) -> absl::StatusOr<RunnablePlan> {
    asked.push_back(s);
    if (s.training().micro_batches() == "1" && s.ranks() < 4) return absl::FailedPreconditionError("no plan fits");
    return FakePlan(s);
  };
  spec.mutable_training()->set_micro_batches("1");
  spec.set_pipeline_stages("2");
  auto two = PlanForDevices(planner, spec, 2);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->world(), 2);
  ASSERT_EQ(asked.size(), 2u);
  EXPECT_EQ(asked[0].training().micro_batches(), "1");
  EXPECT_EQ(asked[0].pipeline_stages(), "2");
  EXPECT_EQ(asked[1].training().micro_batches(), "auto");
  asked.clear();
  spec.mutable_training()->set_micro_batches("auto");
  ASSERT_TRUE(PlanForDevices(planner, spec, 3).ok());
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0].pipeline_stages(), "auto");  // 2 stages do not divide 3 devices
  // An error other than "nothing fits" is not retried.
  PlanJobFn broken = [](const v1::JobSpec&) -> absl::StatusOr<RunnablePlan> { return absl::InvalidArgumentError("bad graph"); };
  spec.mutable_training()->set_micro_batches("1");
  EXPECT_EQ(PlanForDevices(broken, spec, 2).status().code(), absl::StatusCode::kInvalidArgument);

  ElasticPlans plans;
  plans.Found(std::make_shared<const RunnablePlan>(*FakePlan(Spec(4))));
  plans.Refused(3, "no plan fits 1 KiB");
  EXPECT_EQ(plans.Choose(2, 4).plan->world(), 4);
  ElasticPlans::Choice c = plans.Choose(2, 3);  // 3 refused, 2 not planned yet
  EXPECT_EQ(c.plan, nullptr);
  EXPECT_EQ(c.plan_from, 2);
  EXPECT_EQ(c.plan_to, 2);
  plans.Refused(2, "no plan fits 1 KiB");
  c = plans.Choose(2, 3);
  EXPECT_EQ(c.plan, nullptr);
  EXPECT_EQ(c.plan_from, 0);
  EXPECT_EQ(c.why, "no plan fits 2 to 3 device(s) (2 device(s): no plan fits 1 KiB)");
}

TEST(Elastic, MicroBatchesMakeUpForFewerDevicesUnderTheSameBudget) {
  // A GPT whose global batch of 16 fits 4 MiB a device on 4 devices in one pass, and on 2 only
  // in several (the real planner; no recomputation to fall back on).
  v1::JobSpec spec;
  spec.set_model("gpt2:layers=2,hidden=64,heads=2,vocab=256,seq=64,batch=16");
  spec.mutable_training()->set_steps(10);
  spec.set_ranks(4);
  spec.set_memory_per_device(4 << 20);
  spec.set_recompute("off");
  spec.mutable_training()->set_checkpoint_every(5);
  spec.mutable_elastic()->set_min_devices(2);
  spec = WithDefaults(spec);
  auto four = PlanJob(spec);
  ASSERT_TRUE(four.ok()) << four.status();
  EXPECT_EQ(four->micro_batches, 1);
  v1::JobSpec two = spec;
  two.set_ranks(2);
  EXPECT_EQ(PlanJob(two).status().code(), absl::StatusCode::kFailedPrecondition);  // one pass does not fit
  auto shrunk = PlanForDevices(PlanJob, spec, 2);
  ASSERT_TRUE(shrunk.ok()) << shrunk.status();
  EXPECT_EQ(shrunk->world(), 2);
  EXPECT_GT(shrunk->micro_batches, 1);
  EXPECT_LE(shrunk->predicted_peak_bytes, 4 << 20);
  EXPECT_NE(shrunk->summary.find("micro-batches"), std::string::npos) << shrunk->summary;
}

// Job 1 (4 ranks on two workers of 2 devices, elastic from 2 to 4, a checkpoint every 5 steps)
// with step 5 committed, its second worker lost and its first one's rank ended.
class ElasticDispatcherTest : public DispatcherTest {
 protected:
  void StartAndLoseAWorker(double grace, int min_devices = 2, PlanJobFn plan = FakePlan) {
    UseCheckpointDir("dispatcher_elastic", /*max_restarts=*/3, grace, std::move(plan));
    w1_ = AddWorker(2), w2_ = AddWorker(2);
    v1::JobSpec spec = Spec(4, /*steps=*/100);
    spec.mutable_training()->set_checkpoint_every(5);
    spec.mutable_elastic()->set_min_devices(min_devices);
    spec.mutable_elastic()->set_max_devices(4);
    ASSERT_TRUE(jobs_->Submit(spec).ok());
    dispatcher_->Tick();
    ASSERT_EQ(State(1), v1::RUNNING);
    ReportCheckpoint({w1_, w2_}, 1, 5);
    LoseAllBut(w1_, 1);
    ASSERT_EQ(State(1), v1::RESTARTING);
    ASSERT_TRUE(Finish(w1_, 1, 1, "cancelled").ok());
  }
  // Time passes with w1 (and `others`) alive, then two rounds (one to plan, one to place).
  void Pass(double seconds, const std::vector<std::string>& others = {}) {
    clock_.Advance(seconds);
    Beat(w1_);
    for (const std::string& w : others) Beat(w);
    dispatcher_->Tick();
    dispatcher_->Tick();
  }
  std::string w1_, w2_;
};

TEST_F(ElasticDispatcherTest, GoesOnWithTheDevicesLeftAfterTheGraceAndGrowsBackAtACheckpoint) {
  StartAndLoseAWorker(/*grace=*/8);
  Pass(0);
  EXPECT_EQ(State(1), v1::RESTARTING);  // the grace: waiting for as many devices as before
  EXPECT_EQ(Messages(1).back(),
            "waiting for 4 free cpu device(s); 2 free on ALIVE workers now (to resume from step 5); going on with "
            "fewer, at least 2, if none come within 8 s");
  Pass(4);
  EXPECT_EQ(State(1), v1::RESTARTING);
  Pass(4);  // the grace is over: planned for the 2 devices left, resumed from step 5 resharded
  ASSERT_EQ(State(1), v1::RUNNING);
  EXPECT_EQ(Messages(1).back(), "resumed on 2 of 4 devices from the checkpoint of step 5 (4 before): plan mesh 2; on " + w1_ + " (rank 0-1)");
  EXPECT_EQ(Messages(1)[Messages(1).size() - 2], "planning the job for 2 device(s), 2 free now, to resume from step 5");
  v1::Job job = *jobs_->Get(1);
  EXPECT_EQ(job.devices(), 2);
  EXPECT_EQ(job.attempt(), 1);
  EXPECT_EQ(job.restarts(), 1);
  EXPECT_EQ(job.plan_summary(), "mesh 2");
  v1::HeartbeatResponse hb = Beat(w1_);
  ASSERT_EQ(hb.assignments_size(), 1);
  EXPECT_EQ(hb.assignments(0).ranks_size(), 2);
  EXPECT_EQ(hb.assignments(0).programs_size(), 2);
  EXPECT_EQ(std::vector<int64_t>(hb.assignments(0).mesh().begin(), hb.assignments(0).mesh().end()), std::vector<int64_t>{2});
  EXPECT_EQ(hb.assignments(0).resume_step(), 5);
  EXPECT_TRUE(hb.assignments(0).resume_resharded());
  EXPECT_EQ(hb.assignments(0).attempt(), 1);
  // Steps are committed under the plan of 2 devices.
  ReportCheckpoint({w1_}, 1, 10, /*attempt=*/1);
  EXPECT_EQ(ReadLatestCheckpoint(checkpoint_dir_ + "/job-1")->ranks(), 2);
  EXPECT_EQ(ReadLatestCheckpoint(checkpoint_dir_ + "/job-1")->plan(), "mesh 2");
  // A worker comes back while a job is PENDING: the elastic job leaves the devices to it.
  ASSERT_TRUE(jobs_->Submit(Spec(8)).ok());
  const std::string w3 = AddWorker(2);
  Pass(1, {w3});
  ReportCheckpoint({w1_}, 1, 15, /*attempt=*/1);
  EXPECT_EQ(State(1), v1::RUNNING);
  ASSERT_TRUE(jobs_->Cancel(2).ok());
  // At its next checkpoint it grows to 4 (no restart counted).
  Pass(1, {w3});
  EXPECT_EQ(State(1), v1::RUNNING);  // not before a checkpoint
  ReportCheckpoint({w1_}, 1, 20, /*attempt=*/1);
  ASSERT_EQ(State(1), v1::RESTARTING);
  EXPECT_EQ(Messages(1).back(), "growing from 2 to 4 devices at the checkpoint of step 20: 2 more free");
  EXPECT_EQ(Beat(w1_, {1}).cancel_job_ids_size(), 1);
  EXPECT_TRUE(Finish(w1_, 1, 0, "", /*attempt=*/1)->cancel());
  Pass(0, {w3});
  ASSERT_EQ(State(1), v1::RUNNING);
  EXPECT_EQ(Messages(1).back(), "resumed on 4 of 4 devices from the checkpoint of step 20 (2 before): plan mesh 4; on " + w1_ +
                                    " (rank 0-1), " + w3 + " (rank 2-3)");
  job = *jobs_->Get(1);
  EXPECT_EQ(job.devices(), 4);
  EXPECT_EQ(job.attempt(), 2);
  EXPECT_EQ(job.restarts(), 1);
  hb = Beat(w1_);
  ASSERT_EQ(hb.assignments_size(), 1);
  EXPECT_EQ(hb.assignments(0).resume_step(), 20);
  EXPECT_TRUE(hb.assignments(0).resume_resharded());
  EXPECT_EQ(hb.assignments(0).attempt(), 2);
}

TEST_F(ElasticDispatcherTest, AReplacementWithinTheGraceKeepsThePlan) {
  StartAndLoseAWorker(/*grace=*/30);
  const std::string w3 = AddWorker(2);
  Pass(1, {w3});
  ASSERT_EQ(State(1), v1::RUNNING);
  EXPECT_EQ(Messages(1).back(), "resumed on 4 of 4 devices from the checkpoint of step 5: plan mesh 4; on " + w1_ + " (rank 0-1), " + w3 +
                                    " (rank 2-3)");
  const v1::HeartbeatResponse hb = Beat(w1_);
  ASSERT_EQ(hb.assignments_size(), 1);
  EXPECT_FALSE(hb.assignments(0).resume_resharded());  // its own plan's checkpoint
}

TEST_F(ElasticDispatcherTest, WaitsSayingWhyWhenTooFewDevicesAreLeftOrNoPlanFitsThem) {
  PlanJobFn no_three = [](const v1::JobSpec& s) -> absl::StatusOr<RunnablePlan> {
    if (s.ranks() == 3) return absl::FailedPreconditionError("no plan fits 1.00 GiB per device");
    return FakePlan(s);
  };
  StartAndLoseAWorker(/*grace=*/0, /*min_devices=*/3, no_three);
  Pass(1);
  EXPECT_EQ(State(1), v1::RESTARTING);
  EXPECT_EQ(Messages(1).back(),
            "waiting for 3 free cpu device(s); 2 free on ALIVE workers now (the elastic job's min_devices, to resume "
            "from step 5)");
  const std::string w3 = AddWorker(1);
  Pass(1, {w3});
  EXPECT_EQ(State(1), v1::RESTARTING);
  EXPECT_EQ(Messages(1).back(),
            "waiting: no plan fits 3 device(s) (3 device(s): no plan fits 1.00 GiB per device); 3 free devices now (to resume from step 5)");
  const std::string w4 = AddWorker(1);
  Pass(1, {w3, w4});
  ASSERT_EQ(State(1), v1::RUNNING);
  EXPECT_EQ(Messages(1).back(), "resumed on 4 of 4 devices from the checkpoint of step 5: plan mesh 4; on " + w1_ + " (rank 0-1), " + w3 +
                                    " (rank 2), " + w4 + " (rank 3)");
}

}  // namespace
}  // namespace mapd

namespace mapd {
namespace {

TEST_F(DispatcherTest, AnElasticJobStartsOnTheDevicesFreeAndGrowsAtACheckpoint) {
  UseCheckpointDir("dispatcher_elastic_start", /*max_restarts=*/3, /*elastic_grace_seconds=*/10);
  const std::string w1 = AddWorker(2);
  v1::JobSpec spec = Spec(4, /*steps=*/100);
  spec.mutable_training()->set_checkpoint_every(5);
  spec.mutable_elastic()->set_min_devices(2);
  spec.mutable_elastic()->set_max_devices(4);
  ASSERT_TRUE(jobs_->Submit(spec).ok());
  ASSERT_TRUE(jobs_->Submit(Spec(4)).ok());  // not elastic: it waits for 4
  dispatcher_->Tick();
  ASSERT_EQ(State(1), v1::RUNNING);
  EXPECT_EQ(Messages(1).back(), "running on " + w1 + " (rank 0-1); plan: mesh 2; 1003 B per rank predicted; 2 of its 4 (elastic: it grows "
                                "at its checkpoints)");
  EXPECT_EQ(jobs_->Get(1)->devices(), 2);
  EXPECT_EQ(State(2), v1::PENDING);
  ASSERT_TRUE(jobs_->Cancel(2).ok());
  const std::string w2 = AddWorker(2);
  dispatcher_->Tick();  // plans for the 4 devices it could grow into
  ReportCheckpoint({w1}, 1, 5);
  ASSERT_EQ(State(1), v1::RESTARTING);
  EXPECT_EQ(Messages(1).back(), "growing from 2 to 4 devices at the checkpoint of step 5: 2 more free");
  ASSERT_TRUE(Finish(w1, 1, 1, "cancelled").ok());
  dispatcher_->Tick();
  ASSERT_EQ(State(1), v1::RUNNING);
  EXPECT_EQ(Messages(1).back(), "resumed on 4 of 4 devices from the checkpoint of step 5 (2 before): plan mesh 4; on " + w1 + " (rank 0-1), " +
                                    w2 + " (rank 2-3)");
  EXPECT_EQ(jobs_->Get(1)->restarts(), 0);
  EXPECT_EQ(jobs_->Get(1)->attempt(), 1);
}

TEST_F(DispatcherTest, AnElasticJobThatFitsNoFewerDevicesWaitsForAll) {
  PlanJobFn four_only = [](const v1::JobSpec& s) -> absl::StatusOr<RunnablePlan> {
    if (s.ranks() < 4) return absl::FailedPreconditionError("no plan fits 1.00 GiB per device");
    return FakePlan(s);
  };
  UseCheckpointDir("dispatcher_elastic_start_wait", /*max_restarts=*/3, /*elastic_grace_seconds=*/10, four_only);
  AddWorker(2);
  v1::JobSpec spec = Spec(4, /*steps=*/100);
  spec.mutable_training()->set_checkpoint_every(5);
  spec.mutable_elastic()->set_min_devices(2);
  ASSERT_TRUE(jobs_->Submit(spec).ok());
  dispatcher_->Tick();
  EXPECT_EQ(State(1), v1::PENDING);
  EXPECT_EQ(Messages(1).back(),
            "back in the queue: no plan fits 2 device(s) (2 device(s): no plan fits 1.00 GiB per device); waiting for 4 devices");
  const size_t events = Messages(1).size();
  dispatcher_->Tick();  // not planned again for fewer
  EXPECT_EQ(Messages(1).size(), events + 1);
  EXPECT_EQ(Messages(1).back(), "waiting for 4 free cpu device(s); 2 free on ALIVE workers now");
  AddWorker(2);
  dispatcher_->Tick();
  EXPECT_EQ(State(1), v1::RUNNING);
  EXPECT_EQ(jobs_->Get(1)->devices(), 4);
}

}  // namespace
}  // namespace mapd

namespace mapd {
namespace {

TEST_F(ElasticDispatcherTest, ARestartedCoordinatorResumesAShrunkJobOnTheDevicesItHas) {
  StartAndLoseAWorker(/*grace=*/0);
  Pass(0);
  ASSERT_EQ(State(1), v1::RUNNING);  // on 2 devices
  ReportCheckpoint({w1_}, 1, 10, /*attempt=*/1);
  ASSERT_EQ(ReadLatestCheckpoint(checkpoint_dir_ + "/job-1")->ranks(), 2);
  // A new coordinator on the same jobs; w1 registers with it, still running the job's ranks.
  DispatchOptions o;
  o.checkpoint_dir = checkpoint_dir_;
  o.elastic_grace_seconds = 0;
  dispatcher_ = std::make_unique<Dispatcher>(jobs_.get(), workers_.get(), o, FakePlan);
  dispatcher_->Tick();
  ASSERT_EQ(State(1), v1::RESTARTING);
  EXPECT_NE(Messages(1).back().find("planned anew as mesh 4, so the checkpoint is resharded into it"), std::string::npos)
      << Messages(1).back();
  EXPECT_EQ(Beat(w1_, {1}).cancel_job_ids_size(), 1);
  clock_.Advance(5);
  Pass(0);
  Beat(w1_, {});  // its earlier ranks have stopped
  Pass(0);
  ASSERT_EQ(State(1), v1::RUNNING);
  EXPECT_EQ(Messages(1).back(), "resumed on 2 of 4 devices from the checkpoint of step 10: plan mesh 2; on " + w1_ + " (rank 0-1)");
  const v1::Job job = *jobs_->Get(1);
  EXPECT_EQ(job.restarts(), 2);
  EXPECT_EQ(job.attempt(), 2);
  const v1::HeartbeatResponse hb = Beat(w1_);
  ASSERT_EQ(hb.assignments_size(), 1);
  EXPECT_EQ(hb.assignments(0).resume_step(), 10);
  EXPECT_FALSE(hb.assignments(0).resume_resharded());  // written under the plan for 2 it resumes with
}

}  // namespace
}  // namespace mapd

namespace mapd {
namespace {

TEST_F(DispatcherTest, AnElasticJobIsPlannedForAFewDeviceCountsARound) {
  // Only 8 devices or 1 fit: after losing one device of 8 it is planned for 7, 6, 5, 4 in one
  // round of the planning thread, for 3, 2, 1 in the next, and resumes on 1.
  std::vector<int> asked;
  PlanJobFn one_or_eight = [&](const v1::JobSpec& s) -> absl::StatusOr<RunnablePlan> {
    if (s.training().micro_batches() != "auto") asked.push_back(s.ranks());  // (a count that fails is asked again with auto)
    if (s.ranks() != 1 && s.ranks() != 8) return absl::FailedPreconditionError("no plan fits");
    return FakePlan(s);
  };
  UseCheckpointDir("dispatcher_elastic_rounds", /*max_restarts=*/3, /*elastic_grace_seconds=*/0, one_or_eight);
  const std::string w1 = AddWorker(7), w2 = AddWorker(1);
  v1::JobSpec spec = Spec(8, /*steps=*/100);
  spec.mutable_training()->set_checkpoint_every(5);
  spec.mutable_elastic()->set_min_devices(1);
  ASSERT_TRUE(jobs_->Submit(spec).ok());
  dispatcher_->Tick();
  ASSERT_EQ(State(1), v1::RUNNING);
  ReportCheckpoint({w1, w2}, 1, 5);
  LoseAllBut(w1, 1);
  ASSERT_EQ(State(1), v1::RESTARTING);
  ASSERT_TRUE(Finish(w1, 1, 1, "cancelled").ok());
  asked.clear();
  Beat(w1);
  dispatcher_->Tick();
  EXPECT_EQ(asked, (std::vector<int>{7, 6, 5, 4}));
  dispatcher_->Tick();
  EXPECT_EQ(asked, (std::vector<int>{7, 6, 5, 4, 3, 2, 1}));
  dispatcher_->Tick();
  ASSERT_EQ(State(1), v1::RUNNING);
  EXPECT_EQ(Messages(1).back(), "resumed on 1 of 8 devices from the checkpoint of step 5 (8 before): plan mesh 1; on " + w1 + " (rank 0)");
}

}  // namespace
}  // namespace mapd

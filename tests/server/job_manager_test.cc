// The job manager: specs validated at submission, the state machine's edges and no others,
// progress only while running, cancel, history reloaded by a new manager over the same store,
// and watchers woken by new events.
#include "server/jobs/job_manager.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <thread>

#include "common/file_io.h"
#include "planner/profile/device_profile.h"
#include "server/api/event_log.h"
#include "server/jobs/job_spec.h"

namespace mapd {
namespace {

v1::JobSpec Spec() {
  v1::JobSpec s;
  s.set_model("gpt2:layers=2,hidden=32,heads=4,vocab=64,seq=8,batch=4");
  s.mutable_training()->set_steps(10);
  s.set_ranks(2);
  return s;
}

// mapd's log (event_log.h): the sink sees a job's lifecycle — submission, notes, state changes —
// and not its per-step progress; each becomes one logfmt line that quotes what needs quoting.
TEST(JobManager, LifecycleEventsGoToTheSinkAsOneLogLineEach) {
  auto store = NewMemoryJobStore();
  FakeClock clock;
  auto m = JobManager::Create(store.get(), &clock);
  ASSERT_TRUE(m.ok()) << m.status();
  std::vector<std::string> lines;
  (*m)->SetEventSink([&](const v1::Job& job, const v1::JobEvent& event) {
    lines.push_back(LogfmtLine(1796659200.25, "job", {{"job", std::to_string(job.id())}, {"state", v1::JobState_Name(job.state())},
                                                      {"message", event.message()}}));
  });
  ASSERT_TRUE((*m)->Submit(Spec()).ok());
  ASSERT_TRUE((*m)->Transition(1, v1::PLANNING, "planning").ok());
  ASSERT_TRUE((*m)->Transition(1, v1::RUNNING, "placed on w-1 (rank 0-1)").ok());
  JobProgress p;
  p.step = 1;
  p.loss = 2.5;
  ASSERT_TRUE((*m)->ReportProgress(1, p).ok());  // progress: in the job's events, not the log
  ASSERT_TRUE((*m)->Note(1, "worker w-1 said \"done\"\nearly").ok());
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0].rfind("time=2026-12-07T16:00:00.250Z kind=job job=1 state=PENDING message=\"submitted: ", 0), 0u) << lines[0];
  EXPECT_EQ(lines[2], "time=2026-12-07T16:00:00.250Z kind=job job=1 state=RUNNING message=\"placed on w-1 (rank 0-1)\"");
  EXPECT_EQ(lines[3], "time=2026-12-07T16:00:00.250Z kind=job job=1 state=RUNNING message=\"worker w-1 said \\\"done\\\"\\nearly\"");
  EXPECT_EQ(LogfmtLine(0, "worker_lost", {{"worker", "w-2"}}), "time=1970-01-01T00:00:00.000Z kind=worker_lost worker=w-2");
}

TEST(JobManager, SubmitValidatesAndQueues) {
  auto store = NewMemoryJobStore();
  FakeClock clock;
  auto m = JobManager::Create(store.get(), &clock);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_FALSE((*m)->HasPending());
  auto job = (*m)->Submit(Spec());
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->id(), 1);
  EXPECT_EQ(job->state(), v1::PENDING);
  EXPECT_EQ(job->spec().training().optimizer(), "adamw");  // defaults filled in
  EXPECT_EQ(job->spec().training().micro_batches(), "1");
  EXPECT_EQ(job->spec().training().precision(), "auto");
  EXPECT_EQ(job->spec().pipeline_stages(), "1");
  EXPECT_EQ(job->spec().name(), Spec().model());
  EXPECT_EQ((*m)->NextPending()->id(), 1);
  EXPECT_TRUE((*m)->HasPending());
  // Bad specs: INVALID_ARGUMENT naming the field; nothing queued.
  struct Case {
    std::function<void(v1::JobSpec&)> edit;
    std::string says;
  };
  const Case cases[] = {
      {[](v1::JobSpec& s) { s.mutable_training()->set_steps(-1); }, "steps is -1"},
      {[](v1::JobSpec& s) { s.set_ranks(-1); }, "ranks is -1"},
      {[](v1::JobSpec& s) { s.clear_model(); }, "not neither"},
      {[](v1::JobSpec& s) { s.add_mesh(3); }, "mesh 3 has more devices than ranks (2)"},
      {[](v1::JobSpec& s) { s.add_mesh(1); }, "mesh 1 has 1 devices but ranks is 2"},
      // Probes of issue 18: sizes that overflow, names of megabytes.
      {[](v1::JobSpec& s) { s.set_ranks(4), s.add_mesh(int64_t{1} << 32), s.add_mesh(int64_t{1} << 32); }, "has more devices than ranks (4)"},
      {[](v1::JobSpec& s) { s.set_name(std::string(3 << 20, 'n')); }, "the job's name has 3145728 characters; give at most 256"},
      {[](v1::JobSpec& s) { s.set_model(std::string(5000, 'g')); }, "the model spec has 5000 characters"},
      {[](v1::JobSpec& s) { s.set_ranks(1 << 20); }, "from 1 to 65536"},
      {[](v1::JobSpec& s) { s.mutable_training()->set_steps(int64_t{1} << 62); }, "give a number of steps from 1 to"},
      {[](v1::JobSpec& s) { s.mutable_training()->set_optimizer("lamb"); }, "optimizer 'lamb'"},
      {[](v1::JobSpec& s) { s.set_zero("4"); }, "zero '4'"},
      {[](v1::JobSpec& s) { s.mutable_training()->set_micro_batches("0"); }, "micro_batches '0'"},
      {[](v1::JobSpec& s) { s.mutable_training()->set_micro_batches("two"); }, "micro_batches 'two'"},
      {[](v1::JobSpec& s) { s.mutable_training()->set_precision("fp8"); }, "precision 'fp8'"},
      {[](v1::JobSpec& s) { s.set_pipeline_stages("0"); }, "pipeline_stages '0' is not auto or a count from 1 to 2"},
      {[](v1::JobSpec& s) { s.set_pipeline_stages("3"); }, "pipeline_stages '3'"},
      {[](v1::JobSpec& s) { s.set_pipeline_stages("2"), s.add_mesh(2); }, "a mesh and pipeline_stages 2"},
      {[](v1::JobSpec& s) { s.set_pipeline_stages("2"), s.set_device("cuda"); }, "pipeline_stages 2 on device cuda"},
      {[](v1::JobSpec& s) { s.set_pin("tp=3"); }, "pin tp=3: the pinned degrees (product 3) do not divide the 2 devices"},
      {[](v1::JobSpec& s) { s.set_pin("warp=2"); }, "pin has no key 'warp'"},
      {[](v1::JobSpec& s) { s.set_pin(std::string(300, 't')); }, "pin is 300 characters"},
      {[](v1::JobSpec& s) { s.set_pin("pp=2"), s.set_device("cuda"); }, "pipeline_stages 2 on device cuda"},
      {[](v1::JobSpec& s) {
         s.set_pin("dp=2");
         s.mutable_training()->set_checkpoint_every(5);
         s.mutable_elastic()->set_min_devices(1);
       },
       "which an elastic job's devices change: pin tp and pp only"},
      {[](v1::JobSpec& s) { s.mutable_training()->set_data("s3://bucket"); }, "data 's3://bucket'"},
      {[](v1::JobSpec& s) { s.mutable_training()->set_lr(std::nan("")); }, "lr is nan; give a positive, finite learning rate"},
      {[](v1::JobSpec& s) { s.mutable_training()->set_lr(std::numeric_limits<double>::infinity()); }, "lr is inf"},
      {[](v1::JobSpec& s) { s.mutable_training()->set_eval_every(-1); }, "eval_every is -1"},
      {[](v1::JobSpec& s) { s.mutable_training()->set_eval_every(5), s.mutable_training()->set_eval_batches(1 << 20); }, "eval_batches is 1048576"},
      {[](v1::JobSpec& s) { s.mutable_training()->set_eval_data("npy:/etc/x.npy"); }, "eval_data: data 'npy:/etc/x.npy': give a file relative"},
      // Probes of issue 18: files named by clients.
      {[](v1::JobSpec& s) { s.mutable_training()->set_data("text:/etc/passwd"); }, "relative to the workers' --data-root"},
      {[](v1::JobSpec& s) { s.mutable_training()->set_data("text:../../../../etc/passwd"); }, "without '..'"},
      {[](v1::JobSpec& s) { s.mutable_training()->set_data("tokens:a/../../b"); }, "without '..'"},
      {[](v1::JobSpec& s) { s.set_device_type("/etc/shadow"); }, "device_type '/etc/shadow' is not one of this coordinator's"},
      {[](v1::JobSpec& s) { s.set_device_type("/dev/zero"); }, "is not one of this coordinator's: cpu,"},
      {[](v1::JobSpec& s) { s.set_device_type("profile.json"); }, "a calibrated profile file is for mapctl"},
      {[](v1::JobSpec& s) {
         s.clear_model();
         v1::Parameter* p = s.mutable_graph()->add_parameters();
         p->set_name("w");
         p->mutable_data()->set_source("/root/secret.pt");
       },
       "parameter 'w' of the submitted graph reads its values from a file"},
  };
  for (const Case& c : cases) {
    v1::JobSpec s = Spec();
    c.edit(s);
    auto bad = (*m)->Submit(s);
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(bad.status().message().find(c.says), std::string::npos) << bad.status();
  }
  EXPECT_EQ((*m)->List().size(), 1u);
}

TEST(JobManager, TheOperatorsLimitsBoundWhatAJobMayAskFor) {
  auto store = NewMemoryJobStore();
  FakeClock clock;
  auto m = JobManager::Create(store.get(), &clock);
  ASSERT_TRUE(m.ok());
  SpecLimits limits;
  limits.max_ranks = 4;
  limits.max_steps = 100;
  limits.max_graph_nodes = 3;
  limits.max_name_chars = 8;
  (*m)->SetSpecLimits(limits);
  v1::JobSpec spec = Spec();
  spec.set_ranks(8);
  EXPECT_NE((*m)->Submit(spec).status().message().find("from 1 to 4"), std::string::npos);
  spec = Spec();
  spec.mutable_training()->set_steps(101);
  EXPECT_NE((*m)->Submit(spec).status().message().find("from 1 to 100"), std::string::npos);
  spec = Spec();
  spec.set_name("a-long-name");
  EXPECT_NE((*m)->Submit(spec).status().message().find("give at most 8"), std::string::npos);
  spec = Spec();
  spec.clear_model();
  for (int i = 0; i < 4; ++i) spec.mutable_graph()->add_nodes()->set_name("n" + std::to_string(i));
  const absl::Status big = (*m)->Submit(spec).status();
  EXPECT_EQ(big.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(big.message().find("the graph has 4 nodes; this coordinator takes at most 3 (mapd --max-graph-nodes)"),
            std::string::npos) << big;
  EXPECT_TRUE((*m)->Submit(Spec()).ok());  // within every limit
  limits.max_ranks = 0;
  EXPECT_EQ(limits.Validate().code(), absl::StatusCode::kInvalidArgument);
}

TEST(JobSpec, DeviceTypesAreNamesFromTheCatalogueOrTheOperatorsDirectory) {
  const std::string dir = ::testing::TempDir() + "/mapd-profiles-" + std::to_string(getpid());
  std::filesystem::create_directories(dir + "/good");
  std::filesystem::create_directories(dir + "/bad");
  std::filesystem::create_directories(dir + "/again");
  DeviceProfile site = DeviceCatalogue().front();
  site.name = "site-gpu-under-test";
  site.source = "measured";
  ASSERT_TRUE(WriteStringToFileAtomic(dir + "/good/site.json", site.ToJson()).ok());
  ASSERT_TRUE(WriteStringToFileAtomic(dir + "/good/notes.txt", "not a profile").ok());  // not *.json: ignored
  ASSERT_TRUE(WriteStringToFileAtomic(dir + "/bad/broken.json", "{").ok());
  ASSERT_TRUE(WriteStringToFileAtomic(dir + "/again/h100.json", DeviceCatalogue().back().ToJson()).ok());
  v1::JobSpec spec = Spec();
  spec.set_device_type(site.name);
  EXPECT_EQ(ValidateJobSpec(spec).code(), absl::StatusCode::kInvalidArgument);  // not known yet
  ASSERT_TRUE(AddOperatorProfiles(dir + "/good").ok());
  EXPECT_TRUE(ValidateJobSpec(spec).ok());
  auto loaded = LoadDeviceProfile(site.name);
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->source, "measured");
  spec.set_device_type(dir + "/good/site.json");  // the file itself is still not a client's to name
  EXPECT_EQ(ValidateJobSpec(spec).code(), absl::StatusCode::kInvalidArgument);
  const absl::Status broken = AddOperatorProfiles(dir + "/bad");
  EXPECT_EQ(broken.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(broken.message().find("broken.json"), std::string::npos) << broken;
  const absl::Status twice = AddOperatorProfiles(dir + "/again");
  EXPECT_NE(twice.message().find("already known"), std::string::npos) << twice;
  EXPECT_EQ(AddOperatorProfiles(dir + "/missing").code(), absl::StatusCode::kNotFound);
  std::filesystem::remove_all(dir);
}

TEST(JobManager, StateMachineHasItsEdgesAndNoOthers) {
  EXPECT_TRUE(IsAllowedTransition(v1::PENDING, v1::PLANNING));
  EXPECT_TRUE(IsAllowedTransition(v1::PLANNING, v1::RUNNING));
  EXPECT_TRUE(IsAllowedTransition(v1::PLANNING, v1::PENDING));
  EXPECT_TRUE(IsAllowedTransition(v1::RUNNING, v1::RESTARTING));
  EXPECT_TRUE(IsAllowedTransition(v1::RESTARTING, v1::RUNNING));
  EXPECT_TRUE(IsAllowedTransition(v1::RUNNING, v1::SUCCEEDED));
  for (auto s : {v1::PENDING, v1::PLANNING, v1::RUNNING, v1::RESTARTING}) {
    EXPECT_TRUE(IsAllowedTransition(s, v1::FAILED));
    EXPECT_TRUE(IsAllowedTransition(s, v1::CANCELLED));
  }
  EXPECT_FALSE(IsAllowedTransition(v1::PENDING, v1::RUNNING));
  EXPECT_FALSE(IsAllowedTransition(v1::PENDING, v1::SUCCEEDED));
  EXPECT_FALSE(IsAllowedTransition(v1::PLANNING, v1::SUCCEEDED));
  for (auto done : {v1::SUCCEEDED, v1::FAILED, v1::CANCELLED}) {
    for (auto to : {v1::PENDING, v1::PLANNING, v1::RUNNING, v1::SUCCEEDED, v1::FAILED, v1::CANCELLED, v1::RESTARTING}) {
      EXPECT_FALSE(IsAllowedTransition(done, to)) << v1::JobState_Name(done) << " -> " << v1::JobState_Name(to);
    }
  }
}

TEST(JobManager, ALifeAndItsHistorySurviveARestart) {
  auto store = NewMemoryJobStore();
  FakeClock clock;
  int64_t id = 0;
  {
    auto m = JobManager::Create(store.get(), &clock);
    ASSERT_TRUE(m.ok());
    id = (*m)->Submit(Spec())->id();
    auto second = (*m)->Submit(Spec());
    ASSERT_TRUE(second.ok());
    EXPECT_EQ((*m)->ReportProgress(id, {1, 4.0, 100, 1 << 20}).status().code(), absl::StatusCode::kFailedPrecondition);
    ASSERT_TRUE((*m)->Transition(id, v1::PLANNING, "planning").ok());
    EXPECT_EQ((*m)->Transition(id, v1::SUCCEEDED, "too soon").status().code(), absl::StatusCode::kFailedPrecondition);
    clock.Advance(2);
    ASSERT_TRUE((*m)->Transition(id, v1::RUNNING, "planned: mesh 2", [](v1::Job& j) { j.set_plan_summary("mesh 2"); }).ok());
    ASSERT_TRUE((*m)->ReportProgress(id, {1, 4.1, 100, 1 << 20}).ok());
    ASSERT_TRUE((*m)->ReportProgress(id, {2, 3.9, 110, 1 << 20}).ok());
    ASSERT_TRUE((*m)->Cancel(second->id()).ok());
    EXPECT_EQ((*m)->Cancel(second->id()).status().code(), absl::StatusCode::kFailedPrecondition);
  }
  // A new manager over the same store: every job, its state and its events.
  auto m = JobManager::Create(store.get(), &clock);
  ASSERT_TRUE(m.ok());
  auto jobs = (*m)->List();
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0].state(), v1::RUNNING);
  EXPECT_EQ(jobs[0].step(), 2);
  EXPECT_DOUBLE_EQ(jobs[0].loss(), 3.9);
  EXPECT_EQ(jobs[0].plan_summary(), "mesh 2");
  EXPECT_EQ(jobs[1].state(), v1::CANCELLED);
  auto events = (*m)->Events(id);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 5u);  // submitted, planning, running, step 1, step 2
  EXPECT_EQ((*events)[2].message(), "planned: mesh 2");
  EXPECT_EQ((*events)[4].step(), 2);
  for (size_t k = 0; k < events->size(); ++k) EXPECT_EQ((*events)[k].seq(), static_cast<int64_t>(k + 1));
  // New jobs continue the numbering; finishing works after the restart.
  EXPECT_EQ((*m)->Submit(Spec())->id(), 3);
  ASSERT_TRUE((*m)->Transition(id, v1::SUCCEEDED, "done").ok());
  EXPECT_EQ((*m)->Get(42).status().code(), absl::StatusCode::kNotFound);
}

TEST(JobManager, FinishedJobsAreDeletedByAgeAndCountAndTheirIdsNeverReturn) {
  const std::string dir = ::testing::TempDir() + "/mapd-retention-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  auto store = OpenSqliteJobStore(dir + "/jobs.db");
  ASSERT_TRUE(store.ok()) << store.status();
  FakeClock clock;
  {
    auto m = JobManager::Create(store->get(), &clock);
    ASSERT_TRUE(m.ok());
    for (int i = 0; i < 6; ++i) ASSERT_TRUE((*m)->Submit(Spec()).ok());  // jobs 1..6
    ASSERT_TRUE((*m)->Cancel(1).ok());
    ASSERT_TRUE((*m)->Cancel(2).ok());
    clock.Advance(100);
    ASSERT_TRUE((*m)->Cancel(3).ok());
    ASSERT_TRUE((*m)->Cancel(4).ok());
    clock.Advance(10);
    ASSERT_TRUE((*m)->Cancel(6).ok());  // the highest id, finished last
    RetentionOptions keep;
    keep.finished_job_seconds = 50;  // 1 and 2 finished 110 s ago; 3, 4 and 6 10 s ago or less
    keep.max_finished_jobs = 10;
    auto pruned = (*m)->PruneFinished(keep);
    ASSERT_TRUE(pruned.ok()) << pruned.status();
    EXPECT_EQ(*pruned, 2);
    EXPECT_EQ((*m)->Get(1).status().code(), absl::StatusCode::kNotFound);
    EXPECT_EQ((*m)->Events(2).status().code(), absl::StatusCode::kNotFound);
    keep.max_finished_jobs = 1;  // by count: the longest-finished go first, 6 stays
    pruned = (*m)->PruneFinished(keep);
    ASSERT_TRUE(pruned.ok());
    EXPECT_EQ(*pruned, 2);
    std::vector<int64_t> ids;
    for (const v1::Job& job : (*m)->List()) ids.push_back(job.id());
    EXPECT_EQ(ids, (std::vector<int64_t>{5, 6}));  // 5 is PENDING: never deleted
    keep.max_finished_jobs = 0;
    ASSERT_TRUE((*m)->PruneFinished(keep).ok());  // 6, the highest id, goes too
    EXPECT_EQ((*m)->List().size(), 1u);
  }
  // Restarted over the same store: the deleted jobs stay deleted, and the next id is past every
  // id ever given (6), not the highest kept (5).
  auto m = JobManager::Create(store->get(), &clock);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ((*m)->List().size(), 1u);
  EXPECT_EQ((*m)->Submit(Spec())->id(), 7);
  RetentionOptions bad;
  bad.finished_job_seconds = 0;
  EXPECT_EQ(bad.Validate().code(), absl::StatusCode::kInvalidArgument);
  std::filesystem::remove_all(dir);
}

TEST(JobManager, ALongJobsHistoryKeepsAboutAThousandSteps) {
  // Probe of issue 18: one report of 20,000 steps wrote 20,000 events. A 20,000-step job reports
  // each step: its step and loss follow every one, its history keeps every 20th.
  auto store = NewMemoryJobStore();
  FakeClock clock;
  auto m = JobManager::Create(store.get(), &clock);
  ASSERT_TRUE(m.ok()) << m.status();
  v1::JobSpec spec = Spec();
  spec.mutable_training()->set_steps(20000);
  ASSERT_TRUE((*m)->Submit(spec).ok());
  ASSERT_TRUE((*m)->Transition(1, v1::PLANNING, "planning").ok());
  ASSERT_TRUE((*m)->Transition(1, v1::RUNNING, "running").ok());
  const size_t before = (*m)->Events(1)->size();
  for (int64_t s = 1; s <= 20000; ++s) {
    JobProgress p;
    p.step = s;
    p.loss = 1.0 / static_cast<double>(s);
    auto job = (*m)->ReportProgress(1, p);
    ASSERT_TRUE(job.ok()) << job.status();
    ASSERT_EQ(job->step(), s);
  }
  EXPECT_EQ((*m)->Get(1)->step(), 20000);
  const auto events = *(*m)->Events(1);
  EXPECT_EQ(events.size() - before, 1001u);  // step 1, then every 20th to 20,000
  EXPECT_EQ(events.back().step(), 20000);
}

TEST(JobManager, WatchersWakeOnNewEvents) {
  auto store = NewMemoryJobStore();
  FakeClock clock;
  auto m = JobManager::Create(store.get(), &clock);
  ASSERT_TRUE(m.ok());
  const int64_t id = (*m)->Submit(Spec())->id();
  auto none = (*m)->WaitForEvents(id, 1, 0.01);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  std::thread later([&] { (void)(*m)->Transition(id, v1::PLANNING, "planning"); });
  auto woke = (*m)->WaitForEvents(id, 1, 30);
  later.join();
  ASSERT_TRUE(woke.ok());
  ASSERT_EQ(woke->size(), 1u);
  EXPECT_EQ((*woke)[0].state(), v1::PLANNING);
}

}  // namespace
}  // namespace mapd

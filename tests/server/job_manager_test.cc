// The job manager: specs validated at submission, the state machine's edges and no others,
// progress only while running, cancel, history reloaded by a new manager over the same store,
// and watchers woken by new events.
#include "server/jobs/job_manager.h"

#include <gtest/gtest.h>

#include <thread>

namespace mapd {
namespace {

v1::JobSpec Spec() {
  v1::JobSpec s;
  s.set_model("gpt2:layers=2,hidden=32,heads=4,vocab=64,seq=8,batch=4");
  s.set_steps(10);
  s.set_ranks(2);
  return s;
}

TEST(JobManager, SubmitValidatesAndQueues) {
  auto store = NewMemoryJobStore();
  FakeClock clock;
  auto m = JobManager::Create(store.get(), &clock);
  ASSERT_TRUE(m.ok()) << m.status();
  auto job = (*m)->Submit(Spec());
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->id(), 1);
  EXPECT_EQ(job->state(), v1::PENDING);
  EXPECT_EQ(job->spec().optimizer(), "adamw");  // defaults filled in
  EXPECT_EQ(job->spec().micro_batches(), "1");
  EXPECT_EQ(job->spec().precision(), "auto");
  EXPECT_EQ(job->spec().pipeline_stages(), "1");
  EXPECT_EQ(job->spec().name(), Spec().model());
  EXPECT_EQ((*m)->NextPending()->id(), 1);
  // Bad specs: INVALID_ARGUMENT naming the field; nothing queued.
  struct Case {
    std::function<void(v1::JobSpec&)> edit;
    std::string says;
  };
  const Case cases[] = {
      {[](v1::JobSpec& s) { s.set_steps(0); }, "steps is 0"},
      {[](v1::JobSpec& s) { s.set_ranks(-1); }, "ranks is -1"},
      {[](v1::JobSpec& s) { s.clear_model(); }, "not neither"},
      {[](v1::JobSpec& s) { s.add_mesh(3); }, "mesh 3 has more devices than ranks (2)"},
      {[](v1::JobSpec& s) { s.add_mesh(1); }, "mesh 1 has 1 devices but ranks is 2"},
      // Probes of issue 18: sizes that overflow, names of megabytes.
      {[](v1::JobSpec& s) { s.set_ranks(4), s.add_mesh(int64_t{1} << 32), s.add_mesh(int64_t{1} << 32); }, "has more devices than ranks (4)"},
      {[](v1::JobSpec& s) { s.set_name(std::string(3 << 20, 'n')); }, "the job's name has 3145728 characters; give at most 256"},
      {[](v1::JobSpec& s) { s.set_model(std::string(5000, 'g')); }, "the model spec has 5000 characters"},
      {[](v1::JobSpec& s) { s.set_ranks(1 << 20); }, "from 1 to 65536"},
      {[](v1::JobSpec& s) { s.set_steps(int64_t{1} << 62); }, "give a number of steps from 1 to"},
      {[](v1::JobSpec& s) { s.set_optimizer("lamb"); }, "optimizer 'lamb'"},
      {[](v1::JobSpec& s) { s.set_zero("4"); }, "zero '4'"},
      {[](v1::JobSpec& s) { s.set_micro_batches("0"); }, "micro_batches '0'"},
      {[](v1::JobSpec& s) { s.set_micro_batches("two"); }, "micro_batches 'two'"},
      {[](v1::JobSpec& s) { s.set_precision("fp8"); }, "precision 'fp8'"},
      {[](v1::JobSpec& s) { s.set_pipeline_stages("0"); }, "pipeline_stages '0' is not auto or a count from 1 to ranks (2)"},
      {[](v1::JobSpec& s) { s.set_pipeline_stages("3"); }, "pipeline_stages '3'"},
      {[](v1::JobSpec& s) { s.set_pipeline_stages("2"), s.add_mesh(2); }, "a mesh and pipeline_stages 2"},
      {[](v1::JobSpec& s) { s.set_pipeline_stages("2"), s.set_device("cuda"); }, "pipeline_stages 2 on device cuda"},
      {[](v1::JobSpec& s) { s.set_data("s3://bucket"); }, "data 's3://bucket'"},
      // Probes of issue 18: files named by clients.
      {[](v1::JobSpec& s) { s.set_data("text:/etc/passwd"); }, "relative to the workers' --data-root"},
      {[](v1::JobSpec& s) { s.set_data("text:../../../../etc/passwd"); }, "without '..'"},
      {[](v1::JobSpec& s) { s.set_data("tokens:a/../../b"); }, "without '..'"},
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

TEST(JobManager, ALongJobsHistoryKeepsAboutAThousandSteps) {
  // Probe of issue 18: one report of 20,000 steps wrote 20,000 events. A 20,000-step job reports
  // each step: its step and loss follow every one, its history keeps every 20th.
  auto store = NewMemoryJobStore();
  FakeClock clock;
  auto m = JobManager::Create(store.get(), &clock);
  ASSERT_TRUE(m.ok()) << m.status();
  v1::JobSpec spec = Spec();
  spec.set_steps(20000);
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

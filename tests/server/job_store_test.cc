// The job stores: a write is a job and its event together; a reopened SQLite store gives back
// every job and event; a taken event number is refused and leaves the job as it was.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "server/store/job_store.h"

namespace mapd {
namespace {

v1::Job MakeJob(int64_t id, v1::JobState state) {
  v1::Job job;
  job.set_id(id);
  job.set_state(state);
  job.mutable_spec()->set_model("gpt2:layers=2");
  job.mutable_spec()->mutable_training()->set_steps(10);
  return job;
}

v1::JobEvent MakeEvent(int64_t job_id, int64_t seq, const std::string& message) {
  v1::JobEvent e;
  e.set_job_id(job_id);
  e.set_seq(seq);
  e.set_message(message);
  return e;
}

void ExerciseStore(JobStore& store) {
  ASSERT_TRUE(store.Write(MakeJob(1, v1::PENDING), MakeEvent(1, 1, "submitted")).ok());
  ASSERT_TRUE(store.Write(MakeJob(2, v1::PENDING), MakeEvent(2, 1, "submitted")).ok());
  ASSERT_TRUE(store.Write(MakeJob(1, v1::RUNNING), MakeEvent(1, 2, "running")).ok());
  // A taken event number: refused, and the job is not replaced.
  const absl::Status dup = store.Write(MakeJob(1, v1::FAILED), MakeEvent(1, 2, "again"));
  EXPECT_EQ(dup.code(), absl::StatusCode::kAlreadyExists) << dup;
  auto jobs = store.LoadJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ((*jobs)[0].id(), 1);
  EXPECT_EQ((*jobs)[0].state(), v1::RUNNING);
  EXPECT_EQ((*jobs)[1].state(), v1::PENDING);
  auto events = store.LoadEvents(1, 0);
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ((*events)[0].message(), "submitted");
  EXPECT_EQ((*events)[1].message(), "running");
  auto after = store.LoadEvents(1, 1);
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after->size(), 1u);
  EXPECT_EQ((*after)[0].seq(), 2);
  EXPECT_TRUE(store.LoadEvents(99, 0)->empty());
}

// A new directory for one test's store, named for it and this process (removed by the test).
std::filesystem::path FreshDir(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / (name + "-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(JobStore, MemoryStore) {
  auto store = NewMemoryJobStore();
  ExerciseStore(*store);
}

// One coordinator a store: a second open while the first holds it is refused, naming the store
// and the holder's process; once the first closes, the store opens again.
TEST(JobStore, ASqliteStoreServesOneProcessAtATime) {
  const std::filesystem::path dir = FreshDir("mapd-store-lock");
  const std::string path = (dir / "jobs.db").string();
  {
    auto first = OpenSqliteJobStore(path);
    ASSERT_TRUE(first.ok()) << first.status();
    auto second = OpenSqliteJobStore(path);  // (flock: another open file conflicts, in this process too)
    ASSERT_FALSE(second.ok());
    EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(second.status().message()), testing::HasSubstr("the job store " + path + " is in use by another process (pid " +
                                                                           std::to_string(getpid()) + ")"));
    EXPECT_THAT(std::string(second.status().message()), testing::HasSubstr("another --store"));
  }
  auto reopened = OpenSqliteJobStore(path);
  EXPECT_TRUE(reopened.ok()) << reopened.status();
  std::filesystem::remove_all(dir);
}

TEST(JobStore, SqliteStoreSurvivesReopening) {
  const std::filesystem::path dir = FreshDir("mapd-store");
  const std::string path = (dir / "jobs.db").string();
  {
    auto store = OpenSqliteJobStore(path);
    ASSERT_TRUE(store.ok()) << store.status();
    ExerciseStore(**store);
  }
  auto again = OpenSqliteJobStore(path);
  ASSERT_TRUE(again.ok()) << again.status();
  auto jobs = (*again)->LoadJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ((*jobs)[0].state(), v1::RUNNING);
  EXPECT_EQ((*jobs)[0].spec().model(), "gpt2:layers=2");
  EXPECT_EQ((*again)->LoadEvents(1, 0)->size(), 2u);
  // WAL mode: the write-ahead log sits beside the database.
  EXPECT_TRUE(std::filesystem::exists(path + "-wal") || std::filesystem::exists(path));
  std::filesystem::remove_all(dir);
}

// A store written before the training fields moved into JobSpec.training: those fields were
// JobSpec's own (steps 4, lr 10, data 11, ...), which TrainingConfig keeps, so an old row reads
// them into `training`.
TEST(JobStore, SpecsWrittenBeforeTrainingConfigReadTheirTrainingFields) {
  v1::TrainingConfig old_fields;  // as the old JobSpec held them, at the same numbers
  old_fields.set_steps(7);
  old_fields.set_lr(0.01);
  old_fields.set_data("text:corpus.txt");
  old_fields.set_eval_every(3);
  v1::JobSpec current;
  current.set_model("gpt2:layers=2");
  current.set_ranks(2);
  v1::JobSpec legacy;  // the bytes an old coordinator wrote: its fields and the training ones side by side
  ASSERT_TRUE(legacy.ParseFromString(current.SerializeAsString() + old_fields.SerializeAsString()));
  ASSERT_FALSE(legacy.has_training());  // the numbers are unknown to JobSpec now
  const std::filesystem::path dir = FreshDir("mapd-legacy");
  const std::string path = (dir / "jobs.db").string();
  {
    auto store = OpenSqliteJobStore(path);
    ASSERT_TRUE(store.ok()) << store.status();
    v1::Job job;
    job.set_id(1);
    job.set_state(v1::PENDING);
    *job.mutable_spec() = legacy;
    ASSERT_TRUE((*store)->Write(job, MakeEvent(1, 1, "submitted")).ok());
  }
  auto again = OpenSqliteJobStore(path);
  ASSERT_TRUE(again.ok()) << again.status();
  auto jobs = (*again)->LoadJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 1u);
  const v1::JobSpec& spec = (*jobs)[0].spec();
  EXPECT_EQ(spec.model(), "gpt2:layers=2");
  EXPECT_EQ(spec.ranks(), 2);
  EXPECT_EQ(spec.training().steps(), 7);
  EXPECT_EQ(spec.training().lr(), 0.01);
  EXPECT_EQ(spec.training().data(), "text:corpus.txt");
  EXPECT_EQ(spec.training().eval_every(), 3);
  EXPECT_TRUE(spec.GetReflection()->GetUnknownFields(spec).empty());
  std::filesystem::remove_all(dir);
}

TEST(JobStore, AnUnwritablePathIsAClearError) {
  auto store = OpenSqliteJobStore("/nonexistent-dir/jobs.db");
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(store.status().message().find("/nonexistent-dir/jobs.db"), std::string::npos) << store.status();
}

}  // namespace
}  // namespace mapd

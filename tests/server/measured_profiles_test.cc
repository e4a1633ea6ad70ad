// Plans costed on what will run them: a job without a device_type is planned on its workers'
// measured profile (the slowest where they differ, with the smallest device's memory), on the
// catalogue's cpu where one of them sent none or for cuda; the registry keeps a worker's profile
// only once it is checked; and the dispatcher plans on it.
#include "server/dispatch/measured_profiles.h"

#include <gtest/gtest.h>

#include "planner/profile/device_profile_proto.h"
#include "server/dispatch/dispatcher.h"
#include "server/store/job_store.h"
#include "server/workers/worker_registry.h"

namespace mapd {
namespace {

v1::Worker Measured(const std::string& host, double fp32, int64_t memory) {
  v1::Worker w;
  w.set_id("w-" + host);
  w.set_hostname(host);
  w.set_state(v1::ALIVE);
  v1::Device* d = w.add_devices();
  d->set_name("cpu:0");
  d->set_memory_bytes(memory);
  DeviceProfile p = *FindDeviceProfile("cpu");
  p.source = "measured";
  p.fp32_flops = fp32;
  *w.mutable_profile() = DeviceProfileToProto(p);
  return w;
}

// A registration of one 1 GiB CPU device with a measured profile.
v1::RegisterWorkerRequest MeasuredRegistration(const std::string& host) {
  v1::RegisterWorkerRequest r;
  r.set_hostname(host);
  v1::Device* d = r.add_devices();
  d->set_name("cpu:0");
  d->set_memory_bytes(1LL << 30);
  *r.mutable_profile() = Measured(host, 1e11, 1LL << 30).profile();
  return r;
}

TEST(MeasuredProfiles, AJobWithoutADeviceTypeIsCostedOnItsWorkersSlowestProfile) {
  v1::JobSpec spec;
  spec.set_ranks(2);
  const std::vector<v1::Worker> workers = {Measured("fast", 2e11, 4LL << 30), Measured("slow", 1e11, 2LL << 30)};
  const v1::JobSpec costed = CostedSpec(spec, workers);
  ASSERT_EQ(costed.device_type().rfind("measured-slow-", 0), 0u) << costed.device_type();
  const DeviceProfile* p = FindDeviceProfile(costed.device_type());
  ASSERT_NE(p, nullptr);
  EXPECT_DOUBLE_EQ(p->fp32_flops, 1e11);
  EXPECT_EQ(p->memory_bytes, 2LL << 30);  // the smallest device's: the default budget
  // Named by the user: as it is.
  spec.set_device_type("h100-80g");
  EXPECT_EQ(CostedSpec(spec, workers).device_type(), "h100-80g");
}

TEST(MeasuredProfiles, TheCataloguesCpuWhereAWorkerSentNoneOrForCuda) {
  v1::JobSpec spec;
  spec.set_ranks(2);
  std::vector<v1::Worker> workers = {Measured("a", 2e11, 1LL << 30), Measured("b", 2e11, 1LL << 30)};
  workers[1].clear_profile();
  EXPECT_EQ(CostedSpec(spec, workers).device_type(), "cpu");
  workers[1].set_state(v1::LOST);  // a lost worker runs nothing
  EXPECT_EQ(CostedSpec(spec, workers).device_type().rfind("measured-a-", 0), 0u);
  spec.set_device("cuda");
  EXPECT_EQ(CostedSpec(spec, workers).device_type(), "cpu");
  EXPECT_EQ(CostedSpec(spec, {}).device_type(), "cpu");
}

TEST(MeasuredProfiles, TheRegistryKeepsACheckedProfileAndRefusesABadOne) {
  FakeClock clock;
  WorkerRegistry registry(LeaseOptions{}, &clock);
  v1::RegisterWorkerRequest r = MeasuredRegistration("h");
  ASSERT_TRUE(registry.Register(r).ok());
  ASSERT_TRUE(registry.List().front().has_profile());
  EXPECT_DOUBLE_EQ(registry.List().front().profile().fp32_flops(), 1e11);
  r.mutable_profile()->set_fp32_flops(-1);
  auto refused = registry.Register(r);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("worker on 'h'"), absl::string_view::npos) << refused.status();
}

TEST(MeasuredProfiles, TheDispatcherPlansOnTheWorkersProfile) {
  FakeClock clock;
  auto store = NewMemoryJobStore();
  auto jobs = *JobManager::Create(store.get(), &clock);
  WorkerRegistry workers(LeaseOptions{}, &clock);
  std::vector<std::string> planned_on;
  Dispatcher dispatcher(jobs.get(), &workers, DispatchOptions{}, [&](const v1::JobSpec& spec) -> absl::StatusOr<RunnablePlan> {
    planned_on.push_back(spec.device_type());
    return absl::FailedPreconditionError("(not planned here)");
  });
  v1::RegisterWorkerRequest r = MeasuredRegistration("h");
  ASSERT_TRUE(workers.Register(r).ok());
  v1::JobSpec spec;
  spec.set_model("gpt2:layers=1,hidden=32");
  spec.mutable_training()->set_steps(1);
  spec.set_ranks(1);
  ASSERT_TRUE(jobs->Submit(spec).ok());
  dispatcher.Tick();
  ASSERT_FALSE(planned_on.empty());
  EXPECT_EQ(planned_on.front().rfind("measured-h-", 0), 0u) << planned_on.front();
  EXPECT_EQ(dispatcher.CostedSpec(spec).device_type(), planned_on.front());
}

}  // namespace
}  // namespace mapd

// Worker leases: registration gives an id and the timeouts; heartbeats renew the lease; a worker
// silent for longer than the lease is LOST once, and must register again. Over gRPC the same
// with the bearer token.
#include "server/workers/worker_registry.h"

#include <gtest/gtest.h>

#include "proto/mapd/v1/workers.grpc.pb.h"
#include "server/api/server.h"

namespace mapd {
namespace {

v1::RegisterWorkerRequest Cpu(const std::string& host) {
  v1::RegisterWorkerRequest r;
  r.set_hostname(host);
  auto* d = r.add_devices();
  d->set_name("cpu");
  d->set_memory_bytes(8LL << 30);
  return r;
}

TEST(WorkerRegistry, LeasesRenewAndRunOut) {
  FakeClock clock;
  LeaseOptions o;
  o.lease_seconds = 5;
  o.heartbeat_seconds = 1;
  WorkerRegistry reg(o, &clock);
  auto a = reg.Register(Cpu("a"));
  auto b = reg.Register(Cpu("b"));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->worker_id(), "w-1");
  EXPECT_EQ(b->worker_id(), "w-2");
  EXPECT_DOUBLE_EQ(a->lease_seconds(), 5);
  clock.Advance(4);
  ASSERT_TRUE(reg.Heartbeat("w-1", a->session()).ok());  // a renews, b does not
  clock.Advance(2);
  EXPECT_EQ(reg.ExpireLeases(), std::vector<std::string>{"w-2"});
  EXPECT_TRUE(reg.ExpireLeases().empty());  // lost once
  auto list = reg.List();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].state(), v1::ALIVE);
  EXPECT_EQ(list[1].state(), v1::LOST);
  EXPECT_EQ(reg.Heartbeat("w-2", b->session()).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(reg.Heartbeat("w-9", b->session()).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(reg.Heartbeat("nonsense", b->session()).status().code(), absl::StatusCode::kNotFound);
  // Coming back means registering again, with a new id.
  EXPECT_EQ(reg.Register(Cpu("b"))->worker_id(), "w-3");
  v1::RegisterWorkerRequest none;
  none.set_hostname("c");
  EXPECT_EQ(reg.Register(none).status().code(), absl::StatusCode::kInvalidArgument);
  LeaseOptions bad;
  bad.lease_seconds = 1;
  bad.heartbeat_seconds = 2;
  EXPECT_EQ(bad.Validate().code(), absl::StatusCode::kInvalidArgument);
}

TEST(WorkerRegistry, ACallWithoutTheSessionIsNotTheWorkers) {
  // Probe of issue 18: a heartbeat as w-1 with an empty session received w-1's assignment.
  FakeClock clock;
  WorkerRegistry reg(LeaseOptions{}, &clock);
  auto a = reg.Register(Cpu("a"));
  ASSERT_TRUE(a.ok());
  const auto anonymous = reg.Heartbeat(a->worker_id(), "");
  EXPECT_EQ(anonymous.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(anonymous.status().message().find("without its session"), std::string::npos) << anonymous.status();
  EXPECT_EQ(reg.CheckSession(a->worker_id(), "").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(reg.CheckSession(a->worker_id(), std::string(32, '0')).code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(reg.Heartbeat(a->worker_id(), a->session()).ok());
}

TEST(WorkerRegistry, ClaimsOverTheOperatorsLimitsAreRefusedAndLostRegistrationsDoNotPileUp) {
  // Probes of issue 18: a worker stating 8 devices of 1 PiB each; 2,000 junk registrations kept
  // forever as LOST.
  FakeClock clock;
  RegistrationLimits limits;
  limits.max_devices_per_worker = 4;
  limits.max_device_memory_bytes = int64_t{80} << 30;
  limits.max_workers = 16;
  limits.lost_retention_seconds = 60;
  ASSERT_TRUE(limits.Validate().ok());
  WorkerRegistry reg(LeaseOptions{}, &clock, limits);
  v1::RegisterWorkerRequest huge = Cpu("huge");
  huge.mutable_devices(0)->set_memory_bytes(int64_t{1} << 50);
  auto st = reg.Register(huge).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("--max-device-memory"), std::string::npos) << st;
  v1::RegisterWorkerRequest many = Cpu("many");
  for (int i = 0; i < 7; ++i) *many.add_devices() = many.devices(0);
  st = reg.Register(many).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("registers 8 devices"), std::string::npos) << st;
  EXPECT_EQ(reg.Register(Cpu(std::string(300, 'h'))).status().code(), absl::StatusCode::kInvalidArgument);
  v1::RegisterWorkerRequest long_name = Cpu("n");
  long_name.mutable_devices(0)->set_name(std::string(100, 'd'));
  EXPECT_EQ(reg.Register(long_name).status().code(), absl::StatusCode::kInvalidArgument);
  // 2,000 registrations that never heartbeat: at most 16 kept; while 16 are alive, no more.
  int refused = 0;
  for (int i = 0; i < 2000; ++i) {
    auto r = reg.Register(Cpu("junk"));
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
      ++refused;
    }
  }
  EXPECT_EQ(refused, 2000 - 16);
  EXPECT_EQ(reg.List().size(), 16u);
  clock.Advance(6);  // every lease runs out: LOST, and a new registration takes the longest lost's place
  EXPECT_EQ(reg.ExpireLeases().size(), 16u);
  auto fresh = reg.Register(Cpu("real"));
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_EQ(reg.List().size(), 16u);
  clock.Advance(61);  // past the retention: the lost are dropped, the live one stays (it beats)
  ASSERT_TRUE(reg.Heartbeat(fresh->worker_id(), fresh->session()).ok());
  reg.ExpireLeases();
  ASSERT_EQ(reg.List().size(), 1u);
  EXPECT_EQ(reg.List()[0].id(), fresh->worker_id());
  RegistrationLimits bad;
  bad.max_workers = 0;
  EXPECT_EQ(bad.Validate().code(), absl::StatusCode::kInvalidArgument);
}

TEST(WorkerRegistry, AnIdFromAnEarlierCoordinatorIsNotTakenForAnotherWorkers) {
  // Ids restart at w-1 with a restarted coordinator: a worker still holding "w-1" from the old
  // one must not renew the lease of (or report as) the worker that registered as w-1 first.
  FakeClock clock;
  WorkerRegistry old_coordinator(LeaseOptions{}, &clock);
  auto alpha = old_coordinator.Register(Cpu("alpha"));
  ASSERT_TRUE(alpha.ok());
  EXPECT_EQ(alpha->session().size(), 32u);
  WorkerRegistry restarted(LeaseOptions{}, &clock);
  auto beta = restarted.Register(Cpu("beta"));
  ASSERT_TRUE(beta.ok());
  ASSERT_EQ(beta->worker_id(), alpha->worker_id());
  EXPECT_NE(beta->session(), alpha->session());
  auto stale = restarted.Heartbeat(alpha->worker_id(), alpha->session());
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(stale.status().message().find("belongs to another registration now"), std::string::npos) << stale.status();
  EXPECT_EQ(restarted.CheckSession(alpha->worker_id(), alpha->session()).code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(restarted.Heartbeat(beta->worker_id(), beta->session()).ok());
  EXPECT_TRUE(restarted.CheckSession(beta->worker_id(), beta->session()).ok());
  EXPECT_EQ(restarted.CheckSession("w-7", beta->session()).code(), absl::StatusCode::kNotFound);
  // Registering again gives alpha an id of its own.
  EXPECT_EQ(restarted.Register(Cpu("alpha"))->worker_id(), "w-2");
}

TEST(WorkerService, RegisterHeartbeatAndListOverGrpc) {
  ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.token = "t";
  o.worker_token = "w";
  o.lease.lease_seconds = 0.4;
  o.lease.heartbeat_seconds = 0.1;
  auto server = MapdServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = v1::WorkerService::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string((*server)->port()), grpc::InsecureChannelCredentials()));
  v1::RegisterWorkerResponse reg;
  {
    grpc::ClientContext ctx;
    v1::RegisterWorkerResponse out;
    EXPECT_EQ(stub->Register(&ctx, Cpu("h"), &out).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    // Probe of issue 18: a client's token used to register a worker.
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer t");
    v1::RegisterWorkerResponse out;
    EXPECT_EQ(stub->Register(&ctx, Cpu("h"), &out).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer w");
    ASSERT_TRUE(stub->Register(&ctx, Cpu("h"), &reg).ok());
  }
  {
    // Probe of issue 18: a forged Report "finished" for w-1 without its session.
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer w");
    v1::ReportRequest forged;
    forged.set_worker_id(reg.worker_id());
    forged.set_job_id(1);
    forged.set_finished(true);
    v1::ReportResponse out;
    const grpc::Status st = stub->Report(&ctx, forged, &out);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND) << st.error_message();
    EXPECT_NE(st.error_message().find("session"), std::string::npos) << st.error_message();
  }
  {
    // ...and a worker's token used to list the workers (a client's call).
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer w");
    v1::ListWorkersResponse list;
    EXPECT_EQ(stub->List(&ctx, {}, &list).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  // Silent past the lease: the coordinator's lease thread declares it lost.
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer w");
  v1::HeartbeatRequest hb;
  hb.set_worker_id(reg.worker_id());
  hb.set_session(reg.session());
  v1::HeartbeatResponse out;
  const grpc::Status st = stub->Heartbeat(&ctx, hb, &out);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << st.error_message();
  EXPECT_NE(st.error_message().find("register again"), std::string::npos);
  grpc::ClientContext lctx;
  lctx.AddMetadata("authorization", "Bearer t");
  v1::ListWorkersResponse list;
  ASSERT_TRUE(stub->List(&lctx, {}, &list).ok());
  ASSERT_EQ(list.workers_size(), 1);
  EXPECT_EQ(list.workers(0).state(), v1::LOST);
}

TEST(WorkerService, ACoordinatorWithoutAWorkersTokenTakesNoWorker) {
  ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.token = "t";
  auto server = MapdServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = v1::WorkerService::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string((*server)->port()), grpc::InsecureChannelCredentials()));
  for (const char* token : {"t", "", "anything"}) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", std::string("Bearer ") + token);
    v1::RegisterWorkerResponse out;
    const grpc::Status st = stub->Register(&ctx, Cpu("h"), &out);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << token;
    EXPECT_NE(st.error_message().find("--worker-token-file"), std::string::npos) << st.error_message();
  }
}

}  // namespace
}  // namespace mapd

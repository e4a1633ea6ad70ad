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
  ASSERT_TRUE(reg.Heartbeat("w-1").ok());  // a renews, b does not
  clock.Advance(2);
  EXPECT_EQ(reg.ExpireLeases(), std::vector<std::string>{"w-2"});
  EXPECT_TRUE(reg.ExpireLeases().empty());  // lost once
  auto list = reg.List();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].state(), v1::ALIVE);
  EXPECT_EQ(list[1].state(), v1::LOST);
  EXPECT_EQ(reg.Heartbeat("w-2").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(reg.Heartbeat("w-9").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(reg.Heartbeat("nonsense").status().code(), absl::StatusCode::kNotFound);
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
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer t");
    ASSERT_TRUE(stub->Register(&ctx, Cpu("h"), &reg).ok());
  }
  // Silent past the lease: the coordinator's lease thread declares it lost.
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer t");
  v1::HeartbeatRequest hb;
  hb.set_worker_id(reg.worker_id());
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

}  // namespace
}  // namespace mapd

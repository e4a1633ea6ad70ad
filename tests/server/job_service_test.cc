// The coordinator over real gRPC on loopback (port 0): auth on every job RPC but not on health,
// submit/get/list/events/cancel, malformed submissions refused without harming other jobs, a
// watch stream that ends when the job does, and a restarted coordinator (same SQLite file)
// listing every job with its history.
#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "proto/grpc/health/v1/health.grpc.pb.h"
#include "proto/mapd/v1/job_service.grpc.pb.h"
#include "proto/mapd/v1/planner_service.grpc.pb.h"
#include "server/api/server.h"
#include "model/ir/graph.h"
#include "model/zoo/zoo.h"
#include "server/jobs/job_planner.h"
#include "server/api/watch_stream.h"

namespace mapd {
namespace {

constexpr const char* kToken = "test-token-123";

// A coordinator on a free loopback port, its store in memory, without the dispatcher: these tests
// move jobs along by hand (dispatcher_test.cc has the dispatcher).
ServerOptions TestOptions() {
  ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.token = kToken;
  o.dispatch = false;
  return o;
}

std::unique_ptr<MapdServer> StartServer(const std::string& store) {
  ServerOptions o = TestOptions();
  o.store_path = store;
  auto s = MapdServer::Start(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

std::shared_ptr<grpc::Channel> Connect(int port) {
  return grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials());
}

void Authorize(grpc::ClientContext& ctx, const std::string& token = kToken) {
  ctx.AddMetadata("authorization", "Bearer " + token);
}

v1::JobSpec Spec() {
  v1::JobSpec s;
  s.set_model("gpt2:layers=2,hidden=32,heads=4,vocab=64,seq=8,batch=4");
  s.mutable_training()->set_steps(5);
  s.set_ranks(2);
  return s;
}

class JobServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("mapd-svc-" + std::to_string(getpid()) + "-" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Db() const { return (dir_ / "jobs.db").string(); }
  std::filesystem::path dir_;
};

TEST_F(JobServiceTest, AuthOnEveryJobCallButHealth) {
  auto server = StartServer(Db());
  ASSERT_NE(server, nullptr);
  auto channel = Connect(server->port());
  auto jobs = v1::JobService::NewStub(channel);
  {
    grpc::ClientContext ctx;
    v1::ListJobsResponse out;
    const grpc::Status st = jobs->List(&ctx, {}, &out);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << st.error_message();
    EXPECT_NE(st.error_message().find("Bearer"), std::string::npos);
  }
  {
    grpc::ClientContext ctx;
    Authorize(ctx, "wrong");
    v1::SubmitJobRequest req;
    *req.mutable_spec() = Spec();
    v1::Job out;
    EXPECT_EQ(jobs->Submit(&ctx, req, &out).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    grpc::ClientContext ctx;  // no token: health answers anyway
    grpc::health::v1::HealthCheckRequest req;
    grpc::health::v1::HealthCheckResponse out;
    const grpc::Status st = grpc::health::v1::Health::NewStub(channel)->Check(&ctx, req, &out);
    ASSERT_TRUE(st.ok()) << st.error_message();
    EXPECT_EQ(out.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  }
  grpc::ClientContext ctx;
  Authorize(ctx);
  v1::ListJobsResponse out;
  EXPECT_TRUE(jobs->List(&ctx, {}, &out).ok());
}

TEST_F(JobServiceTest, SubmitGetCancelAndBadSubmissionsLeaveOthersAlone) {
  auto server = StartServer(Db());
  ASSERT_NE(server, nullptr);
  auto jobs = v1::JobService::NewStub(Connect(server->port()));
  v1::Job first;
  {
    grpc::ClientContext ctx;
    Authorize(ctx);
    v1::SubmitJobRequest req;
    *req.mutable_spec() = Spec();
    ASSERT_TRUE(jobs->Submit(&ctx, req, &first).ok());
    EXPECT_EQ(first.state(), v1::PENDING);
  }
  {  // an impossible mesh: INVALID_ARGUMENT with what to do
    grpc::ClientContext ctx;
    Authorize(ctx);
    v1::SubmitJobRequest req;
    *req.mutable_spec() = Spec();
    req.mutable_spec()->add_mesh(3);
    v1::Job out;
    const grpc::Status st = jobs->Submit(&ctx, req, &out);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(st.error_message().find("make them agree"), std::string::npos) << st.error_message();
  }
  {
    grpc::ClientContext ctx;
    Authorize(ctx);
    v1::GetJobRequest req;
    req.set_id(first.id());
    v1::Job out;
    ASSERT_TRUE(jobs->Get(&ctx, req, &out).ok());
    EXPECT_EQ(out.state(), v1::PENDING);  // untouched by the bad submission
  }
  {
    grpc::ClientContext ctx;
    Authorize(ctx);
    v1::GetJobRequest req;
    req.set_id(77);
    v1::Job out;
    EXPECT_EQ(jobs->Get(&ctx, req, &out).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  {
    grpc::ClientContext ctx;
    Authorize(ctx);
    v1::CancelJobRequest req;
    req.set_id(first.id());
    v1::Job out;
    ASSERT_TRUE(jobs->Cancel(&ctx, req, &out).ok());
    EXPECT_EQ(out.state(), v1::CANCELLED);
  }
  grpc::ClientContext ctx;
  Authorize(ctx);
  v1::CancelJobRequest req;
  req.set_id(first.id());
  v1::Job out;
  EXPECT_EQ(jobs->Cancel(&ctx, req, &out).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
}

TEST_F(JobServiceTest, JobsThatCouldNeverRunAreRefusedAtSubmission) {
  auto server = StartServer(Db());
  ASSERT_NE(server, nullptr);
  auto jobs = v1::JobService::NewStub(Connect(server->port()));
  auto submit = [&](const v1::JobSpec& spec, v1::Job* out) {
    grpc::ClientContext ctx;
    Authorize(ctx);
    v1::SubmitJobRequest req;
    *req.mutable_spec() = spec;
    return jobs->Submit(&ctx, req, out);
  };
  v1::Job good;
  ASSERT_TRUE(submit(Spec(), &good).ok());
  EXPECT_NE(good.plan_summary().find("mesh 2"), std::string::npos) << good.plan_summary();
  EXPECT_GT(good.predicted_peak_bytes(), 0);
  // A budget no plan fits: FAILED_PRECONDITION with the least that would.
  v1::JobSpec tight = Spec();
  tight.set_memory_per_device(1024);
  v1::Job out;
  grpc::Status st = submit(tight, &out);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << st.error_message();
  EXPECT_NE(st.error_message().find("no plan fits"), std::string::npos) << st.error_message();
  // A graph with an unknown op: INVALID_ARGUMENT naming it.
  v1::JobSpec unknown = Spec();
  unknown.clear_model();
  v1::Graph* g = unknown.mutable_graph();
  g->set_name("bad");
  auto* in = g->add_inputs();
  in->set_name("x");
  in->mutable_type()->set_dtype(v1::FLOAT32);
  in->mutable_type()->add_shape(4);
  auto* node = g->add_nodes();
  node->set_name("frob");
  node->set_op("frobnicate");
  node->add_inputs("x");
  node->add_outputs("y");
  g->add_outputs("y");
  st = submit(unknown, &out);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  EXPECT_NE(st.error_message().find("frobnicate"), std::string::npos) << st.error_message();
  // An unknown zoo model: INVALID_ARGUMENT.
  v1::JobSpec zoo = Spec();
  zoo.set_model("gpt9");
  EXPECT_EQ(submit(zoo, &out).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // Elastic jobs: bounds that do not hold ranks, no checkpoints to resize at (INVALID_ARGUMENT).
  // (Without shared checkpoint storage they are admitted: peer workers keep their shards.)
  v1::JobSpec elastic = Spec();
  elastic.mutable_elastic()->set_min_devices(3);
  elastic.mutable_training()->set_checkpoint_every(2);
  st = submit(elastic, &out);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  EXPECT_NE(st.error_message().find("elastic.min_devices is 3; give the fewest devices the job goes on with, from 1 to ranks (2)"),
            std::string::npos)
      << st.error_message();
  elastic.mutable_elastic()->set_min_devices(1);
  elastic.mutable_elastic()->set_max_devices(1);
  EXPECT_NE(submit(elastic, &out).error_message().find("elastic.max_devices is 1; give the most devices the job grows to, from ranks (2)"),
            std::string::npos);
  elastic.mutable_elastic()->set_max_devices(0);
  elastic.mutable_training()->set_checkpoint_every(0);
  EXPECT_NE(submit(elastic, &out).error_message().find("elastic jobs resume and grow at checkpoints: give checkpoint_every"),
            std::string::npos);
  elastic.mutable_training()->set_checkpoint_every(2);
  st = submit(elastic, &out);
  EXPECT_TRUE(st.ok()) << st.error_message();
  // Batch norms: sync or local, groups only with local.
  v1::JobSpec bn = Spec();
  bn.set_batch_norm("ghost");
  st = submit(bn, &out);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  EXPECT_NE(st.error_message().find("batch_norm 'ghost' is not sync or local"), std::string::npos) << st.error_message();
  bn.set_batch_norm("sync");
  bn.set_batch_norm_groups(2);
  EXPECT_NE(submit(bn, &out).error_message().find("batch_norm_groups is 2; give it with batch_norm local"), std::string::npos);
  // Only the good jobs are queued (the first, and the elastic one).
  EXPECT_EQ(server->jobs().List().size(), 2u);
}

namespace {
// An open Watch stream, its first event read (so it is open on the server).
struct Watcher {
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReader<v1::JobEvent>> reader;
};

// Opens a Watch on `req`; the status it ends with when it does not open.
grpc::Status OpenWatch(v1::JobService::Stub& jobs, const v1::WatchJobRequest& req,
                       std::vector<std::unique_ptr<Watcher>>& open) {
  auto w = std::make_unique<Watcher>();
  Authorize(w->ctx);
  w->reader = jobs.Watch(&w->ctx, req);
  v1::JobEvent first;
  if (!w->reader->Read(&first)) return w->reader->Finish();
  open.push_back(std::move(w));
  return grpc::Status::OK;
}
}  // namespace

TEST_F(JobServiceTest, IdleWatchStreamsHoldNoThreadAndAreCapped) {
  // Probe of issue 18: 500 idle Watch streams took every server thread; List was refused. A
  // stream now waits without a thread: 40 of them open on a server of 8 threads, List answered.
  ServerOptions o = TestOptions();
  o.max_watch_streams = 40;
  o.max_watch_streams_per_client = 48;
  o.max_threads = 8;
  auto server = MapdServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  auto jobs = v1::JobService::NewStub(Connect((*server)->port()));
  auto submitted = (*server)->jobs().Submit(Spec());  // PENDING: its watchers wait
  ASSERT_TRUE(submitted.ok());
  v1::WatchJobRequest req;
  req.set_id(submitted->id());
  std::vector<std::unique_ptr<Watcher>> open;
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(OpenWatch(*jobs, req, open).ok()) << i;
  const grpc::Status over = OpenWatch(*jobs, req, open);
  EXPECT_EQ(over.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(over.error_message().find("--max-watch-streams"), std::string::npos) << over.error_message();
  for (int i = 0; i < 20; ++i) {  // other calls go on being answered
    grpc::ClientContext ctx;
    Authorize(ctx);
    v1::ListJobsResponse list;
    ASSERT_TRUE(jobs->List(&ctx, {}, &list).ok());
    EXPECT_EQ(list.jobs_size(), 1);
  }
  // A watcher that leaves gives its place back (the server sees it within a poll interval).
  open.back()->ctx.TryCancel();
  open.pop_back();
  bool again = false;
  for (int attempt = 0; attempt < 50 && !again; ++attempt) {
    again = OpenWatch(*jobs, req, open).ok();
    if (!again) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(again);
  for (auto& w : open) w->ctx.TryCancel();
  ServerOptions bad = o;
  bad.max_watch_streams_per_client = 0;
  EXPECT_EQ(bad.Validate().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(JobServiceTest, OneClientHostCannotTakeEveryWatchStream) {
  ServerOptions o = TestOptions();
  o.max_watch_streams = 100;
  o.max_watch_streams_per_client = 3;
  auto server = MapdServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  auto jobs = v1::JobService::NewStub(Connect((*server)->port()));
  auto submitted = (*server)->jobs().Submit(Spec());
  ASSERT_TRUE(submitted.ok());
  v1::WatchJobRequest req;
  req.set_id(submitted->id());
  std::vector<std::unique_ptr<Watcher>> open;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(OpenWatch(*jobs, req, open).ok()) << i;
  const grpc::Status over = OpenWatch(*jobs, req, open);
  EXPECT_EQ(over.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(over.error_message().find("from 127.0.0.1"), std::string::npos) << over.error_message();
  EXPECT_NE(over.error_message().find("--max-watch-streams-per-client"), std::string::npos) << over.error_message();
  for (auto& w : open) w->ctx.TryCancel();
  EXPECT_EQ(WatchLimits::ClientOf("ipv4:10.0.0.7:51234"), "10.0.0.7");
  EXPECT_EQ(WatchLimits::ClientOf("ipv6:[::1]:51234"), "[::1]");
  EXPECT_EQ(WatchLimits::ClientOf("unix:/run/mapd.sock"), "unix:/run/mapd.sock");
}

TEST_F(JobServiceTest, ListIsPagedAndLeavesGraphsOut) {
  auto server = StartServer(Db());
  ASSERT_NE(server, nullptr);
  auto jobs = v1::JobService::NewStub(Connect(server->port()));
  auto graph = BuildZooModel("mlp:in=8,hidden=8,layers=1,out=2,batch=2");
  ASSERT_TRUE(graph.ok()) << graph.status();
  v1::JobSpec with_graph;
  *with_graph.mutable_graph() = *graph;
  with_graph.mutable_training()->set_steps(3);
  with_graph.set_ranks(1);
  ASSERT_TRUE(server->jobs().Submit(with_graph).ok());
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(server->jobs().Submit(Spec()).ok());
  v1::ListJobsRequest req;
  req.set_page_size(2);
  std::vector<int64_t> ids;
  int pages = 0;
  do {
    grpc::ClientContext ctx;
    Authorize(ctx);
    v1::ListJobsResponse page;
    ASSERT_TRUE(jobs->List(&ctx, req, &page).ok());
    EXPECT_LE(page.jobs_size(), 2);
    for (const v1::Job& job : page.jobs()) {
      ids.push_back(job.id());
      EXPECT_EQ(job.spec().graph().nodes_size(), 0) << "job " << job.id() << ": List carries no graph";
    }
    if (pages == 0) {
      EXPECT_EQ(page.jobs(0).spec().graph().name(), graph->name());  // its name is kept
    }
    req.set_page_token(page.next_page_token());
    ++pages;
  } while (!req.page_token().empty() && pages < 10);
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(ids, (std::vector<int64_t>{1, 2, 3, 4, 5}));
  {
    grpc::ClientContext ctx;
    Authorize(ctx);
    v1::GetJobRequest get;
    get.set_id(1);
    v1::Job job;
    ASSERT_TRUE(jobs->Get(&ctx, get, &job).ok());
    EXPECT_EQ(job.spec().graph().nodes_size(), graph->nodes_size());  // Get has the whole job
  }
  for (auto [size, token] : {std::pair<int, std::string>{1001, ""}, {-1, ""}, {10, "abc"}, {10, "-5"}}) {
    grpc::ClientContext ctx;
    Authorize(ctx);
    v1::ListJobsRequest bad;
    bad.set_page_size(size);
    bad.set_page_token(token);
    v1::ListJobsResponse out;
    EXPECT_EQ(jobs->List(&ctx, bad, &out).error_code(), grpc::StatusCode::INVALID_ARGUMENT) << size << " " << token;
  }
}

TEST_F(JobServiceTest, WatchStreamsEventsUntilTheJobFinishes) {
  auto server = StartServer(Db());
  ASSERT_NE(server, nullptr);
  auto jobs = v1::JobService::NewStub(Connect(server->port()));
  auto submitted = server->jobs().Submit(Spec());
  ASSERT_TRUE(submitted.ok());
  const int64_t id = submitted->id();
  std::thread driver([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    (void)server->jobs().Transition(id, v1::PLANNING, "planning");
    (void)server->jobs().Transition(id, v1::RUNNING, "planned");
    (void)server->jobs().ReportProgress(id, {1, 4.2, 100, 1 << 20});
    (void)server->jobs().Transition(id, v1::SUCCEEDED, "done");
  });
  grpc::ClientContext ctx;
  Authorize(ctx);
  v1::WatchJobRequest req;
  req.set_id(id);
  auto reader = jobs->Watch(&ctx, req);
  std::vector<v1::JobEvent> seen;
  v1::JobEvent e;
  while (reader->Read(&e)) seen.push_back(e);
  const grpc::Status st = reader->Finish();
  driver.join();
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(seen.size(), 5u);  // submitted, planning, planned, step 1, done
  EXPECT_EQ(seen.front().state(), v1::PENDING);
  EXPECT_EQ(seen[3].step(), 1);
  EXPECT_EQ(seen.back().state(), v1::SUCCEEDED);
}

TEST_F(JobServiceTest, PlanSearchesPastTheCapWaitThenAreRefused) {
  ServerOptions o = TestOptions();
  o.max_concurrent_plans = 1;
  o.plan_wait_seconds = 1;
  auto server = MapdServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  auto channel = Connect((*server)->port());
  auto planner = v1::PlannerService::NewStub(channel);
  auto jobs = v1::JobService::NewStub(channel);
  auto held = (*server)->plans().Enter();  // one search in flight: the cap
  ASSERT_TRUE(held.ok());
  v1::JobSpec spec = Spec();
  {
    grpc::ClientContext ctx;
    Authorize(ctx);
    v1::PlanRequest req;
    *req.mutable_spec() = spec;
    v1::PlanResponse out;
    const grpc::Status st = planner->Plan(&ctx, req, &out);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
    EXPECT_NE(st.error_message().find("--max-concurrent-plans"), std::string::npos) << st.error_message();
  }
  {
    grpc::ClientContext ctx;
    Authorize(ctx);
    v1::SubmitJobRequest req;
    *req.mutable_spec() = spec;
    v1::Job out;
    EXPECT_EQ(jobs->Submit(&ctx, req, &out).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_TRUE((*server)->jobs().List().empty());  // refused before anything was stored
  }
  // A call waits for the place rather than failing at once: freed while it waits, it is served.
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    held->reset();
  });
  {
    grpc::ClientContext ctx;
    Authorize(ctx);
    v1::PlanRequest req;
    *req.mutable_spec() = spec;
    v1::PlanResponse out;
    const grpc::Status st = planner->Plan(&ctx, req, &out);
    EXPECT_TRUE(st.ok()) << st.error_message();
    EXPECT_TRUE(out.fits());
  }
  release.join();
  EXPECT_EQ((*server)->plans().in_flight(), 0);
  ServerOptions bad = o;
  bad.max_concurrent_plans = 0;
  EXPECT_EQ(bad.Validate().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(JobServiceTest, ThePlannerServiceProfilesAndPlansWithoutRunning) {
  auto server = StartServer(Db());
  ASSERT_NE(server, nullptr);
  auto planner = v1::PlannerService::NewStub(Connect(server->port()));
  v1::JobSpec spec = Spec();
  spec.mutable_training()->clear_steps();  // not needed to plan
  spec.set_ranks(4);
  spec.set_device_type("cpu");
  {
    grpc::ClientContext ctx;
    Authorize(ctx);
    v1::ProfileRequest req;
    *req.mutable_spec() = spec;
    v1::ProfileResponse out;
    const grpc::Status st = planner->Profile(&ctx, req, &out);
    ASSERT_TRUE(st.ok()) << st.error_message();
    EXPECT_GT(out.parameters(), 0);
    EXPECT_GT(out.forward_flops(), 0);
    EXPECT_GT(out.backward_flops(), out.forward_flops());
    EXPECT_GT(out.predicted_peak_bytes(), out.parameter_bytes());
    EXPECT_EQ(out.device_type(), "cpu");
  }
  auto plan = [&](const v1::JobSpec& asked, v1::PlanResponse* answer, const std::string& token = kToken) {
    grpc::ClientContext ctx;
    if (!token.empty()) Authorize(ctx, token);
    v1::PlanRequest req;
    *req.mutable_spec() = asked;
    return planner->Plan(&ctx, req, answer);
  };
  v1::PlanResponse out;
  const grpc::Status st = plan(spec, &out);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_TRUE(out.fits());
  int64_t devices = 1;
  for (int64_t d : out.plan().mesh()) devices *= d;
  EXPECT_EQ(devices, 4);
  EXPECT_EQ(out.plan().nodes_size(), out.plan().graph().nodes_size());
  EXPECT_NE(out.summary().find("mesh "), std::string::npos) << out.summary();
  // A budget nothing fits: an answer, not an error.
  v1::JobSpec tight = spec;
  tight.set_memory_per_device(1024);
  ASSERT_TRUE(plan(tight, &out).ok());
  EXPECT_FALSE(out.fits());
  EXPECT_GT(out.min_memory_bytes(), 1024);
  v1::JobSpec unknown = spec;
  unknown.set_model("gpt9");
  EXPECT_EQ(plan(unknown, &out).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(plan(spec, &out, "").error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(JobServiceTest, ARestartedCoordinatorListsEveryJobWithItsHistory) {
  int64_t cancelled = 0;
  {
    auto server = StartServer(Db());
    ASSERT_NE(server, nullptr);
    ASSERT_TRUE(server->jobs().Submit(Spec()).ok());
    cancelled = server->jobs().Submit(Spec())->id();
    ASSERT_TRUE(server->jobs().Cancel(cancelled).ok());
    ASSERT_TRUE(server->jobs().Submit(Spec()).ok());
    server->Shutdown(0);
  }
  auto server = StartServer(Db());
  ASSERT_NE(server, nullptr);
  auto jobs = v1::JobService::NewStub(Connect(server->port()));
  grpc::ClientContext ctx;
  Authorize(ctx);
  v1::ListJobsResponse out;
  ASSERT_TRUE(jobs->List(&ctx, {}, &out).ok());
  ASSERT_EQ(out.jobs_size(), 3);
  EXPECT_EQ(out.jobs(0).state(), v1::PENDING);
  EXPECT_EQ(out.jobs(1).state(), v1::CANCELLED);
  EXPECT_EQ(out.jobs(2).state(), v1::PENDING);
  grpc::ClientContext ectx;
  Authorize(ectx);
  v1::JobEventsRequest ereq;
  ereq.set_id(cancelled);
  v1::JobEventsResponse events;
  ASSERT_TRUE(jobs->Events(&ectx, ereq, &events).ok());
  ASSERT_EQ(events.events_size(), 2);
  EXPECT_EQ(events.events(1).message(), "cancelled by the user");
}

TEST(JobPlanner, APlanPredictingLessThanTheParametersTakeIsABugNotAPlan) {
  auto proto = BuildZooModel("mlp:in=64,hidden=64,layers=2,out=8,batch=4");
  ASSERT_TRUE(proto.ok());
  auto graph = Graph::Create(*proto);
  ASSERT_TRUE(graph.ok());
  const double parameters = static_cast<double>(graph->NumParameterElements());
  EXPECT_TRUE(CheckPlausiblePeak(*graph, 2, parameters * 4).ok());  // f32 weights, one copy per rank
  EXPECT_TRUE(CheckPlausiblePeak(*graph, 2, parameters / 2).ok());  // sharded, at one byte an element
  const absl::Status wrapped = CheckPlausiblePeak(*graph, 2, 8);    // what a wrapped product predicted
  EXPECT_EQ(wrapped.code(), absl::StatusCode::kInternal);
  EXPECT_NE(wrapped.message().find("planner bug"), std::string::npos) << wrapped;
}

TEST(ServerOptions, RefusesToRunOpenOrHalfTls) {
  ServerOptions o;
  o.listen = "127.0.0.1:0";
  EXPECT_EQ(o.Validate().code(), absl::StatusCode::kFailedPrecondition);
  o.token = "t";
  o.tls_cert_file = "cert.pem";
  EXPECT_EQ(o.Validate().code(), absl::StatusCode::kInvalidArgument);
  o.tls_cert_file.clear();
  o.listen = "nonsense";
  EXPECT_EQ(o.Validate().code(), absl::StatusCode::kInvalidArgument);
  o.listen = "127.0.0.1:0";
  o.worker_token = "t";  // workers and clients sharing one credential
  const absl::Status shared = o.Validate();
  EXPECT_EQ(shared.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(shared.message().find("--worker-token-file"), std::string::npos) << shared;
  o.worker_token = "w";
  EXPECT_TRUE(o.Validate().ok());
}

}  // namespace
}  // namespace mapd

// mapctl's job commands against the coordinator: submit, jobs, get, watch, logs, cancel,
// workers (docs/coordinator.md). The address and token come from flags or MAPD_ADDRESS /
// MAPD_TOKEN; every call carries the bearer token.
#include <grpcpp/grpcpp.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <functional>
#include <iostream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/mapctl/commands.h"
#include "client/mapctl/model_loader.h"
#include "client/mapctl/table.h"
#include "common/bytes.h"
#include "common/rpc/auth.h"
#include "common/rpc/grpc_status.h"
#include "nlohmann/json.hpp"
#include "planner/sharding/cluster.h"
#include "planner/zoo/zoo.h"
#include "proto/mapd/v1/job_service.grpc.pb.h"
#include "proto/mapd/v1/workers.grpc.pb.h"
#include <google/protobuf/util/json_util.h>

namespace mapd::cli {

namespace {

// The call's status, named by what was asked; an unreachable coordinator says what to check.
absl::Status FromGrpc(const grpc::Status& st, const std::string& what) {
  const absl::Status status = FromGrpcStatus(st);
  if (status.ok()) return status;
  std::string message(status.message());
  if (status.code() == absl::StatusCode::kUnavailable) {
    message = absl::StrCat("cannot reach the coordinator (", message, "); is mapd running there? (--address or MAPD_ADDRESS)");
  }
  return absl::Status(status.code(), absl::StrCat(what, ": ", message));
}

struct Client {
  std::unique_ptr<v1::JobService::Stub> stub;
  std::unique_ptr<v1::WorkerService::Stub> workers;
  std::string token;
  // One unary call with the token and a deadline, its status named by `what`.
  absl::Status Call(const std::string& what, const std::function<grpc::Status(grpc::ClientContext*)>& rpc) const;
  void Prepare(grpc::ClientContext& ctx, double timeout_seconds = 30) const { AuthorizeCall(ctx, token, timeout_seconds); }
};

absl::StatusOr<Client> Connect(const JobArgs& a) {
  Client c;
  std::string address = a.address;
  if (address.empty() && std::getenv("MAPD_ADDRESS") != nullptr) address = std::getenv("MAPD_ADDRESS");
  if (address.empty()) address = "127.0.0.1:7070";
  c.token = a.token;
  if (c.token.empty() && std::getenv("MAPD_TOKEN") != nullptr) c.token = std::getenv("MAPD_TOKEN");
  if (c.token.empty()) return absl::FailedPreconditionError("no token: give --token or set MAPD_TOKEN (the coordinator's)");
  auto creds = ClientCredentials(a.tls_ca);
  if (!creds.ok()) return creds.status();
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);  // Get answers a submitted graph whole, weights included
  auto channel = grpc::CreateCustomChannel(address, *creds, args);
  c.stub = v1::JobService::NewStub(channel);
  c.workers = v1::WorkerService::NewStub(channel);
  return c;
}

// RESOURCE_EXHAUSTED is the coordinator refusing a call before doing anything (its threads or
// plan searches all busy), so any call — a Submit too — is tried again: after 0.2 s, doubling
// to 5 s, for about a minute in all.
absl::Status Client::Call(const std::string& what, const std::function<grpc::Status(grpc::ClientContext*)>& rpc) const {
  double wait = 0.2, waited = 0;
  for (;;) {
    grpc::ClientContext ctx;
    Prepare(ctx);
    const grpc::Status st = rpc(&ctx);
    if (st.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED || waited >= 60) return FromGrpc(st, what);
    std::cerr << "mapctl " << what << ": the coordinator is busy (" << st.error_message() << "); trying again in "
              << wait << " s\n";
    std::this_thread::sleep_for(std::chrono::duration<double>(wait));
    waited += wait;
    wait = std::min(wait * 2, 5.0);
  }
}

absl::StatusOr<v1::Job> GetJob(const Client& client, int64_t id, const std::string& what) {
  v1::GetJobRequest req;
  req.set_id(id);
  v1::Job job;
  if (auto st = client.Call(what, [&](grpc::ClientContext* ctx) { return client.stub->Get(ctx, req, &job); }); !st.ok()) return st;
  return job;
}

std::string StateName(v1::JobState s) { return v1::JobState_Name(s); }

std::string When(double unix_seconds) {
  if (unix_seconds <= 0) return "-";
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", std::localtime(&t));
  return buf;
}

nlohmann::json ToJson(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::util::JsonPrintOptions o;
  o.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(m, &out, o);
  return nlohmann::json::parse(out);
}

std::string EventLine(const v1::JobEvent& e, int64_t steps) {
  std::string line = absl::StrFormat("%s  #%-3d %-10s %s", When(e.unix_seconds()), e.seq(), StateName(e.state()), e.message());
  if (e.step() > 0) {
    line = absl::StrFormat("%s  #%-3d step %lld/%lld  loss %.4f  lr %.3g  %.0f tokens/s  peak %s", When(e.unix_seconds()), e.seq(),
                           static_cast<long long>(e.step()), static_cast<long long>(steps), e.loss(), e.lr(), e.items_per_second(),
                           FormatBytes(e.peak_bytes()));
  }
  return line;
}

// The job's outcome as an exit code: 0 succeeded, 1 failed, 3 cancelled (anything else: 1).
int OutcomeCode(v1::JobState s) {
  if (s == v1::SUCCEEDED) return kExitOk;
  if (s == v1::CANCELLED) return kExitJobCancelled;
  return kExitFailed;
}

absl::Status FillSpecFromYaml(const std::string& file, SubmitArgs& a) {
  YAML::Node y;
  try {
    y = YAML::LoadFile(file);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("-f ", file, ": ", e.what()));
  }
  if (!y.IsMap()) return absl::InvalidArgumentError(absl::StrCat("-f ", file, ": a job file is a mapping of fields (model, steps, ranks, ...)"));
  static const std::set<std::string> known = {"model", "inputs", "loss", "name", "steps", "ranks", "mesh", "device", "device_type",
                                              "memory_per_device", "optimizer", "lr", "init_from", "eval_data", "eval_every", "eval_batches", "lr_schedule", "warmup_steps", "min_lr", "data", "zero", "recompute", "micro_batches", "precision",
                                              "pipeline_stages", "checkpoint_every", "seed"};
  try {
    for (const auto& kv : y) {
      const std::string key = kv.first.as<std::string>();
      if (!known.count(key)) {
        return absl::InvalidArgumentError(absl::StrCat("-f ", file, ": unknown field '", key, "'; fields are ", absl::StrJoin(known, ", ")));
      }
    }
    if (y["model"]) a.model.model = y["model"].as<std::string>();
    if (y["inputs"]) a.model.inputs = y["inputs"].as<std::vector<std::string>>();
    if (y["loss"]) a.loss = y["loss"].as<std::string>();
    if (y["init_from"]) a.init_from = y["init_from"].as<std::string>();
    if (y["name"]) a.name = y["name"].as<std::string>();
    if (y["steps"]) a.steps = y["steps"].as<int64_t>();
    if (y["ranks"]) a.ranks = y["ranks"].as<int>();
    if (y["mesh"]) a.mesh = y["mesh"].as<std::string>();
    if (y["device"]) a.device = y["device"].as<std::string>();
    if (y["device_type"]) a.device_type = y["device_type"].as<std::string>();
    if (y["memory_per_device"]) a.memory_per_device = y["memory_per_device"].as<std::string>();
    if (y["optimizer"]) a.optimizer = y["optimizer"].as<std::string>();
    if (y["lr"]) a.lr = y["lr"].as<double>();
    if (y["lr_schedule"]) a.lr_schedule = y["lr_schedule"].as<std::string>();
    if (y["warmup_steps"]) a.warmup_steps = y["warmup_steps"].as<int64_t>();
    if (y["min_lr"]) a.min_lr = y["min_lr"].as<double>();
    if (y["data"]) a.data = y["data"].as<std::string>();
    if (y["eval_data"]) a.eval_data = y["eval_data"].as<std::string>();
    if (y["eval_every"]) a.eval_every = y["eval_every"].as<int64_t>();
    if (y["eval_batches"]) a.eval_batches = y["eval_batches"].as<int64_t>();
    if (y["zero"]) a.zero = y["zero"].as<std::string>();
    if (y["recompute"]) a.recompute = y["recompute"].as<std::string>();
    if (y["micro_batches"]) a.micro_batches = y["micro_batches"].as<std::string>();
    if (y["precision"]) a.precision = y["precision"].as<std::string>();
    if (y["pipeline_stages"]) a.pipeline_stages = y["pipeline_stages"].as<std::string>();
    if (y["checkpoint_every"]) a.checkpoint_every = y["checkpoint_every"].as<int64_t>();
    if (y["seed"]) a.seed = y["seed"].as<uint64_t>();
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("-f ", file, ": ", e.what()));
  }
  if (a.model.model.empty()) return absl::InvalidArgumentError(absl::StrCat("-f ", file, ": no model"));
  return absl::OkStatus();
}

}  // namespace

int RunSubmit(SubmitArgs a) {
  if (!a.file.empty()) {
    if (!a.model.model.empty()) return ReportError(absl::InvalidArgumentError("give MODEL or -f FILE, not both"));
    if (auto st = FillSpecFromYaml(a.file, a); !st.ok()) return ReportError(st);
  }
  if (a.model.model.empty()) return ReportError(absl::InvalidArgumentError("give a MODEL (or -f job.yaml)"));
  v1::JobSpec spec;
  spec.set_name(a.name);
  if (IsZooModelSpec(a.model.model) && a.model.inputs.empty() && a.init_from.empty()) {
    // Checked here too, so a typo is caught before it reaches the queue.
    if (auto built = BuildZooModel(a.model.model); !built.ok()) return ReportError(built.status());
    spec.set_model(a.model.model);
  } else {
    auto graph = LoadTrainingGraph(a.model.model, a.model.inputs, 0, 0, a.loss);
    if (!graph.ok()) return ReportError(graph.status());
    if (auto st = InitFrom(a.init_from, *graph); !st.ok()) return ReportError(st);
    // The coordinator takes no file paths: the model's weights travel in the graph.
    if (auto st = InlineParameterData(*graph); !st.ok()) return ReportError(st);
    *spec.mutable_graph() = *std::move(graph);
  }
  spec.set_steps(a.steps);
  spec.set_ranks(a.ranks);
  if (!a.mesh.empty()) {
    auto mesh = ParseMesh(a.mesh);
    if (!mesh.ok()) return ReportError(mesh.status());
    for (int64_t d : *mesh) spec.add_mesh(d);
  }
  spec.set_device(a.device);
  spec.set_device_type(a.device_type);
  if (!a.memory_per_device.empty()) {
    auto bytes = ParseBytes(a.memory_per_device);
    if (!bytes.ok()) return ReportError(bytes.status());
    spec.set_memory_per_device(*bytes);
  }
  spec.set_optimizer(a.optimizer);
  spec.set_lr(a.lr);
  spec.set_lr_schedule(a.lr_schedule);
  spec.set_warmup_steps(a.warmup_steps);
  spec.set_min_lr(a.min_lr);
  spec.set_data(a.data);  // text:FILE / tokens:FILE / npy:A[,B]: relative to the workers' --data-root, as given
  spec.set_eval_data(a.eval_data);
  spec.set_eval_every(a.eval_every);
  spec.set_eval_batches(a.eval_batches);
  spec.set_zero(a.zero);
  spec.set_recompute(a.recompute);
  spec.set_micro_batches(a.micro_batches);
  spec.set_pipeline_stages(a.pipeline_stages);
  spec.set_precision(a.precision);
  spec.set_checkpoint_every(a.checkpoint_every);
  spec.set_seed(a.seed);
  auto client = Connect(a.conn);
  if (!client.ok()) return ReportError(client.status());
  v1::SubmitJobRequest req;
  *req.mutable_spec() = spec;
  v1::Job job;
  if (auto st = client->Call("submit", [&](grpc::ClientContext* ctx) { return client->stub->Submit(ctx, req, &job); }); !st.ok()) {
    return ReportError(st);
  }
  if (a.conn.format == "json") {
    nlohmann::json j = ToJson(job);
    j["spec"].erase("graph");  // the graph is large; `mapctl get -o json` has the rest
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << "submitted job " << job.id() << " (" << job.spec().name() << "): " << StateName(job.state()) << "\n"
              << "watch it with: mapctl watch " << job.id() << "\n";
  }
  return kExitOk;
}

int RunJobs(const JobArgs& a) {
  auto client = Connect(a);
  if (!client.ok()) return ReportError(client.status());
  v1::ListJobsResponse out;  // every page's jobs
  v1::ListJobsRequest req;
  req.set_page_size(1000);
  do {
    v1::ListJobsResponse page;
    if (auto st = client->Call("jobs", [&](grpc::ClientContext* ctx) { return client->stub->List(ctx, req, &page); }); !st.ok()) {
      return ReportError(st);
    }
    for (v1::Job& job : *page.mutable_jobs()) *out.add_jobs() = std::move(job);
    req.set_page_token(page.next_page_token());
  } while (!req.page_token().empty());
  if (a.format == "json") {
    nlohmann::json j = nlohmann::json::array();
    for (const v1::Job& job : out.jobs()) {
      nlohmann::json one = ToJson(job);
      if (one.contains("spec")) one["spec"].erase("graph");
      j.push_back(one);
    }
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  Table t({"ID", "NAME", "STATE", "STEP", "LOSS", "RANKS", "UPDATED"});
  for (const v1::Job& job : out.jobs()) {
    t.Row({std::to_string(job.id()), job.spec().name(), StateName(job.state()),
           absl::StrCat(job.step(), "/", job.spec().steps()), job.step() > 0 ? absl::StrFormat("%.4f", job.loss()) : "-",
           std::to_string(job.spec().ranks()), When(job.updated_unix_seconds())});
  }
  t.Print(std::cout);
  return kExitOk;
}

int RunGet(const JobArgs& a, int64_t id) {
  auto client = Connect(a);
  if (!client.ok()) return ReportError(client.status());
  auto got = GetJob(*client, id, absl::StrCat("get ", id));
  if (!got.ok()) return ReportError(got.status());
  const v1::Job& job = *got;
  if (a.format == "json") {
    std::cout << ToJson(job).dump(2) << "\n";
    return kExitOk;
  }
  const v1::JobSpec& s = job.spec();
  std::cout << "Job:        " << job.id() << " (" << s.name() << ")\n"
            << "State:      " << StateName(job.state()) << (job.error().empty() ? "" : "  " + job.error()) << "\n"
            << "Model:      " << (s.model().empty() ? absl::StrCat("graph ", s.graph().name()) : s.model()) << "\n"
            << "Training:   " << s.steps() << " steps on " << s.ranks() << " rank(s)"
            << (s.mesh_size() > 0 ? absl::StrCat(", mesh ", absl::StrJoin(s.mesh(), "x")) : "") << ", " << s.optimizer()
            << " lr " << s.lr()
            << (s.lr_schedule().empty() || s.lr_schedule() == "constant"
                    ? (s.warmup_steps() > 0 ? absl::StrCat(" after ", s.warmup_steps(), " warm-up steps") : "")
                    : absl::StrCat(" (", s.lr_schedule(), " to ", s.min_lr(), " after ", s.warmup_steps(), " warm-up steps)"))
            << ", data " << s.data()
            << (s.eval_every() > 0 ? absl::StrCat(", evaluated every ", s.eval_every(), " steps on ", s.eval_batches(), " batch(es) of ",
                                                  s.eval_data().empty() ? "the training data" : s.eval_data())
                                   : "")
            << "\n"
            << "Budget:     " << (s.memory_per_device() > 0 ? FormatBytes(s.memory_per_device()) : "the device's memory") << " per "
            << (s.device().empty() ? "cpu" : s.device()) << " device (cost model: " << s.device_type() << ")\n"
            << "Plan:       " << (job.plan_summary().empty() ? "-" : job.plan_summary()) << "\n"
            << "Progress:   step " << job.step() << "/" << s.steps()
            << (job.step() > 0 ? absl::StrFormat(", loss %.4f", job.loss()) : "")
            << (job.attempt() > 0 ? absl::StrCat(" (restarted ", job.attempt(), " time(s))") : "")
            << (job.has_last_evaluation() ? absl::StrFormat(", eval loss %.4f after step %d", job.last_evaluation().loss(),
                                                            job.last_evaluation().step())
                                          : "")
            << "\n"
            << "Created:    " << When(job.created_unix_seconds()) << "\n"
            << "Updated:    " << When(job.updated_unix_seconds()) << "\n";
  return kExitOk;
}

int RunLogs(const JobArgs& a, int64_t id) {
  auto client = Connect(a);
  if (!client.ok()) return ReportError(client.status());
  v1::JobEventsRequest req;
  req.set_id(id);
  v1::JobEventsResponse out;
  if (auto st = client->Call(absl::StrCat("logs ", id), [&](grpc::ClientContext* ctx) { return client->stub->Events(ctx, req, &out); });
      !st.ok()) {
    return ReportError(st);
  }
  const v1::Job job = GetJob(*client, id, "").value_or(v1::Job());  // only for the step total
  if (a.format == "json") {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& e : out.events()) j.push_back(ToJson(e));
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  for (const auto& e : out.events()) std::cout << EventLine(e, job.spec().steps()) << "\n";
  return kExitOk;
}

int RunWatch(const JobArgs& a, int64_t id) {
  auto client = Connect(a);
  if (!client.ok()) return ReportError(client.status());
  auto got = GetJob(*client, id, absl::StrCat("watch ", id));
  if (!got.ok()) return ReportError(got.status());
  const v1::Job& job = *got;
  grpc::ClientContext ctx;
  client->Prepare(ctx, /*timeout_seconds=*/0);  // a watch lasts as long as the job
  v1::WatchJobRequest req;
  req.set_id(id);
  auto reader = client->stub->Watch(&ctx, req);
  const bool tty = isatty(STDOUT_FILENO) && a.format != "json";
  v1::JobEvent e;
  v1::JobState last = job.state();
  bool bar = false;  // a progress bar is on the current line
  while (reader->Read(&e)) {
    last = e.state();
    if (a.format == "json") {
      std::cout << ToJson(e).dump() << "\n" << std::flush;
      continue;
    }
    if (e.step() > 0 && tty) {
      // A live progress bar: step of total, loss, throughput, memory against the budget.
      const int64_t total = std::max<int64_t>(job.spec().steps(), 1);
      const int width = 30, filled = static_cast<int>(width * std::min<double>(1.0, static_cast<double>(e.step()) / total));
      std::cout << "\r[" << std::string(filled, '#') << std::string(width - filled, '.') << "] "
                << absl::StrFormat("step %lld/%lld  loss %.4f  lr %.3g  %.0f tokens/s  mem %s / %s", static_cast<long long>(e.step()),
                                   static_cast<long long>(total), e.loss(), e.lr(), e.items_per_second(), FormatBytes(e.peak_bytes()),
                                   job.spec().memory_per_device() > 0 ? FormatBytes(job.spec().memory_per_device()) : "-")
                << std::flush;
      bar = true;
      continue;
    }
    if (bar) std::cout << "\n";
    bar = false;
    std::cout << EventLine(e, job.spec().steps()) << "\n" << std::flush;
  }
  if (bar) std::cout << "\n";
  if (auto st = FromGrpc(reader->Finish(), absl::StrCat("watch ", id)); !st.ok()) return ReportError(st);
  return OutcomeCode(last);
}

int RunCancel(const JobArgs& a, int64_t id) {
  auto client = Connect(a);
  if (!client.ok()) return ReportError(client.status());
  v1::CancelJobRequest req;
  req.set_id(id);
  v1::Job job;
  if (auto st = client->Call(absl::StrCat("cancel ", id), [&](grpc::ClientContext* ctx) { return client->stub->Cancel(ctx, req, &job); });
      !st.ok()) {
    return ReportError(st);
  }
  if (a.format == "json") {
    std::cout << nlohmann::json{{"id", job.id()}, {"state", StateName(job.state())}}.dump(2) << "\n";
  } else {
    std::cout << "job " << job.id() << ": " << StateName(job.state()) << "\n";
  }
  return kExitOk;
}

int RunWorkers(const JobArgs& a) {
  auto client = Connect(a);
  if (!client.ok()) return ReportError(client.status());
  v1::ListWorkersResponse out;
  if (auto st = client->Call("workers", [&](grpc::ClientContext* ctx) { return client->workers->List(ctx, {}, &out); }); !st.ok()) {
    return ReportError(st);
  }
  if (a.format == "json") {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& w : out.workers()) j.push_back(ToJson(w));
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  Table t({"ID", "HOST", "STATE", "DEVICES", "LAST HEARTBEAT", "METRICS"});
  for (const auto& w : out.workers()) {
    std::vector<std::string> devices;
    for (const auto& d : w.devices()) devices.push_back(absl::StrCat(d.name(), " (", FormatBytes(d.memory_bytes()), ")"));
    t.Row({w.id(), w.hostname(), v1::WorkerState_Name(w.state()), absl::StrJoin(devices, ", "),
           When(w.last_heartbeat_unix_seconds()), w.metrics_address().empty() ? "-" : w.metrics_address()});
  }
  t.Print(std::cout);
  return kExitOk;
}

}  // namespace mapd::cli

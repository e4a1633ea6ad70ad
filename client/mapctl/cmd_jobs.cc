// mapctl's job commands against the coordinator: submit, jobs, get, describe, delete, cancel,
// workers (docs/cli.md, docs/coordinator.md). `logs` and `watch` are in cmd_logs.cc; the
// connection in job_client.h; the output formats in job_output.h.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <functional>
#include <iostream>
#include <memory>
#include <chrono>
#include <map>
#include <set>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/mapctl/command_table.h"
#include "client/mapctl/commands.h"
#include "client/mapctl/job_client.h"
#include "client/mapctl/job_file.h"
#include "client/mapctl/job_output.h"
#include "client/mapctl/model_loader.h"
#include "client/mapctl/torch_commands.h"
#include "client/mapctl/table.h"
#include "client/mapctl/training_flags.h"
#include "common/bytes.h"
#include "nlohmann/json.hpp"
#include "planner/sharding/cluster.h"
#include "model/zoo/zoo.h"

namespace mapd::cli {

namespace {

// json or yaml: the value printed; false for the other formats.
bool PrintStructured(const std::string& format, const nlohmann::json& value) {
  if (format == "json") std::cout << value.dump(2) << "\n";
  else if (format == "yaml") std::cout << ToYaml(value);
  else return false;
  return true;
}

// The job without its submitted graph (large; `get` keeps it so `-o yaml` resubmits).
nlohmann::json JobJson(const v1::Job& job, bool with_graph) {
  nlohmann::json j = ToJson(job);
  if (!with_graph && j.contains("spec")) j["spec"].erase("graph");
  return j;
}

// --elastic MIN[:MAX] (MAX left out: the coordinator's default, --ranks).
absl::StatusOr<v1::ElasticPolicy> ParseElastic(const std::string& text) {
  const std::vector<std::string> parts = absl::StrSplit(text, ':');
  v1::ElasticPolicy out;
  int32_t lo = 0, hi = 0;
  if (parts.size() > 2 || !absl::SimpleAtoi(parts[0], &lo) || lo < 1 || (parts.size() == 2 && (!absl::SimpleAtoi(parts[1], &hi) || hi < lo))) {
    return absl::InvalidArgumentError(absl::StrCat("--elastic '", text, "': give MIN or MIN:MAX devices, 1 <= MIN <= MAX (e.g. 2:4)"));
  }
  out.set_min_devices(lo);
  out.set_max_devices(hi);
  return out;
}

// The job's restarts after lost workers: its attempts, but for an elastic job's growing.
int Restarts(const v1::Job& job) { return job.spec().has_elastic() ? job.restarts() : std::max(job.attempt(), job.restarts()); }

// The devices a job runs on now ("2"), or asks for while it has none.
std::string Devices(const v1::Job& job) { return std::to_string(job.devices() > 0 ? job.devices() : job.spec().ranks()); }

// The spec the flags describe (their defaults where not given).
absl::StatusOr<v1::JobSpec> SpecFromFlags(const SubmitArgs& a) {
  v1::JobSpec spec;
  spec.set_name(a.name);
  // Data files are relative to the workers' --data-root, as given.
  *spec.mutable_training() = a.training;
  spec.set_ranks(a.ranks);
  if (!a.mesh.empty()) {
    auto mesh = ParseMesh(a.mesh);
    if (!mesh.ok()) return mesh.status();
    for (int64_t d : *mesh) spec.add_mesh(d);
  }
  spec.set_device(a.device);
  spec.set_device_type(a.device_type);
  if (!a.memory_per_device.empty()) {
    auto bytes = ParseBytes(a.memory_per_device);
    if (!bytes.ok()) return bytes.status();
    spec.set_memory_per_device(*bytes);
  }
  spec.set_zero(a.zero);
  spec.set_recompute(a.recompute);
  spec.set_pipeline_stages(a.pipeline_stages);
  spec.set_pin(a.pin);
  spec.set_batch_norm(a.batch_norm);
  if (!a.elastic.empty()) {
    auto bounds = ParseElastic(a.elastic);
    if (!bounds.ok()) return bounds.status();
    *spec.mutable_elastic() = *bounds;
  }
  return spec;
}

// The file's fields over the flags' defaults, and the flags given on the command line over the
// file (as `mapd --config`: what is typed wins).
// Of `into` and `from_file`, each field the file gives (in `file_fields`) and no flag typed (in
// `given`) is taken from the file; the rest keeps `into`'s. Messages of the spec (training) are
// overlaid field by field the same way.
void OverlayFields(google::protobuf::Message& into, const google::protobuf::Message& file, const std::set<std::string>& file_fields,
                   const std::set<std::string>& given) {
  std::unique_ptr<google::protobuf::Message> from_file(file.New());
  from_file->CopyFrom(file);
  const auto* d = into.GetDescriptor();
  const auto* r = into.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const auto* f = d->field(i);
    if (f->message_type() == v1::TrainingConfig::descriptor()) {
      OverlayFields(*r->MutableMessage(&into, f), r->GetMessage(*from_file, f), file_fields, given);
      r->ClearField(from_file.get(), f);
      continue;
    }
    const bool take = file_fields.count(f->name()) != 0 && given.count(f->name()) == 0;
    if (take) r->ClearField(&into, f);
    else r->ClearField(from_file.get(), f);
  }
  into.MergeFrom(*from_file);
}

// The file's fields over the flags' defaults, and the flags given on the command line over the
// file (as `mapd --config`: what is typed wins).
void OverlayFile(const JobFile& file, const std::set<std::string>& given, v1::JobSpec& spec, SubmitArgs& a) {
  OverlayFields(spec, file.spec, file.fields, given);
  if (!given.count("model")) a.model.model = file.model;
  if (!given.count("input") && file.fields.count("inputs")) a.model.inputs = file.inputs;
  if (!given.count("loss") && file.fields.count("loss")) a.loss = file.loss;
  if (!given.count("init_from") && file.fields.count("init_from")) a.init_from = file.init_from;
}

// Every page of List's jobs.
absl::StatusOr<std::vector<v1::Job>> ListAll(const Client& client) {
  std::vector<v1::Job> jobs;
  v1::ListJobsRequest req;
  req.set_page_size(1000);
  do {
    v1::ListJobsResponse page;
    if (auto st = client.Call("jobs", [&](grpc::ClientContext* ctx) { return client.stub->List(ctx, req, &page); }); !st.ok()) return st;
    for (v1::Job& job : *page.mutable_jobs()) jobs.push_back(std::move(job));
    req.set_page_token(page.next_page_token());
  } while (!req.page_token().empty());
  return jobs;
}

std::string TrainingLine(const v1::JobSpec& s) {
  const v1::TrainingConfig& t = s.training();
  return absl::StrCat(
      t.steps(), " steps on ", s.ranks(), " rank(s)", s.mesh_size() > 0 ? absl::StrCat(", mesh ", absl::StrJoin(s.mesh(), "x")) : "", ", ",
      t.optimizer(), " lr ", t.lr(),
      t.lr_schedule().empty() || t.lr_schedule() == "constant"
          ? (t.warmup_steps() > 0 ? absl::StrCat(" after ", t.warmup_steps(), " warm-up steps") : "")
          : absl::StrCat(" (", t.lr_schedule(), " to ", t.min_lr(), " after ", t.warmup_steps(), " warm-up steps)"),
      t.weight_decay() > 0 ? absl::StrCat(", weight decay ", t.weight_decay()) : "",
      t.max_grad_norm() > 0 ? absl::StrCat(", gradients clipped to norm ", t.max_grad_norm()) : "",
      ", data ", t.data(),
      t.eval_every() > 0 ? absl::StrCat(", evaluated every ", t.eval_every(), " steps on ", t.eval_batches(), " batch(es) of ",
                                        t.eval_data().empty() ? "the training data" : t.eval_data())
                         : "");
}

// "Step time:  45.1 ms measured (median of rank 0's steps after the first), 38.6 ms predicted
// (measured / predicted 1.17)\n", or nothing before the plan is made.
std::string StepTimeRow(const v1::Job& job) {
  const double measured = job.measured_step_seconds(), predicted = job.predicted_step_seconds();
  if (!(predicted > 0) && !(measured > 0)) return "";
  std::string row = "Step time:  ";
  if (measured > 0) absl::StrAppend(&row, absl::StrFormat("%.1f ms measured (median of rank 0's steps after the first), ", measured * 1e3));
  absl::StrAppend(&row, predicted > 0 ? absl::StrFormat("%.1f ms predicted", predicted * 1e3) : "none predicted");
  if (measured > 0 && predicted > 0) absl::StrAppend(&row, absl::StrFormat(" (measured / predicted %.2f)", measured / predicted));
  return row + "\n";
}

void PrintJob(const v1::Job& job) {
  const v1::JobSpec& s = job.spec();
  std::cout << "Job:        " << job.id() << " (" << s.name() << ")\n"
            << "State:      " << StateName(job.state()) << (job.error().empty() ? "" : "  " + job.error()) << "\n"
            << "Model:      " << (s.model().empty() ? absl::StrCat("graph ", s.graph().name()) : s.model()) << "\n"
            << "Training:   " << TrainingLine(s) << "\n"
            << "Budget:     " << (s.memory_per_device() > 0 ? FormatBytes(s.memory_per_device()) : "the device's memory") << " per "
            << (s.device().empty() ? "cpu" : s.device()) << " device (cost model: " << (s.device_type().empty() ? "the workers' measured profile" : s.device_type()) << ")\n"
            << (s.has_elastic() ? absl::StrCat("Devices:    ", job.devices() > 0 ? absl::StrCat(job.devices(), " now") : "none yet",
                                               " (elastic: ", s.elastic().min_devices(), " to ", s.elastic().max_devices(), ")\n")
                                : "")
            << "Plan:       " << (job.plan_summary().empty() ? "-" : job.plan_summary()) << "\n"
            << StepTimeRow(job)
            << "Progress:   step " << job.step() << "/" << s.training().steps() << (job.step() > 0 ? absl::StrFormat(", loss %.4f", job.loss()) : "")
            << (Restarts(job) > 0 ? absl::StrCat(" (restarted ", Restarts(job), " time(s))") : "")
            << (job.has_last_evaluation()
                    ? absl::StrFormat(", eval loss %.4f after step %d", job.last_evaluation().loss(), job.last_evaluation().step())
                    : "")
            << "\n"
            << "Created:    " << When(job.created_unix_seconds()) << " (" << Age(job.created_unix_seconds(), NowUnixSeconds()) << " ago)\n"
            << "Updated:    " << When(job.updated_unix_seconds()) << "\n";
}

// Why a job waits: the last thing said while it was in its present (waiting) state.
std::string WaitReason(const v1::Job& job, const std::vector<v1::JobEvent>& events) {
  if (job.state() != v1::PENDING && job.state() != v1::RESTARTING && job.state() != v1::PLANNING) return "";
  for (auto e = events.rbegin(); e != events.rend(); ++e) {
    if (e->state() != job.state()) break;
    if (e->step() == 0 && !e->message().empty()) return e->message();
  }
  return "";
}

}  // namespace

int RunSubmit(SubmitArgs a) {
  v1::JobSpec spec;
  if (auto flags = SpecFromFlags(a); flags.ok()) spec = *std::move(flags);
  else return ReportError(flags.status());
  if (!a.file.empty()) {
    if (!a.model.model.empty()) return ReportError(absl::InvalidArgumentError("give MODEL or -f FILE, not both"));
    auto file = ReadJobFile(a.file);
    if (!file.ok()) return ReportError(file.status());
    OverlayFile(*file, a.given, spec, a);
  }
  if (a.model.model.empty() && !spec.has_graph()) return ReportError(absl::InvalidArgumentError("give a MODEL (or -f job.yaml)"));
  if (spec.has_graph()) {
    // A graph from the job file (a job `get -o yaml` printed): its weights travel in it already.
    if (!a.init_from.empty()) return ReportError(absl::InvalidArgumentError("init_from with a job file's graph: give the model instead"));
    spec.clear_model();
  } else if (IsZooModelSpec(a.model.model) && a.model.inputs.empty() && a.init_from.empty()) {
    // Checked here too, so a typo is caught before it reaches the queue.
    if (auto built = BuildZooModel(a.model.model); !built.ok()) return ReportError(built.status());
    spec.set_model(a.model.model);
  } else {
    auto graph = LoadTrainingGraph(a.model.model, a.model.inputs, 0, 0, a.loss);
    if (!graph.ok()) return ReportError(graph.status());
    if (auto st = InitFrom(a.init_from, *graph); !st.ok()) return ReportError(st);
    // The coordinator takes no file paths: the model's weights travel in the graph.
    if (auto st = InlineParameterData(*graph); !st.ok()) return ReportError(st);
    spec.clear_model();
    *spec.mutable_graph() = *std::move(graph);
  }
  auto client = Connect(a.conn);
  if (!client.ok()) return ReportError(client.status());
  v1::SubmitJobRequest req;
  *req.mutable_spec() = spec;
  v1::Job job;
  if (auto st = client->Call("submit", [&](grpc::ClientContext* ctx) { return client->stub->Submit(ctx, req, &job); }); !st.ok()) {
    return ReportError(st);
  }
  if (a.conn.format == "name") {
    std::cout << "job/" << job.id() << "\n";
  } else if (!PrintStructured(a.conn.format, JobJson(job, false))) {
    std::cout << "submitted job " << job.id() << " (" << job.spec().name() << "): " << StateName(job.state()) << "\n";
    if (!a.wait && !a.follow) std::cout << "watch it with: mapctl watch " << job.id() << "\n";
  }
  // --wait: its events follow (as JSON lines under -o json), and the exit code is its outcome;
  // --follow: rank 0's output beside them.
  if (a.follow) return RunFollow(a.conn, job.id());
  return a.wait ? RunWatch(a.conn, job.id()) : kExitOk;
}

namespace {

// --state RUNNING,pending: the states named (any case); INVALID_ARGUMENT naming every state otherwise.
absl::StatusOr<std::set<v1::JobState>> ParseStates(const std::string& text) {
  std::set<v1::JobState> states;
  for (absl::string_view name : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    v1::JobState s;
    if (!v1::JobState_Parse(absl::AsciiStrToUpper(absl::StripAsciiWhitespace(name)), &s) || s == v1::JOB_STATE_UNSPECIFIED) {
      return absl::InvalidArgumentError(absl::StrCat("--state ", std::string(name).substr(0, 32),
                                                     ": not a job state; give PENDING, PLANNING, RUNNING, RESTARTING, SUCCEEDED, FAILED or CANCELLED"));
    }
    states.insert(s);
  }
  return states;
}

// One job's row of `jobs` (-o table, or wide).
std::vector<std::string> JobRow(const v1::Job& job, bool wide, double now) {
  std::vector<std::string> row = {std::to_string(job.id()), job.spec().name(), StateName(job.state()),
                                  absl::StrCat(job.step(), "/", job.spec().training().steps()), job.step() > 0 ? absl::StrFormat("%.4f", job.loss()) : "-",
                                  Devices(job), Age(job.created_unix_seconds(), now)};
  if (wide) {
    row.insert(row.end(), {job.plan_summary().empty() ? "-" : job.plan_summary(),
                           job.predicted_peak_bytes() > 0 ? FormatBytes(job.predicted_peak_bytes()) : "-", std::to_string(Restarts(job)),
                           When(job.updated_unix_seconds())});
  }
  return row;
}

// The listed jobs in `states` (every job when empty).
absl::StatusOr<std::vector<v1::Job>> ListInStates(const Client& client, const std::set<v1::JobState>& states) {
  auto jobs = ListAll(client);
  if (!jobs.ok()) return jobs.status();
  if (!states.empty()) {
    jobs->erase(std::remove_if(jobs->begin(), jobs->end(), [&](const v1::Job& j) { return !states.count(j.state()); }), jobs->end());
  }
  return jobs;
}

// Prints `jobs` as -o asks; returns the table's column widths (empty for other formats).
std::vector<size_t> PrintJobs(const JobArgs& a, const std::vector<v1::Job>& jobs) {
  nlohmann::json all = nlohmann::json::array();
  for (const v1::Job& job : jobs) all.push_back(JobJson(job, false));
  if (PrintStructured(a.format, all)) return {};
  if (a.format == "name") {
    for (const v1::Job& job : jobs) std::cout << "job/" << job.id() << "\n";
    return {};
  }
  const bool wide = a.format == "wide";
  std::vector<std::string> columns = {"ID", "NAME", "STATE", "STEP", "LOSS", "RANKS", "AGE"};
  if (wide) columns.insert(columns.end(), {"PLAN", "PEAK/DEVICE", "RESTARTS", "UPDATED"});
  Table t(columns);
  const double now = NowUnixSeconds();
  for (const v1::Job& job : jobs) t.Row(JobRow(job, wide, now));
  t.Print(std::cout);
  return t.Widths();
}

// What a watched listing prints a job again for: its state, step or restarts changed.
std::string Changes(const v1::Job& job) { return absl::StrCat(job.state(), "/", job.step(), "/", Restarts(job)); }

// `jobs -w`: the listing, then a line for each job that appears or changes (state, step,
// restarts), read every second, as `kubectl get -w` — one JSON object a line under -o json, a
// YAML document each under -o yaml. Runs until interrupted; a coordinator unreachable for
// kWatchReconnectSeconds ends it.
int WatchJobs(const JobArgs& a, const Client& client, const std::set<v1::JobState>& states, std::vector<v1::Job> jobs) {
  constexpr double kWatchReconnectSeconds = 120;
  std::map<int64_t, std::string> shown;
  for (const v1::Job& job : jobs) shown[job.id()] = Changes(job);
  const std::vector<size_t> widths = PrintJobs(a, jobs);
  std::cout << std::flush;
  double failing_since = -1;
  for (;;) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    auto now_jobs = ListInStates(client, states);
    if (!now_jobs.ok()) {
      const double now = NowUnixSeconds();
      if (failing_since < 0) failing_since = now;
      if (now - failing_since > kWatchReconnectSeconds || now_jobs.status().code() != absl::StatusCode::kUnavailable) {
        return ReportError(now_jobs.status());
      }
      continue;
    }
    failing_since = -1;
    const double now = NowUnixSeconds();
    for (const v1::Job& job : *now_jobs) {
      std::string now_changes = Changes(job);
      std::string& was = shown[job.id()];
      if (was == now_changes) continue;
      was = std::move(now_changes);
      if (a.format == "json") std::cout << JobJson(job, false).dump() << "\n";
      else if (a.format == "yaml") std::cout << "---\n" << ToYaml(JobJson(job, false));
      else if (a.format == "name") std::cout << "job/" << job.id() << "\n";
      else std::cout << Table::Line(JobRow(job, a.format == "wide", now), widths) << "\n";
    }
    std::cout << std::flush;
  }
}

}  // namespace

int RunJobs(const JobArgs& a, const std::string& state_filter, bool watch) {
  auto states = ParseStates(state_filter);
  if (!states.ok()) return ReportError(states.status());
  auto client = Connect(a);
  if (!client.ok()) return ReportError(client.status());
  auto jobs = ListInStates(*client, *states);
  if (!jobs.ok()) return ReportError(jobs.status());
  if (watch) return WatchJobs(a, *client, *states, *std::move(jobs));
  PrintJobs(a, *jobs);
  return kExitOk;
}

int RunGet(const JobArgs& a, int64_t id) {
  auto client = Connect(a);
  if (!client.ok()) return ReportError(client.status());
  auto job = GetJob(*client, id, absl::StrCat("get ", id));
  if (!job.ok()) return ReportError(job.status());
  if (PrintStructured(a.format, JobJson(*job, true))) return kExitOk;
  if (a.format == "name") {
    std::cout << "job/" << job->id() << "\n";
    return kExitOk;
  }
  PrintJob(*job);
  return kExitOk;
}

int RunDescribe(const JobArgs& a, int64_t id) {
  auto client = Connect(a);
  if (!client.ok()) return ReportError(client.status());
  auto job = GetJob(*client, id, absl::StrCat("describe ", id));
  if (!job.ok()) return ReportError(job.status());
  v1::JobEventsRequest req;
  req.set_id(id);
  v1::JobEventsResponse out;
  if (auto st = client->Call(absl::StrCat("describe ", id), [&](grpc::ClientContext* ctx) { return client->stub->Events(ctx, req, &out); });
      !st.ok()) {
    return ReportError(st);
  }
  const std::vector<v1::JobEvent> events(out.events().begin(), out.events().end());
  const std::string waiting = WaitReason(*job, events);
  if (a.format == "json" || a.format == "yaml") {
    nlohmann::json j = JobJson(*job, false);
    if (!waiting.empty()) j["waiting_reason"] = waiting;
    j["events"] = nlohmann::json::array();
    for (const v1::JobEvent& e : events) {
      if (e.step() == 0) j["events"].push_back(ToJson(e));
    }
    PrintStructured(a.format, j);
    return kExitOk;
  }
  PrintJob(*job);
  if (!waiting.empty()) std::cout << "Waiting:    " << waiting << "\n";
  if (!job->error().empty()) std::cout << "Last error: " << job->error() << "\n";
  // What happened, without the progress events (`mapctl logs` has them), the last 20.
  std::vector<const v1::JobEvent*> said;
  for (const v1::JobEvent& e : events) {
    if (e.step() == 0) said.push_back(&e);
  }
  std::cout << "Events:\n";
  if (said.size() > 20) std::cout << "  (" << said.size() - 20 << " earlier: mapctl logs " << id << ")\n";
  for (size_t i = said.size() > 20 ? said.size() - 20 : 0; i < said.size(); ++i) {
    std::cout << "  " << EventLine(*said[i], job->spec().training().steps()) << "\n";
  }
  return kExitOk;
}

int RunDelete(const JobArgs& a, int64_t id) {
  auto client = Connect(a);
  if (!client.ok()) return ReportError(client.status());
  v1::DeleteJobRequest req;
  req.set_id(id);
  v1::DeleteJobResponse out;
  if (auto st = client->Call(absl::StrCat("delete ", id), [&](grpc::ClientContext* ctx) { return client->stub->Delete(ctx, req, &out); });
      !st.ok()) {
    return ReportError(st);
  }
  if (PrintStructured(a.format, nlohmann::json{{"id", id}, {"deleted", true}})) return kExitOk;
  std::cout << (a.format == "name" ? absl::StrCat("job/", id) : absl::StrCat("job ", id, " deleted")) << "\n";
  return kExitOk;
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
  if (PrintStructured(a.format, nlohmann::json{{"id", job.id()}, {"state", StateName(job.state())}})) return kExitOk;
  std::cout << (a.format == "name" ? absl::StrCat("job/", job.id()) : absl::StrCat("job ", job.id(), ": ", StateName(job.state()))) << "\n";
  return kExitOk;
}

int RunWorkers(const JobArgs& a) {
  auto client = Connect(a);
  if (!client.ok()) return ReportError(client.status());
  v1::ListWorkersResponse out;
  if (auto st = client->Call("workers", [&](grpc::ClientContext* ctx) { return client->workers->List(ctx, {}, &out); }); !st.ok()) {
    return ReportError(st);
  }
  nlohmann::json all = nlohmann::json::array();
  for (const auto& w : out.workers()) all.push_back(ToJson(w));
  if (PrintStructured(a.format, all)) return kExitOk;
  if (a.format == "name") {
    for (const auto& w : out.workers()) std::cout << "worker/" << w.id() << "\n";
    return kExitOk;
  }
  Table t({"ID", "HOST", "STATE", "DEVICES", "PROFILE", "LAST HEARTBEAT", "METRICS"});
  for (const auto& w : out.workers()) {
    std::vector<std::string> devices;
    for (const auto& d : w.devices()) devices.push_back(absl::StrCat(d.name(), " (", FormatBytes(d.memory_bytes()), ")"));
    const std::string profile = !w.has_profile() ? "catalogue"
                                                 : absl::StrFormat("measured %s: %.0f GFLOP/s", When(w.profile().measured_unix_seconds()),
                                                                   w.profile().fp32_flops() / 1e9);
    t.Row({w.id(), w.hostname(), v1::WorkerState_Name(w.state()), absl::StrJoin(devices, ", "), profile,
           When(w.last_heartbeat_unix_seconds()), w.metrics_address().empty() ? "-" : w.metrics_address()});
  }
  t.Print(std::cout);
  return kExitOk;
}

void AddJobCommands(CLI::App& app, Commands& out) {
  // Job commands against the coordinator (docs/coordinator.md), with one connection's flags.
  auto conn = std::make_shared<JobArgs>();
  auto args = std::make_shared<SubmitArgs>();
  CLI::App* submit = app.add_subcommand("submit", "Submit a training job to the coordinator (mapd)");
  submit->add_option("MODEL", args->model.model, "Zoo spec, .pt archive or .pb/.json graph");
  submit->add_option("-f,--file", args->file, "A job file (YAML): model, steps, ranks, mesh, memory_per_device, ...");
  submit->add_option("--input", args->model.inputs, "Input spec NAME:DTYPE[D0,D1,...] (repeatable)");
  submit->add_option("--loss", args->loss, "auto | output | cross_entropy | mse")->capture_default_str();
  submit->add_option("--name", args->name, "Name shown by `mapctl jobs` (default: the model)");
  CLI::Option* wait = submit->add_flag("--wait", args->wait, "Then follow the job as `mapctl watch` does; exit 0 succeeded, 1 failed, 3 cancelled");
  submit->add_flag("--follow", args->follow, "Then print its events and rank 0's output as they come (as `ray job submit` streams); exit as --wait")
      ->excludes(wait);
  submit->add_option("--ranks", args->ranks, "Devices to train on")->capture_default_str();
  submit->add_option("--mesh", args->mesh, "Pin the mesh shape, e.g. 2x2");
  submit->add_option("--device", args->device, "What the ranks run on: cpu (Gloo) | cuda (NCCL, on workers that offer GPUs)")
      ->capture_default_str();
  submit->add_option("--device-type", args->device_type,
                     "The cost model's device: a catalogue or operator profile name (default: the measured profile of the workers it "
                     "runs on, the catalogue's cpu where they sent none)");
  submit->add_option("--memory-per-device", args->memory_per_device, "Budget per device, e.g. 40GiB");
  AddTrainingFlags(submit, &args->training, "paths under the workers' --data-root");
  submit->add_option("--init-from", args->init_from,
                     "Start from these weights: a PyTorch state dict read here and sent in the job's graph");
  submit->add_option("--zero", args->zero, "ZeRO stage: auto | 0 | 1 | 2 | 3")->capture_default_str();
  submit->add_option("--recompute", args->recompute, "auto | off | all | LAYER,...")->capture_default_str();
  submit->add_option("--pipeline-stages", args->pipeline_stages,
                     "1 (no stages) | N (the layers cut into N stages of ranks/N devices, 1F1B; micro-batches 1 then means auto) | auto")
      ->capture_default_str();
  submit->add_option("--pin", args->pin,
                     "Fix parts of the configuration and plan the rest, as `mapctl plan --pin`: tp=T,pp=P,mbs=S,"
                     "recompute=full|off,zero=Z (dp=D too, except for an elastic job)");
  submit->add_option("--batch-norm", args->batch_norm,
                     "sync (statistics over the whole batch) | local (over each rank's 1/ranks of it, as PyTorch DDP's "
                     "BatchNorm: no collective; the groups stay when an elastic job changes its devices)")
      ->check(CLI::IsMember({"sync", "local"}))
      ->capture_default_str();
  submit->add_option("--elastic", args->elastic,
                     "MIN[:MAX]: after a lost worker, go on with at least MIN devices (re-planned, checkpoint resharded) and grow "
                     "back up to MAX (default --ranks) at checkpoints; needs --checkpoint-every and a mapd with --checkpoint-dir");
  AddConnectionFlags(submit, conn.get());
  submit->footer(kModelHelp);
  out.push_back({submit, [submit, conn, args] {
    // The flags typed for submit, by their job-file names: they win over -f's fields.
    for (const CLI::Option* o : submit->get_options()) {
      if (o->count() == 0) continue;
      std::string name = o->get_lnames().empty() ? o->get_name() : o->get_lnames()[0];
      if (name == "MODEL") name = "model";
      std::replace(name.begin(), name.end(), '-', '_');
      args->given.insert(name);
    }
    args->conn = *conn;
    return RunSubmit(*args);
  }});
  CLI::App* jobs_cmd = app.add_subcommand("jobs", "List the coordinator's jobs");
  AddConnectionFlags(jobs_cmd, conn.get());
  auto states = std::make_shared<std::string>();
  auto watch = std::make_shared<bool>(false);
  jobs_cmd->add_option("--state", *states, "Only jobs in these states: RUNNING, or PENDING,RUNNING (any case)");
  jobs_cmd->add_flag("-w,--watch", *watch, "After the list, a line for each job that appears or changes state, step or restarts, until interrupted (as kubectl get -w)");
  out.push_back({jobs_cmd, [conn, states, watch] { return RunJobs(*conn, *states, *watch); }});
  auto id = std::make_shared<int64_t>(0);
  auto id_cmd = [&](const char* name, const char* help, std::function<int(const JobArgs&, int64_t)> run) {
    CLI::App* cmd = AddJobIdCommand(app, name, help, id.get(), conn.get());
    out.push_back({cmd, [conn, id, run] { return run(*conn, *id); }});
  };
  id_cmd("get", "Show one job: state, plan, progress", RunGet);
  id_cmd("describe", "Show a job in full: state, why it waits, plan, last error and its events", RunDescribe);
  id_cmd("cancel", "Cancel a job", RunCancel);
  id_cmd("delete", "Forget a finished job with its events and output (cancel a running one first)", RunDelete);
  CLI::App* workers = app.add_subcommand("workers", "List the workers registered with the coordinator, with their leases");
  AddConnectionFlags(workers, conn.get());
  out.push_back({workers, [conn] { return RunWorkers(*conn); }});
}

}  // namespace mapd::cli

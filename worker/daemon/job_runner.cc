#include "worker/daemon/job_runner.h"

#include <filesystem>
#include <iostream>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "planner/ir/serialize.h"
#include "worker/launch/checkpoint_commit.h"
#include "worker/launch/launcher.h"

namespace mapd {

void DeclareJobMetrics(MetricsRegistry* m) {
  for (auto st : {
           m->Gauge("mapd_worker_ranks_running", "Ranks of jobs running on this worker now."),
           m->Counter("mapd_worker_jobs_total", "Jobs whose ranks ran here, by outcome (succeeded, failed, cancelled = stopped by the coordinator)."),
           m->Gauge("mapd_worker_step", "The last training step a rank finished."),
           m->Histogram("mapd_worker_step_seconds", "Wall time of a training step on a rank.",
                        {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}),
           m->Gauge("mapd_worker_loss", "The training loss of the last step (every rank reports the global loss)."),
           m->Gauge("mapd_worker_items_per_second", "Training throughput at the last step, in the job's units (tokens or samples) per second."),
           m->Gauge("mapd_worker_model_flops_utilization",
                    "Model FLOPs utilisation at the last step: the model's forward and backward FLOPs over (step time x ranks x peak FLOP/s)."),
           m->Gauge("mapd_worker_memory_live_bytes", "Bytes a rank's tensors hold at the end of the last step (counting allocator)."),
           m->Gauge("mapd_worker_memory_peak_bytes", "A rank's peak bytes in the last step (counting allocator)."),
           m->Gauge("mapd_worker_predicted_peak_bytes", "The peak the planner predicts for the rank (its program profiled)."),
           m->Gauge("mapd_worker_predicted_step_seconds", "The step time the planner predicts for the rank (its device type's cost model)."),
           m->Counter("mapd_worker_collective_seconds_total", "Time a rank spent in collectives, by kind."),
           m->Counter("mapd_worker_collective_bytes_total", "Bytes a rank sent into collectives (its input tensors), by kind."),
       }) {
    if (!st.ok()) std::cerr << "mapd-worker: " << st.message() << "\n";
  }
}

JobRunner::JobRunner(v1::RankAssignment assignment, JobRunnerOptions options, ReportFn report, MetricsRegistry* metrics)
    : assignment_(std::move(assignment)), options_(std::move(options)), report_(std::move(report)), metrics_(metrics) {
  dir_ = absl::StrCat(options_.work_dir, "/job-", assignment_.job_id(), assignment_.attempt() > 0 ? absl::StrCat("-", assignment_.attempt()) : "");
  // Shared storage (the coordinator commits), or this worker's own directory (it commits).
  shared_checkpoints_ = !assignment_.checkpoint_dir().empty();
  checkpoint_dir_ = shared_checkpoints_ ? assignment_.checkpoint_dir() : dir_ + "/checkpoints";
  for (int64_t d : assignment_.mesh()) world_ *= static_cast<int>(d);
}

JobRunner::~JobRunner() {
  cancel_ = true;
  if (thread_.joinable()) thread_.join();
}

void JobRunner::Start() {
  thread_ = std::thread([this] { Run(); });
}

void JobRunner::Send(v1::ReportRequest& report) {
  report.set_job_id(assignment_.job_id());
  report.set_attempt(assignment_.attempt());
  if (report_(report)) cancel_ = true;
  report.Clear();
}

void JobRunner::OnLine(int index, const std::string& line) {
  auto j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.contains("begin") || j.contains("done")) return;
  const v1::RankAssignment& a = assignment_;
  const int rank = a.ranks(index);
  const Labels labels = {{"job_id", std::to_string(a.job_id())}, {"rank", std::to_string(rank)}};
  if (j.contains("checkpoint")) {
    const int64_t step = j.value("checkpoint", int64_t{0});
    if (++checkpoint_shards_[step] < a.ranks_size()) return;
    // This worker's shards of the step are all written. On shared storage the coordinator commits
    // once every worker's are there; otherwise they are committed here.
    if (!shared_checkpoints_) {
      v1::CheckpointMeta meta;
      meta.set_step(step);
      for (int64_t d : a.mesh()) meta.add_mesh(d);
      meta.set_ranks(world_);
      meta.set_plan(a.plan());
      if (auto st = CommitCheckpointStep(checkpoint_dir_, meta); !st.ok()) {
        std::cerr << "mapd-worker: job " << a.job_id() << ": checkpoint step " << step << " not committed: " << st.message() << "\n";
        return;
      }
    }
    pending_.set_checkpoint_step(step);
    Send(pending_);
    return;
  }
  if (!j.contains("step")) return;
  v1::RankStep* s = pending_.add_steps();
  s->set_rank(rank);
  s->set_step(j.value("step", int64_t{0}));
  s->set_loss(j.value("loss", 0.0));
  s->set_seconds(j.value("seconds", 0.0));
  s->set_peak_bytes(j.value("peak_bytes", int64_t{0}));
  metrics_->Set("mapd_worker_step", labels, static_cast<double>(s->step()));
  metrics_->Observe("mapd_worker_step_seconds", labels, s->seconds());
  metrics_->Set("mapd_worker_loss", labels, s->loss());
  metrics_->Set("mapd_worker_memory_peak_bytes", labels, static_cast<double>(s->peak_bytes()));
  metrics_->Set("mapd_worker_memory_live_bytes", labels, j.value("live_bytes", 0.0));
  if (s->seconds() > 0) {
    Labels with_unit = labels;
    with_unit["unit"] = a.item_unit().empty() ? "samples" : a.item_unit();
    metrics_->Set("mapd_worker_items_per_second", with_unit, static_cast<double>(a.items_per_step()) / s->seconds());
    if (a.device_peak_flops() > 0) {
      metrics_->Set("mapd_worker_model_flops_utilization", labels,
                    a.model_flops_per_step() / (s->seconds() * world_ * a.device_peak_flops()));
    }
  }
  if (j.contains("collectives") && j["collectives"].is_object()) {
    for (const auto& [kind, c] : j["collectives"].items()) {
      Labels by_kind = labels;
      by_kind["kind"] = kind;
      metrics_->Add("mapd_worker_collective_seconds_total", by_kind, c.value("seconds", 0.0));
      metrics_->Add("mapd_worker_collective_bytes_total", by_kind, c.value("bytes", 0.0));
    }
  }
  // Rank 0's steps are the job's progress: report them as they come; the others' ride along.
  if (index == 0) Send(pending_);
}

void JobRunner::Run() {
  const v1::RankAssignment& a = assignment_;
  const int local = a.ranks_size();
  // The last report carries the steps not yet reported with the outcome.
  auto finish = [&](const absl::Status& st) {
    pending_.set_finished(true);
    pending_.set_code(static_cast<int>(st.code()));
    pending_.set_error(std::string(st.message()));
    std::cout << "mapd-worker: job " << a.job_id() << " (rank " << a.ranks(0) << (local > 1 ? absl::StrCat("-", a.ranks(local - 1)) : "")
              << "): " << (st.ok() ? "done" : st.ToString()) << std::endl;
    Send(pending_);
    // Ranks that failed after the coordinator stopped the job (their peers on another worker were
    // stopped first, say) were stopped, not failed: the reply to the last report says so.
    const char* outcome = st.ok() ? "succeeded" : (cancel_ || st.code() == absl::StatusCode::kCancelled) ? "cancelled" : "failed";
    metrics_->Add("mapd_worker_jobs_total", {{"outcome", outcome}});
    done_ = true;
  };
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) return finish(absl::InternalError(absl::StrCat("cannot make ", dir_, ": ", ec.message())));
  if (auto st = WriteGraphFile(a.graph(), dir_ + "/graph.pb"); !st.ok()) return finish(st);
  for (int i = 0; i < local; ++i) {
    if (auto st = WriteStringToFileAtomic(absl::StrCat(dir_, "/rank_", a.ranks(i), ".pb"), a.programs(i).SerializeAsString()); !st.ok()) {
      return finish(st);
    }
    const Labels labels = {{"job_id", std::to_string(a.job_id())}, {"rank", std::to_string(a.ranks(i))}};
    if (i < a.predicted_peak_bytes_size()) metrics_->Set("mapd_worker_predicted_peak_bytes", labels, static_cast<double>(a.predicted_peak_bytes(i)));
    if (i < a.predicted_step_seconds_size()) metrics_->Set("mapd_worker_predicted_step_seconds", labels, a.predicted_step_seconds(i));
  }
  const size_t colon = a.store_address().rfind(':');
  if (colon == std::string::npos) return finish(absl::InvalidArgumentError(absl::StrCat("store address '", a.store_address(), "' is not host:port")));
  const std::string host = a.store_address().substr(0, colon), port = a.store_address().substr(colon + 1);
  const int64_t every = a.checkpoint_every() > 0 ? a.checkpoint_every() : a.steps();

  LaunchOptions lo;
  lo.ranks = local;
  lo.rank_names.assign(a.ranks().begin(), a.ranks().end());
  lo.cancel = &cancel_;
  lo.silence_timeout = std::chrono::seconds(options_.rank_timeout_seconds);
  lo.env = {"OMP_NUM_THREADS=1"};
  lo.argv_for = [&](int i) {
    std::vector<std::string> argv{options_.rank_program, "_rank", "--run-dir", dir_, "--rank", std::to_string(a.ranks(i)), "--host", host,
                                  "--port", port, "--steps", std::to_string(a.steps()), "--optimizer", a.optimizer(), "--lr",
                                  absl::StrCat(a.lr()), "--seed", std::to_string(a.seed()), "--data", a.data(), "--rank-timeout", std::to_string(options_.rank_timeout_seconds), "--checkpoint-dir", checkpoint_dir_,
                                  "--checkpoint-every", std::to_string(every)};
    if (a.memory_cap() > 0) argv.insert(argv.end(), {"--memory-cap", std::to_string(a.memory_cap())});
    if (a.resume_step() > 0) argv.insert(argv.end(), {"--resume-step", std::to_string(a.resume_step())});
    // "cpu:1" runs on the CPU (Gloo); "cuda:1" on GPU 1 of this machine (NCCL).
    const std::string& device = a.devices(i);
    if (device.rfind("cuda:", 0) == 0) {
      argv.insert(argv.end(), {"--device", "cuda", "--cuda-device", device.substr(5)});
    } else {
      argv.insert(argv.end(), {"--device", "cpu"});
    }
    return argv;
  };
  finish(LaunchRanks(lo, [&](int index, const std::string& line) { OnLine(index, line); }));
}

}  // namespace mapd

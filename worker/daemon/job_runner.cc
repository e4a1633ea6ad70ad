#include "worker/daemon/job_runner.h"

#include "worker/daemon/job_data.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint_commit.h"
#include "common/data_spec.h"
#include "common/report_limits.h"
#include "common/store_secret.h"
#include "worker/launch/launcher.h"
#include "worker/launch/rank_command.h"
#include "worker/shards/shard_resume.h"

namespace mapd {

namespace {
// Committed steps a worker keeps of a job's checkpoints in its own work dir (without shared
// storage): enough to resume from the last and the one before it.
constexpr int kKeepCheckpointSteps = 3;

// A job's data spec with its files resolved under --data-root (the coordinator checked the spec;
// a worker checks again what it reads).
absl::StatusOr<DataSpec> ResolveDataSpec(const std::string& root, const std::string& spec) {
  auto data = ParseDataSpec(spec.empty() ? "synthetic" : spec);
  if (!data.ok()) return data.status();
  for (std::string& file : data->files) {
    auto path = ResolveJobData(root, file);
    if (!path.ok()) return path.status();
    if (data->kind == "npy" && path->find(',') != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("job data '", file, "' resolves to '", *path, "', whose ',' npy cannot tell apart"));
    }
    file = *path;
  }
  return data;
}

}  // namespace

void DeclareJobMetrics(MetricsRegistry* m) {
  for (auto st : {
           m->Gauge("mapd_worker_ranks_running", "Ranks of jobs running on this worker now."),
           m->Counter("mapd_worker_jobs_total", "Jobs whose ranks ran here, by outcome (succeeded, failed, cancelled = stopped by the coordinator)."),
           m->Gauge("mapd_worker_step", "The last training step a rank finished."),
           m->Histogram("mapd_worker_step_seconds", "Wall time of a training step on a rank.",
                        {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}),
           m->Gauge("mapd_worker_loss", "The training loss of the last step (every rank reports the global loss)."),
           m->Gauge("mapd_worker_learning_rate", "The learning rate of the last step's update (the job's schedule)."),
           m->Gauge("mapd_worker_eval_loss", "The mean loss over the evaluation batches at the job's last evaluation (rank 0)."),
           m->Counter("mapd_worker_tokens_total",
                      "Tokens trained, the rank's share (the job's tokens a step over its ranks): sum by job_id for the job's; rate() for throughput."),
           m->Counter("mapd_worker_samples_total",
                      "Samples trained (jobs counted in samples), the rank's share (the job's samples a step over its ranks): sum by job_id for the job's."),
           m->Gauge("mapd_worker_model_flops_utilization_ratio",
                    "Model FLOPs utilisation at the last step, 0-1: the model's forward and backward FLOPs over (step time x ranks x peak FLOP/s)."),
           m->Gauge("mapd_worker_memory_live_bytes", "Bytes a rank's tensors hold at the end of the last step (counting allocator)."),
           m->Gauge("mapd_worker_memory_peak_bytes", "A rank's peak bytes in the last step (counting allocator)."),
           m->Gauge("mapd_worker_predicted_peak_bytes", "The peak the planner predicts for the rank (its program profiled)."),
           m->Gauge("mapd_worker_predicted_step_seconds", "The step time the planner predicts for the rank (its device type's cost model)."),
           m->Counter("mapd_worker_collective_seconds_total", "Time a rank spent in collectives, by kind."),
           m->Counter("mapd_worker_collective_bytes_total", "Bytes a rank sent into collectives (its input tensors), by kind."),
           m->Counter("mapd_worker_collectives_total", "Collectives a rank started, by kind (each costs a round trip, however small)."),
       }) {
    if (!st.ok()) std::cerr << "mapd-worker: " << st.message() << "\n";
  }
  // Every outcome from the start (at 0), so rate() and increase() see the first job end.
  for (const char* outcome : {"succeeded", "failed", "cancelled"}) m->Add("mapd_worker_jobs_total", {{"outcome", outcome}}, 0);
}

Labels JobRunner::RankLabels(int index) const {
  const v1::RankAssignment& a = assignment_;
  return {{"job_id", std::to_string(a.job_id())},
          {"rank", std::to_string(a.ranks(index))},
          {"worker", options_.worker_id},
          {"device", index < a.devices_size() ? a.devices(index) : ""}};
}

JobRunner::JobRunner(v1::RankAssignment assignment, JobRunnerOptions options, ReportFn report, MetricsRegistry* metrics)
    : assignment_(std::move(assignment)), options_(std::move(options)), report_(std::move(report)), metrics_(metrics) {
  dir_ = absl::StrCat(options_.work_dir, "/job-", assignment_.job_id(), assignment_.attempt() > 0 ? absl::StrCat("-", assignment_.attempt()) : "");
  // Shared storage (the coordinator commits), or this worker's own directory (it commits).
  shared_checkpoints_ = !assignment_.checkpoint_dir().empty();
  checkpoint_dir_ = shared_checkpoints_ ? assignment_.checkpoint_dir() : dir_ + "/checkpoints";
  for (int64_t d : assignment_.mesh()) world_ *= static_cast<int>(d);
  // Without shared storage, this worker keeps the job's shards (its own, and its peer's) for
  // callers with the job's shard secret, and pushes its own to the peer after each commit.
  if (!shared_checkpoints_ && options_.shards != nullptr && !assignment_.shard_secret().empty()) {
    options_.shards->Allow(assignment_.job_id(), assignment_.shard_secret());
    shard_files_ = ShardFiles(std::vector<int>(assignment_.ranks().begin(), assignment_.ranks().end()));
    if (!assignment_.shard_peer().empty()) {
      replicator_ = std::make_unique<ShardReplicator>(options_.shards, assignment_.shard_peer(),
                                                      ShardKey{assignment_.job_id(), 0, assignment_.shard_secret()}, shard_files_);
    }
  }
}

JobRunner::~JobRunner() {
  cancel_ = true;
  if (thread_.joinable()) thread_.join();
  replicator_.reset();
}

void JobRunner::Start() {
  thread_ = std::thread([this] { Run(); });
}

void JobRunner::Send(v1::ReportRequest& report) {
  for (auto& [rank, buffer] : output_) {
    if (buffer.text.empty() && buffer.dropped_bytes == 0) continue;
    v1::RankOutput* out = report.add_outputs();
    out->set_rank(rank);
    out->set_text(std::move(buffer.text));
    out->set_dropped_bytes(buffer.dropped_bytes);
    buffer = RankOutputBuffer();
  }
  last_sent_ = std::chrono::steady_clock::now();
  report.set_job_id(assignment_.job_id());
  report.set_attempt(assignment_.attempt());
  if (report_(report)) cancel_ = true;
  report.Clear();
}

void JobRunner::OnCheckpoint(int64_t step) {
  const v1::RankAssignment& a = assignment_;
  if (++checkpoint_shards_[step] < a.ranks_size()) return;
  // This worker's shards of the step are all written. On shared storage the coordinator commits
  // once every worker's are there; otherwise they are committed here.
  if (!shared_checkpoints_) {
    const std::vector<int64_t> mesh(a.mesh().begin(), a.mesh().end());
    if (auto st = CommitCheckpointStep(checkpoint_dir_, CheckpointMetaFor(step, world_, mesh, a.plan()), kKeepCheckpointSteps, a.attempt());
        !st.ok()) {
      std::cerr << "mapd-worker: job " << a.job_id() << ": checkpoint step " << step << " not committed: " << st.message() << "\n";
      return;
    }
    if (options_.shards != nullptr && !a.shard_secret().empty()) return KeepShards(step);
  }
  ReportCheckpoint(step);
}

void JobRunner::ReportCheckpoint(int64_t step) {
  reported_checkpoint_ = step;
  pending_.set_checkpoint_step(step);
  Send(pending_);
}

void JobRunner::KeepShards(int64_t step) {
  const v1::RankAssignment& a = assignment_;
  if (auto st = options_.shards->Keep(a.job_id(), step, CheckpointStepDir(checkpoint_dir_, step), shard_files_, /*link=*/true); !st.ok()) {
    std::cerr << "mapd-worker: job " << a.job_id() << ": checkpoint step " << step << " not kept for peers: " << st.message() << "\n";
    return;
  }
  if (replicator_ == nullptr) return ReportCheckpoint(step);  // no peer keeps it (none with a shard service)
  replicator_->Committed(step);  // reported once the peer has it (ReportReplicated)
}

void JobRunner::ReportReplicated() {
  if (TakeReplicated()) Send(pending_);
}

bool JobRunner::TakeReplicated() {
  if (replicator_ == nullptr || replicator_->replicated() <= reported_checkpoint_) return false;
  reported_checkpoint_ = replicator_->replicated();
  pending_.set_checkpoint_step(reported_checkpoint_);
  return true;
}

void JobRunner::OnStep(int index, const v1::StepDone& d) {
  const v1::RankAssignment& a = assignment_;
  const int rank = a.ranks(index);
  const Labels labels = RankLabels(index);
  v1::RankStep* s = pending_.add_steps();
  s->set_rank(rank);
  s->set_step(d.step());
  s->set_loss(d.loss());
  s->set_seconds(d.seconds());
  s->set_peak_bytes(d.peak_bytes());
  s->set_lr(d.lr());
  metrics_->Set("mapd_worker_step", labels, static_cast<double>(d.step()));
  metrics_->Set("mapd_worker_learning_rate", labels, d.lr());
  metrics_->Observe("mapd_worker_step_seconds", labels, d.seconds());
  metrics_->Set("mapd_worker_loss", labels, d.loss());
  metrics_->Set("mapd_worker_memory_peak_bytes", labels, static_cast<double>(d.peak_bytes()));
  metrics_->Set("mapd_worker_memory_live_bytes", labels, static_cast<double>(d.live_bytes()));
  metrics_->Add(a.item_unit() == "tokens" ? "mapd_worker_tokens_total" : "mapd_worker_samples_total", labels,
                static_cast<double>(a.items_per_step()) / world_);
  if (d.seconds() > 0 && a.device_peak_flops() > 0) {
    metrics_->Set("mapd_worker_model_flops_utilization_ratio", labels, a.model_flops_per_step() / (d.seconds() * world_ * a.device_peak_flops()));
  }
  for (const auto& [kind, c] : d.collectives()) {
    Labels by_kind = labels;
    by_kind["kind"] = kind;
    metrics_->Add("mapd_worker_collective_seconds_total", by_kind, c.seconds());
    metrics_->Add("mapd_worker_collective_bytes_total", by_kind, c.bytes());
    metrics_->Add("mapd_worker_collectives_total", by_kind, static_cast<double>(c.calls()));
  }
  ReportReplicated();
  // Rank 0's steps are the job's progress: report them as they come; the others' ride along,
  // or go on their own every 256 (a worker without rank 0; the coordinator takes at most 4096 a
  // report).
  if (rank == 0 || pending_.steps_size() >= 256) Send(pending_);
}

void JobRunner::OnOutput(int index, std::string_view text) {
  const int rank = assignment_.ranks(index);
  // The worker's own copy, rotated: `rank_R.log` (and `rank_R.log.1`) in the run directory.
  auto log = logs_.find(rank);
  if (log == logs_.end()) log = logs_.try_emplace(rank, absl::StrCat(dir_, "/rank_", rank, ".log"), kRankLogFileBytes).first;
  log->second.Append(text);
  // The coordinator's copy: within a report's bound, the oldest unsent bytes dropped first.
  const int64_t bound = std::max<int64_t>(kMinRankOutputBufferBytes, kMaxRankOutputBytesPerReport / std::max(1, assignment_.ranks_size()));
  RankOutputBuffer& b = output_[rank];
  b.text.append(text);
  if (static_cast<int64_t>(b.text.size()) > bound) {
    const size_t cut = b.text.size() - static_cast<size_t>(bound);
    b.text.erase(0, cut);
    b.dropped_bytes += static_cast<int64_t>(cut);
  }
  if (std::chrono::steady_clock::now() - last_sent_ >= std::chrono::seconds(1)) Send(pending_);
}

void JobRunner::OnEvent(int index, const v1::RankEvent& e) {
  const int rank = assignment_.ranks(index);
  if (e.has_store_ready()) {
    // Rank 0 listens: the coordinator passes the address on to the job's other workers.
    pending_.set_store_address(absl::StrCat(options_.advertise_host, ":", e.store_ready().port()));
    Send(pending_);
  } else if (e.has_checkpoint_written()) {
    OnCheckpoint(e.checkpoint_written().step());
  } else if (e.has_step_done()) {
    OnStep(index, e.step_done());
  } else if (e.has_evaluated() && rank == 0) {
    // Every rank evaluates; rank 0 reports (its loss is the global one, as every rank's).
    const v1::Evaluated& v = e.evaluated();
    v1::Evaluation* out = pending_.add_evaluations();
    out->set_step(v.step());
    out->set_loss(v.loss());
    out->set_batches(v.batches());
    metrics_->Set("mapd_worker_eval_loss", RankLabels(index), v.loss());
    Send(pending_);
  }
}

absl::StatusOr<v1::RankJob> JobRunner::RankJobOf() const {
  const v1::RankAssignment& a = assignment_;
  v1::RankJob job;
  // The job's training, its files resolved under this worker's --data-root.
  *job.mutable_training() = a.training();
  auto data = ResolveDataSpec(options_.data_root, a.training().data());
  if (!data.ok()) return data.status();
  job.mutable_training()->set_data(data->ToString());
  if (a.training().eval_every() <= 0) {
    job.mutable_training()->clear_eval_data();  // no evaluation: its files are not read
  } else if (!a.training().eval_data().empty()) {  // (without, the ranks evaluate on the training data's source)
    auto eval = ResolveDataSpec(options_.data_root, a.training().eval_data());
    if (!eval.ok()) return eval.status();
    job.mutable_training()->set_eval_data(eval->ToString());
  }
  job.set_device(!a.devices().empty() && a.devices(0).rfind("cuda:", 0) == 0 ? "cuda" : "cpu");
  job.set_memory_cap(a.memory_cap());
  job.set_timeout_seconds(options_.rank_timeout_seconds);
  job.set_checkpoint_dir(checkpoint_dir_);
  job.set_resume_step(a.resume_step());
  job.set_resume_resharded(a.resume_resharded());
  job.set_attempt(a.attempt());
  job.set_local_host(options_.advertise_host);
  return job;
}

void JobRunner::Run() {
  const v1::RankAssignment& a = assignment_;
  const int local = a.ranks_size();
  // The last report carries the steps not yet reported with the outcome.
  auto finish = [&](const absl::Status& st) {
    // The last checkpoint kept by the peer, before the end is told (a job ends with its final one).
    if (replicator_ != nullptr && st.ok() && !cancel_) replicator_->Drain(120);
    TakeReplicated();
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
  std::vector<int> ranks(a.ranks().begin(), a.ranks().end());
  std::vector<const v1::RankProgram*> programs;
  for (const v1::RankProgram& p : a.programs()) programs.push_back(&p);
  auto job = RankJobOf();
  if (!job.ok()) return finish(job.status());
  // Resuming without shared storage: the step's shards come from the workers that keep them.
  if (a.resume_step() > 0 && !shared_checkpoints_) {
    if (auto st = FetchResumeShards(a, checkpoint_dir_, 60 + options_.rank_timeout_seconds); !st.ok()) return finish(st);
  }
  if (auto st = WriteRunDirectory(dir_, a.graph(), *job, ranks, programs); !st.ok()) return finish(st);
  for (int i = 0; i < local; ++i) {
    const Labels labels = RankLabels(i);
    if (i < a.predicted_peak_bytes_size()) metrics_->Set("mapd_worker_predicted_peak_bytes", labels, static_cast<double>(a.predicted_peak_bytes(i)));
    if (i < a.predicted_step_seconds_size()) metrics_->Set("mapd_worker_predicted_step_seconds", labels, a.predicted_step_seconds(i));
  }
  LaunchOptions lo;
  lo.ranks = local;
  lo.rank_names = ranks;
  lo.cancel = &cancel_;
  lo.silence_timeout = std::chrono::seconds(options_.rank_timeout_seconds);
  lo.env = {"OMP_NUM_THREADS=1"};
  // The attempt's rendezvous secret, as the coordinator drew it: every worker of the job has the same.
  if (auto st = CheckStoreSecret(a.store_secret()); !st.ok()) {
    return finish(absl::InvalidArgumentError(absl::StrCat("the assignment's store_secret: ", st.message())));
  }
  lo.store_secret = a.store_secret();
  lo.on_output = [this](int index, std::string_view text) { OnOutput(index, text); };
  // Rank 0 here: it hosts the store; the coordinator sent no address.
  const auto zero = std::find(ranks.begin(), ranks.end(), 0);
  if (zero != ranks.end()) {
    lo.store_host_index = static_cast<int>(zero - ranks.begin());
    lo.store_host = options_.advertise_host;
  } else if (a.store_address().empty()) {
    return finish(absl::InvalidArgumentError("the assignment has neither rank 0 nor the address of its rendezvous store"));
  } else {
    lo.store = a.store_address();
  }
  lo.argv_for = [&](int i, const std::string& store) {
    // "cpu:1" runs on the CPU (Gloo); "cuda:1" on GPU 1 of this machine (NCCL).
    const std::string& device = a.devices(i);
    const int gpu = device.rfind("cuda:", 0) == 0 ? std::atoi(device.c_str() + 5) : -1;
    return RankCommandLine({options_.rank_program, dir_, a.ranks(i), gpu, store});
  };
  finish(LaunchRanks(lo, [&](int index, const v1::RankEvent& e) { OnEvent(index, e); }));
}

}  // namespace mapd

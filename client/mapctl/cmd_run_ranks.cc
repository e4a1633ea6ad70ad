// `mapctl run --ranks N`: train under a plan on N local rank processes (like torchrun) — the
// plan from the planner (`--strategy map`), a baseline (`dp`, `tp`) or a saved one (`--plan`),
// lowered to one program per rank, ranks started and watched (worker/launch), their losses and
// memory reported; `--check-reference` also trains on one process and compares.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/mapctl/commands.h"
#include "client/mapctl/job_output.h"
#include "client/mapctl/model_loader.h"
#include "client/mapctl/torch_commands.h"
#include "client/mapctl/table.h"
#include "common/bytes.h"
#include "common/checkpoint/checkpoint_commit.h"
#include "common/file_io.h"
#include "model/graph/batch_norm_groups.h"
#include "planner/runnable/plan_request.h"
#include "planner/runnable/memory_margin.h"
#include "planner/runnable/runnable_plan.h"
#include "planner/lower/lowering.h"
#include "planner/lower/rank_cost.h"
#include "planner/lower/recompute.h"
#include "planner/plan/planner.h"
#include "planner/profile/profiler.h"
#include "proto/mapd/v1/checkpoint.pb.h"
#include "worker/calibrate/calibration_cache.h"
#include "worker/device/device_info.h"
#include "worker/rank/rank_main.h"
#include "worker/rank/reference_check.h"
#include "worker/launch/launcher.h"
#include "worker/launch/rank_command.h"

namespace mapd::cli {

namespace {

// The planning request `run` makes from its flags (planner/runnable/plan_request.h).
absl::StatusOr<PlanRequest> RunPlanRequest(const RunArgs& args, const MemoryMargin& margin) {
  auto device_type = ResolveDeviceType(args.device_type);
  if (!device_type.ok()) return device_type.status();
  auto choices = ChoicesFromFlags(args.ranks, args.mesh, *device_type, args.memory_per_device);
  if (!choices.ok()) return choices.status();
  PlanningChoices& c = *choices;
  c.optimizer = args.training.optimizer();
  c.precision = args.training.precision();
  c.zero = args.zero;
  c.recompute = args.recompute;
  c.micro_batches = args.training.micro_batches();
  c.pipeline_stages = args.pipeline_stages;
  c.pin = args.pin;
  c.strategy = args.strategy;
  auto request = PlanRequestOf(c);
  if (!request.ok()) return request.status();
  request->memory_margin = margin.fraction;  // learned on this host
  if (auto st = request->Validate(); !st.ok()) return st;  // a saved plan's run too
  return request;
}

// A saved plan's (--plan FILE), checked against the flags that would contradict it.
absl::StatusOr<RunnablePlan> SavedPlan(const RunArgs& args, const PlanRequest& request) {
  const int64_t micro_batches = request.planner.micro_batches;  // 0: auto; > 1 pins it
  auto bytes = ReadFileToString(args.plan);
  if (!bytes.ok()) return bytes.status();
  v1::Plan plan;
  if (!plan.ParseFromString(*bytes)) return absl::InvalidArgumentError(absl::StrCat(args.plan, " is not a saved plan (mapctl plan --save)"));
  const std::string saved_precision = plan.precision().empty() ? "fp32" : plan.precision();
  if (args.training.precision() != "auto" && args.training.precision() != saved_precision) {
    return absl::InvalidArgumentError(absl::StrCat("--precision ", args.training.precision(), " but ", args.plan, " is planned for ", saved_precision,
                                                   "; drop --precision or plan again with it"));
  }
  const int64_t saved_micro = std::max<int64_t>(1, plan.micro_batches());
  if (micro_batches > 1 && micro_batches != saved_micro) {
    return absl::InvalidArgumentError(absl::StrCat("--micro-batches ", micro_batches, " but ", args.plan, " is planned for ", saved_micro,
                                                   "; drop --micro-batches or plan again with it"));
  }
  int64_t devices = std::max(1, plan.pipeline_stages());
  for (int64_t d : plan.mesh()) devices *= d;
  if (args.ranks > 1 && args.ranks != devices) {
    return absl::InvalidArgumentError(absl::StrCat("--ranks ", args.ranks, " but the plan's mesh ", absl::StrJoin(plan.mesh(), "x"),
                                                   plan.pipeline_stages() > 1 ? absl::StrCat(" on each of ", plan.pipeline_stages(), " stages") : "",
                                                   " has ", devices, " devices; drop --ranks or make them agree"));
  }
  return SavedPlanToRun(plan, request, absl::StrCat("saved plan ", args.plan));
}

// The plan the ranks run: a saved one, or one made by the planning pipeline.
absl::StatusOr<RunnablePlan> ChoosePlan(const RunArgs& args, const MemoryMargin& margin) {
  auto request = RunPlanRequest(args, margin);
  if (!request.ok()) return request.status();
  if (!args.plan.empty()) {
    if (!args.init_from.empty()) {
      return absl::InvalidArgumentError("--init-from with --plan: a saved plan carries its graph and weights; run the model "
                                        "without --plan to start from other weights");
    }
    if (args.batch_norm != "sync") {
      return absl::InvalidArgumentError("--batch-norm local with --plan: a saved plan keeps its graph's batch norms; drop "
                                        "--batch-norm or run without --plan");
    }
    return SavedPlan(args, *request);
  }
  auto trainable = LoadTrainingGraph(args.model.model, args.model.inputs, 0, 0, args.loss);
  if (!trainable.ok()) return trainable.status();
  if (auto st = InitFrom(args.init_from, *trainable); !st.ok()) return st;
  // What the ranks train: with --batch-norm local, one group of the batch per rank.
  auto graph = TrainingGraphOf(*std::move(trainable), args.batch_norm, static_cast<int>(args.ranks), request->planner.profile.precision);
  if (!graph.ok()) return graph.status();
  return PlanToRun(*graph, *request);
}

// What every rank of `mapctl run --ranks N` runs (RUN_DIR/job.pb).
v1::RankJob RankJobFor(const LocalTrainingOptions& t, const RunArgs& args, const std::string& checkpoint_dir, int64_t resume_step) {
  v1::RankJob job;
  *job.mutable_training() = t.training;
  job.set_device(args.device);
  // --memory-per-device is the planner's budget and, enforced by each rank's counting
  // allocator, a real cap.
  job.set_memory_cap(t.memory_cap);
  job.set_timeout_seconds(static_cast<int>(args.rank_timeout));
  job.set_checkpoint_dir(checkpoint_dir);
  job.set_resume_step(resume_step);
  job.set_write_final_parameters(args.check_reference);
  job.set_local_host("127.0.0.1");
  return job;
}

// What the ranks' devices allow: Gloo on the CPU, or NCCL with a GPU per rank (this LibTorch
// computes on the CPU, so NCCL moves the ranks' tensors through GPU buffers); what pipeline
// stages do not have yet.
absl::Status CheckDeviceKind(const RunArgs& args) {
  if (args.device == "cpu" || args.device == "cuda") return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("--device ", args.device, " with several ranks: use cpu (Gloo) or cuda ",
                                                 "(NCCL, rank r on GPU r)"));
}
absl::Status CheckRanksCanRun(const RunArgs& args, const RunnablePlan& plan) {
  if (plan.pipeline_stages > 1 && args.device == "cuda") {
    return absl::UnimplementedError(
        "--device cuda with pipeline stages: NCCL point-to-point transfers are not built yet; run pipeline plans on --device cpu (Gloo)");
  }
  if (plan.pipeline_stages > 1 && args.training.eval_every() > 0) {
    return absl::UnimplementedError(absl::StrCat("--eval-every with ", plan.pipeline_stages,
                                                 " pipeline stages: evaluation under pipeline stages is not built yet; drop "
                                                 "--eval-every, or train without stages"));
  }
  if (args.device != "cuda") return absl::OkStatus();
  auto inv = QueryCuda();
  if (!inv.ok()) return absl::UnimplementedError(absl::StrCat("--device cuda: ", inv.status().message(), "; use --device cpu (Gloo)"));
  const int world = plan.world();
  if (static_cast<int>(inv->devices.size()) < world) {
    return absl::FailedPreconditionError(absl::StrCat("--device cuda: ", world, " ranks need ", world, " GPUs (NCCL takes one per rank) and ",
                                                      inv->devices.size(), " are visible",
                                                      inv->note.empty() ? "" : absl::StrCat(" (", inv->note, ")"),
                                                      "; use fewer ranks or --device cpu"));
  }
  return absl::OkStatus();
}

// Where the run resumes: --resume's last committed step (0: from the start), and whether that
// checkpoint was written under another plan (each rank then takes its blocks of the whole
// tensors: docs/runtime.md "Resuming under another plan").
struct ResumePoint {
  int64_t step = 0;
  bool resharded = false;
};
absl::StatusOr<ResumePoint> ResumePointOf(const RunArgs& args, const RunnablePlan& plan) {
  ResumePoint out;
  if (args.resume.empty()) return out;
  auto meta = ReadLatestCheckpoint(args.resume);
  if (!meta.ok()) {
    return absl::Status(meta.status().code(), absl::StrCat("--resume ", args.resume, ": no committed checkpoint (", meta.status().message(), ")"));
  }
  const int world = plan.world();
  if (auto st = CheckCheckpointMatches(*meta, world, plan.mesh, plan.checkpoint_plan, absl::StrCat("--resume ", args.resume)); !st.ok()) {
    out.resharded = true;
    std::cerr << "--resume " << args.resume << ": step " << meta->step() << " was written by " << meta->ranks() << " rank(s) under \""
              << meta->plan() << "\"; each of the " << world << " rank(s) takes its blocks of the whole tensors\n";
  }
  out.step = meta->step();
  if (out.step <= 0 || out.step >= args.training.steps()) {
    return absl::FailedPreconditionError(absl::StrCat("--resume ", args.resume, ": the last checkpoint is step ", out.step, "; --steps ",
                                                      args.training.steps(), " leaves nothing to do"));
  }
  return out;
}

// Writes the run directory: what every rank runs, the graph and one program per rank.
absl::Status WriteRankRun(const std::filesystem::path& dir, const RunArgs& args, const LocalTrainingOptions& training,
                          const RunnablePlan& plan, const std::string& checkpoint_dir, const ResumePoint& resume) {
  const int world = plan.world();
  std::vector<int> ranks(world);
  std::vector<const v1::RankProgram*> programs(world);
  for (int r = 0; r < world; ++r) ranks[r] = r, programs[r] = &plan.lowered.programs[r];
  v1::RankJob job = RankJobFor(training, args, checkpoint_dir, resume.step);
  job.set_resume_resharded(resume.resharded);
  if (args.gradient_buckets == "off" || args.gradient_buckets == "0") {
    job.set_gradient_bucket_bytes(-1);
  } else if (auto bytes = ParseBytes(args.gradient_buckets); bytes.ok() && *bytes > 0) {
    job.set_gradient_bucket_bytes(*bytes);
  } else {
    return absl::InvalidArgumentError(absl::StrCat("--gradient-buckets '", args.gradient_buckets, "': give a size such as 25MiB, or off"));
  }
  return WriteRunDirectory(dir.string(), plan.graph, job, ranks, programs);
}

void PrintRunHeader(const RunArgs& args, const RunnablePlan& plan, const MemoryMargin& margin) {
  const int world = plan.world();
  std::cout << "Training on " << world << " ranks ("
            << (plan.pipeline_stages > 1 ? absl::StrCat(plan.pipeline_stages, " pipeline stages, each on mesh ") : "mesh ")
            << absl::StrJoin(plan.mesh, "x") << ") under " << plan.name << ": " << plan.summary << "\n";
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    std::cout << "  stage " << s << ": " << plan.stages[s] << " on ranks " << s * (world / plan.pipeline_stages) << "-"
              << (s + 1) * (world / plan.pipeline_stages) - 1 << "\n";
  }
  if (!plan.recompute.empty()) std::cout << "Recomputing in backward: " << absl::StrJoin(plan.recompute, ", ") << "\n";
  if (plan.micro_batches > 1) {
    std::cout << "Micro-batches: " << plan.micro_batches << " passes per step, gradients accumulated and applied once\n";
  }
  if (!args.memory_per_device.empty() && args.strategy == "map") {
    std::cout << "Memory: every rank's program profiled within " << args.memory_per_device << " less a safety margin of "
              << margin.Describe() << "\n";
  }
}

// What the ranks reported, as they reported it.
struct RankRun {
  std::map<int, std::vector<double>> losses;        // per rank
  std::map<int, int64_t> peaks;                     // per rank, its RankDone
  std::map<int, int64_t> begun;                     // per rank: the last step it began
  std::map<int, std::vector<double>> rank_seconds;  // per rank
  std::vector<double> seconds;                      // rank 0's
  std::map<int64_t, int> written;                   // checkpoint step → ranks that wrote it
  nlohmann::json steps = nlohmann::json::array();   // -o json: rank 0's steps
  nlohmann::json evals = nlohmann::json::array();
  std::map<int, v1::OutOfMemory> out_of_memory;     // per rank that its memory cap stopped
};

// One rank's event: progress printed (or kept for -o json), checkpoints committed once every rank
// has written its shard.
void OnRankEvent(const RunArgs& args, const RunnablePlan& plan, const std::string& checkpoint_dir, int rank, const v1::RankEvent& e,
                 RankRun& run) {
  if (e.has_step_begun()) {
    run.begun[rank] = e.step_begun().step();
  } else if (e.has_checkpoint_written()) {
    const int64_t step = e.checkpoint_written().step();
    if (++run.written[step] != plan.world()) return;
    // Every rank's file is there: commit by renaming the directory, then point LATEST at it.
    if (auto st = CommitCheckpointStep(checkpoint_dir, CheckpointMetaFor(step, plan.world(), plan.mesh, plan.checkpoint_plan)); !st.ok()) {
      std::cerr << "checkpoint: step " << step << " not committed: " << st.message() << "\n";
    } else if (!IsDocumentFormat(args.format)) {
      std::cout << "checkpoint: step " << step << " committed to " << CheckpointStepDir(checkpoint_dir, step) << "\n" << std::flush;
    }
  } else if (e.has_evaluated()) {
    if (rank != 0) return;
    const v1::Evaluated& v = e.evaluated();
    run.evals.push_back({{"step", v.step()}, {"loss", v.loss()}, {"batches", v.batches()}, {"peak_bytes", v.peak_bytes()}});
    if (!IsDocumentFormat(args.format)) std::cout << FormatEvaluation(v.step(), v.loss(), v.batches()) << std::flush;
  } else if (e.has_done()) {
    run.peaks[rank] = e.done().peak_bytes();
  } else if (e.has_out_of_memory()) {
    run.out_of_memory[rank] = e.out_of_memory();
  } else if (e.has_step_done()) {
    const v1::StepDone& d = e.step_done();
    run.losses[rank].push_back(d.loss());
    run.rank_seconds[rank].push_back(d.seconds());
    if (rank != 0) return;
    run.seconds.push_back(d.seconds());
    const StepItems& items = plan.items;
    if (IsDocumentFormat(args.format)) {
      // Rank 0's time in collectives (waits for asynchronous ones included), by kind.
      nlohmann::json collectives = nlohmann::json::object();
      double in_collectives = 0;
      for (const auto& [kind, use] : d.collectives()) {
        collectives[kind] = {{"seconds", use.seconds()}, {"bytes", use.bytes()}, {"calls", use.calls()}};
        in_collectives += use.seconds();
      }
      run.steps.push_back({{"step", d.step()}, {"loss", d.loss()}, {"seconds", d.seconds()}, {"lr", d.lr()},
                           {absl::StrCat(items.unit, "_per_second"), d.seconds() > 0 ? items.count / d.seconds() : 0.0},
                           {"collective_seconds", in_collectives}, {"collectives", collectives}});
    } else if (d.step() == 1 || d.step() % args.log_every == 0 || d.step() == args.training.steps()) {
      std::cout << absl::StrFormat("step %6d  loss %.4f  lr %.3g  %8.1f ms  %s\n", d.step(), d.loss(), d.lr(), d.seconds() * 1e3,
                                   FormatThroughput(items, d.seconds()))
                << std::flush;
    }
  }
}

// Starts the ranks (mapd-rank processes, rank 0 first: it hosts the rendezvous store) and watches
// them to the end; a silent run is blamed on the rank that never began the step its peers are in.
absl::Status LaunchAndWatch(const RunArgs& args, const RunnablePlan& plan, const std::string& rank_binary, const std::filesystem::path& dir,
                            const std::string& checkpoint_dir, RankRun& run) {
  const int world = plan.world();
  LaunchOptions lo;
  lo.ranks = world;
  lo.silence_timeout = std::chrono::seconds(args.rank_timeout);
  lo.store_host_index = 0;  // rank 0 hosts the rendezvous store; the others start with its address
  lo.argv_for = [&](int r, const std::string& store) {
    // --device cuda: rank r on GPU r (NCCL).
    return RankCommandLine({rank_binary, dir.string(), r, args.device == "cuda" ? r : -1, store});
  };
  lo.env = {"OMP_NUM_THREADS=1"};
  absl::Status launched =
      LaunchRanks(lo, [&](int rank, const v1::RankEvent& e) { OnRankEvent(args, plan, checkpoint_dir, rank, e, run); });
  if (launched.code() != absl::StatusCode::kDeadlineExceeded) return launched;
  // Silent ranks wait in collectives for the one that did not begin the step they are in.
  int behind = -1, count = 0;
  int64_t least = INT64_MAX;
  for (int r = 0; r < world; ++r) {
    const int64_t b = run.begun.count(r) ? run.begun[r] : 0;
    if (b < least) least = b, behind = r, count = 1;
    else if (b == least) ++count;
  }
  if (count != 1 || least >= args.training.steps()) return launched;
  return absl::DeadlineExceededError(absl::StrCat("rank ", behind, " stopped responding before step ", least + 1,
                                                  " (the other ranks began it and waited for rank ", behind, " for ", args.rank_timeout,
                                                  " s); the run was stopped"));
}

// What a rank its cap stopped needed when refused: the bytes live then and the bytes asked for.
int64_t NeededBytes(const v1::OutOfMemory& m) { return m.live_bytes() + m.attempted_bytes(); }

// A run a rank's memory cap (--memory-per-device) stopped, in one message: the budget, what the
// rank needed when refused, what its program was predicted to peak at, and what to give instead
// (what it needed or its prediction, whichever is more, and a tenth more: the rest of its step
// may need more than the allocation refused). `failed`: the launch's own status, kept at the end.
absl::Status OutOfMemoryError(const RunnablePlan& plan, const RankRun& run, const absl::Status& failed) {
  const auto& [rank, m] = *run.out_of_memory.begin();
  const int64_t needed = NeededBytes(m);
  const int64_t predicted = rank < static_cast<int>(plan.lowered.predicted.size()) ? plan.lowered.predicted[rank].peak_bytes : 0;
  const int64_t give = static_cast<int64_t>(std::ceil(1.1 * static_cast<double>(std::max(needed, predicted)) / 1024.0)) * 1024;
  return absl::ResourceExhaustedError(absl::StrFormat(
      "rank %d ran out of memory: it needed %s (%s live, %s more asked for) where the budget is %s a rank "
      "(--memory-per-device); its program was predicted to peak at %s%s. Give --memory-per-device %s or more, more "
      "ranks, or --micro-batches auto (%s)",
      rank, FormatBytes(needed), FormatBytes(m.live_bytes()), FormatBytes(m.attempted_bytes()), FormatBytes(m.cap_bytes()),
      FormatBytes(predicted), predicted <= m.cap_bytes() ? ", within the budget: the prediction fell short" : "", FormatBytes(give),
      failed.message()));
}

// This run's rank peaks, predicted against measured, in this host's memory record (the margin
// later plans keep, memory_margin.h); a rank its cap stopped gives what it needed when refused.
void RecordPeaks(const RunnablePlan& plan, const RankRun& run) {
  std::vector<std::pair<int64_t, int64_t>> peaks;
  const std::vector<RankPrediction>& predicted = plan.lowered.predicted;
  for (const auto& [rank, peak] : run.peaks) {
    if (rank < static_cast<int>(predicted.size())) peaks.emplace_back(predicted[rank].peak_bytes, peak);
  }
  for (const auto& [rank, m] : run.out_of_memory) {
    if (rank < static_cast<int>(predicted.size())) peaks.emplace_back(predicted[rank].peak_bytes, NeededBytes(m));
  }
  if (auto st = RecordMemoryPeaks(MemoryRecordDir(), peaks); !st.ok()) std::cerr << "mapctl: memory record not kept: " << st.message() << "\n";
}

// Rank 0's losses (none if it reported no step).
const std::vector<double>& RankZeroLosses(const RankRun& run) {
  static const std::vector<double> kNone;
  auto it = run.losses.find(0);
  return it == run.losses.end() ? kNone : it->second;
}

// The ranks agree on the loss (it is the global one on every rank).
absl::Status CheckRanksAgree(const RankRun& run) {
  const std::vector<double>& zero = RankZeroLosses(run);
  for (const auto& [rank, l] : run.losses) {
    for (size_t s = 0; s < l.size() && s < zero.size(); ++s) {
      if (std::abs(l[s] - zero[s]) > 1e-6 * std::max(1.0, std::abs(zero[s]))) {
        return absl::InternalError(absl::StrFormat("rank %d reports loss %.8g at step %d, rank 0 %.8g", rank, l[s], static_cast<int>(s + 1), zero[s]));
      }
    }
  }
  return absl::OkStatus();
}

// --check-reference: the same steps on one process, against the ranks' losses and final blocks.
// Parameters under AdamW: each step moves an element by about lr whatever its gradient's size,
// so rounding differences that the training dynamics amplify show as differences of a small part
// of lr x steps; a wrong plan moves elements by whole steps. A hundredth of lr x steps (at least
// the plain tolerance) tells the two apart; noise-driven elements get 2 x lr x steps
// (reference_check.h). bf16 rounds differently when the work is split (partial sums, reduction
// order): 2e-2 where fp32 has 1e-4.
struct Reference {
  double worst_loss = 0;  // the largest relative loss difference
  BlockDifference params;
  bool adamw = false;
  double loss_tolerance = 0, parameter_tolerance = 0, noise_tolerance = 0;
};
absl::StatusOr<Reference> CompareWithOneProcess(const RunArgs& args, const LocalTrainingOptions& training, const RunnablePlan& plan,
                                                const std::filesystem::path& dir, const RankRun& run) {
  Reference out;
  out.adamw = training.training.optimizer() == "adamw";
  const double lr_steps = training.training.lr() * static_cast<double>(args.training.steps());
  out.loss_tolerance = plan.precision == Precision::kBf16Mixed ? 2e-2 : 1e-4;
  out.parameter_tolerance = std::max(out.loss_tolerance, out.adamw ? 1e-2 * lr_steps : 0.0);
  std::vector<double> ref;
  std::vector<v1::TensorData> reference;
  NoiseModel noise;
  LocalTrainingOptions one = training;
  one.device = "cpu";  // where the ranks compute too (this LibTorch has no CUDA)
  one.memory_cap = 0;  // one process holds what N ranks share: the per-rank cap is not its
  auto st = TrainLocally(plan.graph, one, [&](const LocalStep& s) { ref.push_back(s.loss); }, &reference, &noise.second_moments);
  if (!st.ok()) return st;
  const std::vector<double>& losses = RankZeroLosses(run);
  for (size_t s = 0; s < ref.size() && s < losses.size(); ++s) {
    out.worst_loss = std::max(out.worst_loss, std::abs(losses[s] - ref[s]) / std::max(1e-12, std::abs(ref[s])));
  }
  const int world = plan.world();
  std::vector<v1::RankCheckpoint> finals(world);
  for (int r = 0; r < world; ++r) {
    auto bytes = ReadFileToString(FinalParametersPath(dir.string(), r));
    if (!bytes.ok()) return bytes.status();
    if (!finals[r].ParseFromString(*bytes)) return absl::DataLossError(absl::StrCat("rank ", r, "'s final blocks do not parse"));
  }
  // AdamW: elements whose gradient is rounding noise may drift by 2·lr a step (reference_check.h).
  noise.tolerance = out.noise_tolerance = 2 * lr_steps;
  auto diff = WorstBlockDifference(plan.lowered.programs, finals, reference, noise.second_moments.empty() ? nullptr : &noise);
  if (!diff.ok()) return diff.status();
  out.params = *diff;
  return out;
}

absl::Status CheckReference(const Reference& r) {
  if (r.params.relative > r.parameter_tolerance) {
    return absl::InternalError(absl::StrFormat(
        "rank %d's final '%s' differs from one process's by %.2e (relative to its largest value), over the %.1e tolerance%s", r.params.rank,
        r.params.parameter, r.params.relative, r.parameter_tolerance,
        r.parameter_tolerance > r.loss_tolerance ? " (AdamW: a hundredth of lr x steps)" : ""));
  }
  if (r.params.noise_difference > r.noise_tolerance) {
    return absl::InternalError(absl::StrFormat(
        "'%s' differs from one process's by %.2e where its gradient is rounding noise, over 2 x lr x steps = %.2e, "
        "more than AdamW can move an element by noise", r.params.noise_parameter, r.params.noise_difference, r.noise_tolerance));
  }
  if (r.worst_loss > r.loss_tolerance) {
    return absl::InternalError(absl::StrFormat("the ranks' losses differ from one process's by up to %.2e (relative), over the %.0e tolerance",
                                               r.worst_loss, r.loss_tolerance));
  }
  return absl::OkStatus();
}

// Measured step time per rank: the median after the first step (which pays for warm-up), as
// `mapctl profile --measure` and the bench report it — the steady step the prediction is of; a
// mean let the second and third steps' allocations and a descheduled step or two move it by a
// quarter on a shared host.
double MedianStep(std::vector<double> s) {
  if (s.empty()) return 0.0;
  if (s.size() > 1) s.erase(s.begin());
  std::sort(s.begin(), s.end());
  return s[s.size() / 2];
}

void PrintRunJson(const RunArgs& args, const RunnablePlan& plan, const std::string& model, RankRun& run, const std::optional<Reference>& ref) {
  double total = 0;
  for (double s : run.seconds) total += s;
  const std::vector<RankPrediction>& predicted = plan.lowered.predicted;
  nlohmann::json per_rank = nlohmann::json::array();
  for (const auto& [rank, peak] : run.peaks) {
    per_rank.push_back({{"rank", rank},
                        {"measured_peak_bytes", peak},
                        {"predicted_peak_bytes", predicted[rank].peak_bytes},
                        {"measured_step_seconds", MedianStep(run.rank_seconds[rank])},
                        {"predicted_step_seconds", predicted[rank].step_seconds()},
                        {"predicted_communication_seconds", predicted[rank].communication_seconds}});
  }
  nlohmann::json j = {{"model", model}, {"ranks", plan.world()}, {"mesh", plan.mesh}, {"plan", absl::StrCat(plan.name, ": ", plan.summary)},
                      {"steps", run.steps}, {"evals", run.evals}, {"seconds", total}, {"predicted_peak_bytes", static_cast<int64_t>(plan.planner_peak_bytes)},
                      {"per_rank", per_rank}, {"device_type", plan.device_type}, {"zero_stage", plan.zero_stage}, {"micro_batches", plan.micro_batches}, {"recomputed_layers", plan.recompute},
                      {"precision", PrecisionName(plan.precision)}, {"pipeline_stages", plan.pipeline_stages}};
  if (plan.pipeline_stages > 1) {
    j["stages"] = plan.stages;
    j["schedule"] = plan.schedule;
    j["virtual_stages"] = plan.virtual_stages;
    j["bubble_fraction"] = plan.bubble_fraction;
  }
  if (ref.has_value()) {
    j["reference_max_relative_loss_difference"] = ref->worst_loss;
    j["reference_max_parameter_difference"] = ref->params.relative;
    j["reference_parameter_blocks_compared"] = ref->params.blocks;
    j["reference_noise_driven_elements"] = ref->params.noise_elements;
    j["reference_noise_driven_max_difference"] = ref->params.noise_difference;
    j["reference_noise_driven_tolerance"] = ref->noise_tolerance;
    j["reference_parameter_tolerance"] = ref->parameter_tolerance;
  }
  PrintDocument(args.format, j);
}

void PrintRunTable(const RunArgs& args, const RunnablePlan& plan, RankRun& run, const std::optional<Reference>& ref) {
  double total = 0;
  for (double s : run.seconds) total += s;
  Table t({"RANK", "MEASURED PEAK", "PREDICTED (RANK PROGRAM PROFILED)", "DIFF", "STEP MEASURED", "STEP PREDICTED (COMM)"});
  for (const auto& [rank, peak] : run.peaks) {
    const RankPrediction& p = plan.lowered.predicted[rank];
    t.Row({std::to_string(rank), FormatBytes(peak), FormatBytes(p.peak_bytes),
           absl::StrFormat("%+.1f%%", 100.0 * (static_cast<double>(p.peak_bytes) - peak) / std::max<double>(1, peak)),
           absl::StrFormat("%.2f ms", 1e3 * MedianStep(run.rank_seconds[rank])),
           absl::StrFormat("%.2f ms (%.2f)", 1e3 * p.step_seconds(), 1e3 * p.communication_seconds)});
  }
  const std::vector<double>& losses = RankZeroLosses(run);
  std::cout << absl::StrFormat("trained %d steps on %d ranks in %.1f s (rank 0's step times): loss %.4f -> %.4f\n", args.training.steps(),
                               plan.world(), total, losses.empty() ? 0 : losses.front(), losses.empty() ? 0 : losses.back());
  t.Print(std::cout);
  std::cout << absl::StrFormat("planner's estimate for the plan: %s per device; step times predicted for %s\n",
                               FormatBytes(static_cast<int64_t>(plan.planner_peak_bytes)), plan.device_type.c_str());
  if (!ref.has_value()) return;
  const BlockDifference& params = ref->params;
  std::cout << absl::StrFormat("reference (one process): max relative loss difference %.2e; final parameters: %d blocks, "
                               "max difference %.2e (%s on rank %d; tolerance %.1e%s)\n",
                               ref->worst_loss, params.blocks, params.relative, params.parameter, params.rank, ref->parameter_tolerance,
                               ref->parameter_tolerance > 1e-4 && ref->adamw ? ", AdamW: a hundredth of lr x steps" : "");
  if (params.noise_elements > 0) {
    std::cout << absl::StrFormat("  %d elements have a gradient that is zero but for rounding (AdamW's second moment "
                                 "under 1e-8 of their tensor's largest); AdamW moves them by its noise, so they are "
                                 "compared within 2 x lr x steps = %.2e: max difference %.2e (%s)\n",
                                 params.noise_elements, ref->noise_tolerance, params.noise_difference, params.noise_parameter);
  }
}

// The run directory goes whatever happens (it holds the final blocks until compared).
struct RemoveDirOnExit {
  std::filesystem::path dir;
  ~RemoveDirOnExit() {
    std::error_code e;
    std::filesystem::remove_all(dir, e);
  }
};

}  // namespace

int RunOnRanks(const RunArgs& args) {
  auto training = MakeTrainingOptions(args);
  if (!training.ok()) return ReportError(training.status());
  const absl::StatusOr<std::string> rank_binary = FindRankBinary();  // each rank is a mapd-rank process
  if (!rank_binary.ok()) return ReportError(rank_binary.status());
  if (auto st = CheckDeviceKind(args); !st.ok()) return ReportError(st);
  const MemoryMargin margin = ReadMemoryMargin(MemoryRecordDir());  // read once: the plan keeps it, the header says it
  auto plan = ChoosePlan(args, margin);
  if (!plan.ok()) return ReportError(plan.status());
  if (auto st = CheckRanksCanRun(args, *plan); !st.ok()) return ReportError(st);
  auto graph = Graph::Create(plan->graph);
  if (!graph.ok()) return ReportError(graph.status());
  const std::string checkpoint_dir = !args.resume.empty() ? args.resume : args.checkpoint_dir;
  auto resume = ResumePointOf(args, *plan);
  if (!resume.ok()) return ReportError(resume.status());
  std::error_code ec;
  const std::filesystem::path dir = std::filesystem::temp_directory_path(ec) / absl::StrCat("mapd-run-", getpid());
  RemoveDirOnExit remove_dir{dir};
  if (auto st = WriteRankRun(dir, args, *training, *plan, checkpoint_dir, *resume); !st.ok()) return ReportError(st);
  if (!IsDocumentFormat(args.format)) PrintRunHeader(args, *plan, margin);
  RankRun run;
  const absl::Status launched = LaunchAndWatch(args, *plan, *rank_binary, dir, checkpoint_dir, run);
  RecordPeaks(*plan, run);
  if (!launched.ok()) return ReportError(run.out_of_memory.empty() ? launched : OutOfMemoryError(*plan, run, launched));
  if (auto st = CheckRanksAgree(run); !st.ok()) return ReportError(st);
  std::optional<Reference> reference;
  if (args.check_reference) {
    auto compared = CompareWithOneProcess(args, *training, *plan, dir, run);
    if (!compared.ok()) return ReportError(compared.status());
    reference = *compared;
  }
  if (IsDocumentFormat(args.format)) PrintRunJson(args, *plan, graph->name(), run, reference);
  else PrintRunTable(args, *plan, run, reference);
  if (reference.has_value()) {
    if (auto st = CheckReference(*reference); !st.ok()) return ReportError(st);
  }
  return kExitOk;
}

}  // namespace mapd::cli

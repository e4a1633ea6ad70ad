// mapctl subcommands. Each Run* returns the process exit code (see ExitCode).
#ifndef MAPD_CLIENT_MAPCTL_COMMANDS_H_
#define MAPD_CLIENT_MAPCTL_COMMANDS_H_

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/graph/step_items.h"
#include "common/training_config.h"
#include "worker/local/local_training.h"

namespace mapd::cli {

// 0 success; 1 the command failed (bad model, bad input, I/O); 2 bad usage (CLI11 parse);
// `mapctl watch`: the job's outcome — 0 succeeded, 1 failed, 3 cancelled.
enum ExitCode { kExitOk = 0, kExitFailed = 1, kExitUsage = 2, kExitJobCancelled = 3 };

// Prints "error: <message>" to stderr and returns kExitFailed.
int ReportError(const absl::Status& status);

struct ModelArgs {
  std::string model;               // zoo spec, .pt, or .pb/.json IR file
  std::vector<std::string> inputs;  // --input name:dtype[shape]
};

struct ProfileArgs {
  ModelArgs model;
  int64_t batch_size = 0;  // zoo override; 0 = the model's
  int64_t seq_len = 0;     // zoo override; 0 = the model's
  std::string loss = "auto";  // auto | output | cross_entropy | mse
  std::string optimizer = "adamw";
  std::string precision = "auto";  // auto (by device type) | fp32 | bf16
  std::string device_type = "auto";  // auto: this host's calibration with --measure, else cpu
  bool measure = false;
  int steps = 3;  // --measure: steps to run (figures from steps 2..N)
  bool ops = false;  // per-op rows in the JSON
  std::string format = "table";
  std::string timeline;  // SVG path
};

struct RunArgs {
  ModelArgs model;
  std::string loss = "auto";
  std::string init_from;  // --init-from: a PyTorch state dict (torch.save) the weights start from
  // Steps, optimizer, schedule, data, evaluation, checkpoints, micro-batches, precision
  // (AddTrainingFlags), with their defaults.
  v1::TrainingConfig training = WithTrainingDefaults({});
  std::string device = "cpu";
  int64_t log_every = 10;
  std::string format = "table";
  // Several ranks (local processes over Gloo): 1 = the single-device runtime.
  int64_t ranks = 1;
  std::string mesh;                  // "2x2"; default a 1-D mesh of `ranks`
  std::string strategy = "map";      // map (the planner's plan) | dp | tp
  std::string plan;                  // a plan.pb from `mapctl plan --save` (its graph and mesh)
  std::string device_type = "auto";  // the planner's cost model (auto: this host, measured once and cached)
  std::string zero = "auto";         // ZeRO stage for `--strategy map`: auto | 0 | 1 | 2
  std::string recompute = "auto";    // activation checkpointing: auto (the plan's) | off | all | LAYER,LAYER...
  std::string pipeline_stages = "1"; // 1 | N | auto: the layers cut into stages (1F1B)
  std::string pin;                   // "tp=2,pp=2,..." (planner/plan/pins.h)
  std::string memory_per_device;     // the planner's budget
  bool check_reference = false;      // also train on one process and compare
  std::string gradient_buckets = "25MiB";  // data-parallel gradient buckets' size; "off": none
  std::string batch_norm = "sync";   // sync (statistics over the whole batch) | local (over each rank's share)
  int64_t rank_timeout = 60;         // seconds a rank may stay silent (hung) or wait in a collective
  std::string checkpoint_dir;        // checkpoints of a multi-rank run
  std::string resume;                // continue from the last committed checkpoint in this dir
};

// "  12345 tokens/s" (empty when unknown).
std::string FormatThroughput(const StepItems& items, double seconds);
// "eval after step S  loss L  (K batches, no gradients)\n"
std::string FormatEvaluation(int64_t step, double loss, int64_t batches);
// `run --ranks N` / `run --plan FILE` (cmd_run_ranks.cc).
int RunOnRanks(const RunArgs& args);
// The single-device training options `run` takes (also what every rank uses).
absl::StatusOr<LocalTrainingOptions> MakeTrainingOptions(const RunArgs& args);

struct PlanArgs {
  ModelArgs model;
  int64_t devices = 0;
  std::string mesh;               // "2x4"
  std::string device_type = "h100-80g";
  std::string memory_per_device;  // "80GiB"; empty = the device's memory
  int64_t gpus_per_node = 8;
  int64_t batch_size = 0;
  int64_t seq_len = 0;
  std::string loss = "auto";
  std::string optimizer = "adamw";
  double time_limit = 10;
  double gap = 0.01;              // accepted optimality gap (PlannerOptions::relative_gap)
  std::string dump_request;
  std::string zero = "auto";      // auto | 0..3
  std::string recompute = "auto"; // auto (the search may checkpoint layers) | off
  std::string precision = "auto"; // auto (bf16 on GPU device types) | fp32 | bf16 (mixed: fp32 master weights and states)
  std::string micro_batches = "auto";  // auto | N (passes per step, gradients accumulated)
  std::string pipeline_stages = "auto";  // auto | N (1: no stages)
  std::string pin;                // "tp=8,pp=16,..." (planner/plan/pins.h)
  std::string save;               // plan.pb
  std::string report;             // plan.html
  std::string format = "table";
};

// The coordinator's address and token (flags, else MAPD_ADDRESS / MAPD_TOKEN), and output format.
// mapctl export DIR... -o weights.pt
struct ExportArgs {
  std::vector<std::string> sources;  // checkpoint directories (one per worker a job ran on)
  std::string output;                // the state dict file to write
  int64_t step = 0;                  // 0: the last step committed in every directory
  bool optimizer_state = false;      // {"model": ..., "optimizer": ...} instead of the state dict alone
  std::string format = "table";
};

// The coordinator's address and token (flags, the environment, or a context of the config file:
// job_client.h), and the output format.
struct JobArgs {
  std::string address;     // host:port; default $MAPD_ADDRESS, the context's, else 127.0.0.1:7070
  std::string token;       // default --token-file, $MAPD_TOKEN, $MAPD_TOKEN_FILE, the context's token_file
  std::string token_file;  // a file whose first line is the token
  std::string tls_ca;      // PEM roots: TLS to the coordinator
  std::string context;     // a context of ~/.config/mapd/config.yaml (default $MAPD_CONTEXT, its current-context)
  std::string format = "table";  // table | wide | json | yaml | name
};

// mapctl logs ID [--rank R] [-f] [--tail N] [--all-steps]
struct LogsArgs {
  int rank = -1;           // >= 0: that rank's output instead of the job's events
  bool follow = false;     // go on printing as it comes, until the job finishes
  int tail = 0;            // > 0: only the last lines
  bool all_steps = false;  // every progress event (by default at most kShownStepEvents of them)
};

struct SubmitArgs {
  JobArgs conn;
  std::string file;  // -f job.yaml (fields as the flags, snake_case)
  // The flags given on the command line, by their job-file names (snake_case): they win over -f.
  std::set<std::string> given;
  ModelArgs model;
  std::string loss = "auto";
  std::string init_from;  // --init-from: read here, the weights sent in the graph
  // The job's training (AddTrainingFlags), sent as JobSpec.training.
  v1::TrainingConfig training = WithTrainingDefaults({});
  std::string name;
  int ranks = 1;
  std::string mesh;
  std::string device = "cpu";        // what the ranks run on: cpu | cuda
  std::string device_type;           // empty: the workers' measured profile (JobSpec.device_type)
  std::string memory_per_device;
  std::string zero = "auto";
  std::string recompute = "auto";
  std::string pipeline_stages = "1";  // 1 | N | auto
  std::string pin;                    // "tp=2,pp=2,...": JobSpec.pin (planner/plan/pins.h)
  std::string elastic;  // --elastic MIN[:MAX]: JobSpec.elastic
  std::string batch_norm = "sync";  // sync | local (groups: --ranks)
  bool wait = false;  // --wait: follow the job as `watch` does and exit with its outcome
  bool follow = false;  // --follow: its events and rank 0's output, then exit with its outcome
};

int RunSubmit(SubmitArgs args);
// `states`: only jobs in these (JobState names, any case, comma-separated; empty: every job).
int RunJobs(const JobArgs& args, const std::string& states, bool watch);
int RunGet(const JobArgs& args, int64_t id);
int RunWatch(const JobArgs& args, int64_t id);
// `submit --follow`: the job's events and rank 0's output as they come, until it finishes; the
// exit code is its outcome, as `watch`'s.
int RunFollow(const JobArgs& args, int64_t id);
int RunLogs(const JobArgs& args, int64_t id, const LogsArgs& logs);
int RunDescribe(const JobArgs& args, int64_t id);
int RunDelete(const JobArgs& args, int64_t id);
int RunCancel(const JobArgs& args, int64_t id);
int RunWorkers(const JobArgs& args);

int RunModels(const std::string& format);
// aten: list the PyTorch ops the TorchScript importer maps instead of the registry.
int RunOps(const std::string& format, bool aten);
int RunDevices(const std::string& format);
int RunInspect(const ModelArgs& model, const std::string& format, bool text);
int RunImport(const ModelArgs& model, const std::string& output_path);
int RunProfile(const ProfileArgs& args);
int RunTraining(const RunArgs& args);
int RunPlan(const PlanArgs& args);
int RunExport(const ExportArgs& args);
int RunCalibrate(const std::string& name, const std::string& output, bool quick, const std::vector<int64_t>& collective_ranks,
                 int rounds);

}  // namespace mapd::cli

#endif  // MAPD_CLIENT_MAPCTL_COMMANDS_H_

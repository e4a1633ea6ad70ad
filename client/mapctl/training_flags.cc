#include "client/mapctl/training_flags.h"
#include "client/mapctl/cli_checks.h"

#include <sstream>

#include "common/training_limits.h"

namespace mapd::cli {

namespace {

template <typename T>
std::string Text(const T& value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

// A flag whose value goes straight into its field through `set`.
template <typename T, typename Set>
CLI::Option* Flag(CLI::App* cmd, const std::string& names, Set set, const T& current, const std::string& help) {
  return cmd->add_option_function<T>(names, set, help)->default_str(Text(current));
}

}  // namespace

void AddTrainingFlags(CLI::App* cmd, v1::TrainingConfig* c, const std::string& data_help) {
  using S = std::string;
  Flag<int64_t>(cmd, "--steps", [c](const int64_t& v) { c->set_steps(v); }, c->steps(), "Training steps")->check(AtLeastOne());
  // (Values are checked with the rest of the config, in one place: ValidateTrainingConfig.)
  Flag<S>(cmd, "--optimizer", [c](const S& v) { c->set_optimizer(v); }, c->optimizer(), "sgd | momentum | adamw");
  Flag<double>(cmd, "--lr", [c](const double& v) { c->set_lr(v); }, c->lr(), "Learning rate (the peak, under a schedule)")
      ->check(GreaterThanZero());
  Flag<S>(cmd, "--lr-schedule", [c](const S& v) { c->set_lr_schedule(v); }, c->lr_schedule(),
          "constant | cosine | linear: after --warmup-steps of linear warm-up, the rate decays from --lr to --min-lr over the "
          "run's steps (a resumed run goes on where it stopped)")
      ->check(CLI::IsMember({"constant", "cosine", "linear"}));
  Flag<int64_t>(cmd, "--warmup-steps", [c](const int64_t& v) { c->set_warmup_steps(v); }, c->warmup_steps(),
                "Steps of linear warm-up to --lr (any schedule)")
      ->check(ZeroOrMore());
  Flag<double>(cmd, "--min-lr", [c](const double& v) { c->set_min_lr(v); }, c->min_lr(), "The rate a cosine or linear schedule ends at")
      ->check(ZeroOrMore());
  Flag<double>(cmd, "--weight-decay", [c](const double& v) { c->set_weight_decay(v); }, c->weight_decay(),
               "Weight decay (SGD: L2 added to the gradient; AdamW: decoupled)")
      ->check(ZeroOrMore());
  Flag<double>(cmd, "--max-grad-norm,--clip", [c](const double& v) { c->set_max_grad_norm(v); }, c->max_grad_norm(),
               "Clip the global gradient norm to this (0: off)")
      ->check(ZeroOrMore());
  Flag<uint64_t>(cmd, "--seed", [c](const uint64_t& v) { c->set_seed(v); }, c->seed(), "Seed of the weights, data and dropout");
  Flag<S>(cmd, "--data", [c](const S& v) { c->set_data(v); }, c->data(),
          "synthetic, text:FILE (bytes as tokens; vocab >= 256), tokens:FILE (little-endian uint16 ids) or npy:INPUTS[,TARGETS] "
          "(NumPy arrays of samples for the model's first inputs); " + data_help);
  Flag<S>(cmd, "--eval-data", [c](const S& v) { c->set_eval_data(v); }, c->eval_data(),
          "Evaluation data, as --data (default: the training data's source, drawn from a seed of its own)");
  Flag<int64_t>(cmd, "--eval-every", [c](const int64_t& v) { c->set_eval_every(v); }, c->eval_every(),
                "Evaluate every N steps and after the last: the mean loss over --eval-batches, no gradients (0: never)")
      ->check(ZeroOrMore());
  Flag<int64_t>(cmd, "--eval-batches", [c](const int64_t& v) { c->set_eval_batches(v); }, c->eval_batches(),
                "Batches per evaluation (each evaluation draws the same)")
      ->check(CLI::Range(int64_t{1}, kMaxEvalBatches));
  Flag<int64_t>(cmd, "--checkpoint-every", [c](const int64_t& v) { c->set_checkpoint_every(v); }, c->checkpoint_every(),
                "Steps between checkpoints (0: only after the last)")
      ->check(ZeroOrMore());
  Flag<S>(cmd, "--micro-batches", [c](const S& v) { c->set_micro_batches(v); }, c->micro_batches(),
          "Forward/backward passes per step on slices of the batch, gradients accumulated and applied once: 1 | N | auto (the "
          "planner chooses)");
  Flag<S>(cmd, "--precision", [c](const S& v) { c->set_precision(v); }, c->precision(),
          "auto (bf16 on GPU device types, fp32 on cpu) | fp32 | bf16 (mixed: bf16 weights, activations and gradients; fp32 "
          "master weights, optimizer states and loss)");
}

}  // namespace mapd::cli

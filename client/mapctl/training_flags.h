// The training flags `mapctl run` and `mapctl submit` share (--steps, --optimizer, --lr, the
// schedule, --weight-decay, --max-grad-norm, --seed, --data, evaluation, --checkpoint-every,
// --micro-batches, --precision): each flag sets its field of a v1::TrainingConfig directly, so
// a training option exists once — in training.proto — and reaches a run, a job and every rank
// without being copied.
#ifndef MAPD_CLIENT_MAPCTL_TRAINING_FLAGS_H_
#define MAPD_CLIENT_MAPCTL_TRAINING_FLAGS_H_

#include <string>

#include <CLI/CLI.hpp>

#include "proto/mapd/v1/training.pb.h"

namespace mapd::cli {

// Adds the flags to `cmd`; `config` (which outlives the parse) holds the defaults --help shows.
// `data_help` says where --data's files are (this machine's, or the workers' --data-root).
// A flag's first long name is its field's name with '-' for '_' (the job file's key).
void AddTrainingFlags(CLI::App* cmd, v1::TrainingConfig* config, const std::string& data_help);

}  // namespace mapd::cli

#endif  // MAPD_CLIENT_MAPCTL_TRAINING_FLAGS_H_

// PyTorch state dicts in the file format of torch.save / torch.load: a zip of a pickle and its
// tensors' records, written by LibTorch's pickle_save, so that Python's `torch.load` reads it and
// `module.load_state_dict(torch.load(path))` takes it.
#ifndef MAPD_WORKER_RUNTIME_STATE_DICT_FILE_H_
#define MAPD_WORKER_RUNTIME_STATE_DICT_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "proto/mapd/v1/checkpoint.pb.h"

namespace mapd {

// Writes `whole`'s parameters and buffers (whole tensors, GatherCheckpoint's; a trace's constants
// left out) to `path`
// (atomically), each under its name and every alias in place.aliases (tied weights), as a dict
// name -> tensor. With `optimizer_state`, the file holds {"model": that dict, "optimizer":
// {"steps": N, "state": {name: {"step": N, "exp_avg": ..., "exp_avg_sq": ...} (AdamW) or
// {"momentum_buffer": ...}, and "master" for a bf16 parameter's fp32 master}}}.
absl::Status WriteStateDict(const std::string& path, const v1::RankCheckpoint& whole, bool optimizer_state);

}  // namespace mapd

#endif  // MAPD_WORKER_RUNTIME_STATE_DICT_FILE_H_

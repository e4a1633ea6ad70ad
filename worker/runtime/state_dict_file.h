// PyTorch state dicts in the file format of torch.save / torch.load: a zip of a pickle and its
// tensors' records. Written by LibTorch's pickle_save, so that Python's `torch.load` reads it and
// `module.load_state_dict(torch.load(path))` takes it (mapctl export); read with LibTorch's zip
// reader and our own unpickler (torch_pickle.h) for `--init-from`.
#ifndef MAPD_WORKER_RUNTIME_STATE_DICT_FILE_H_
#define MAPD_WORKER_RUNTIME_STATE_DICT_FILE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/mapd/v1/graph.pb.h"
#include "proto/mapd/v1/checkpoint.pb.h"

namespace mapd {

// Writes `whole`'s parameters and buffers (whole tensors, GatherCheckpoint's; a trace's constants
// left out) to `path`
// (atomically), each under its name and every alias in place.aliases (tied weights), as a dict
// name -> tensor. With `optimizer_state`, the file holds {"model": that dict, "optimizer":
// {"steps": N, "state": {name: {"step": N, "exp_avg": ..., "exp_avg_sq": ...} (AdamW) or
// {"momentum_buffer": ...}, and "master" for a bf16 parameter's fp32 master}}}.
absl::Status WriteStateDict(const std::string& path, const v1::RankCheckpoint& whole, bool optimizer_state);

// The tensors of a torch.save file of a state dict (or of a dict whose "model" or "state_dict"
// is one), contiguous, by name, in the file's dtypes. NOT_FOUND for a missing file;
// INVALID_ARGUMENT naming the file for another format (a TorchScript archive, torch.save's
// pre-1.6 format) or content.
absl::StatusOr<std::vector<v1::TensorData>> ReadStateDict(const std::string& path);

// --init-from: `graph`'s parameters and buffers start from `state` — every one the graph has,
// under its name or one of its aliases, with its shape, converted to its dtype — carried in the
// graph (DataRef.inline_data); a trace's constants keep theirs, and so does a buffer the state
// dict leaves out whose values the trace carries (PyTorch's non-persistent buffers: RoPE tables,
// causal masks, which module.state_dict() omits). INVALID_ARGUMENT naming the
// missing, mis-shaped and unexpected entries (`num_batches_tracked`, which the zoo's batch norms
// do not keep, is not unexpected).
absl::Status SetInitialWeights(const std::vector<v1::TensorData>& state, v1::Graph& graph);

}  // namespace mapd

#endif  // MAPD_WORKER_RUNTIME_STATE_DICT_FILE_H_

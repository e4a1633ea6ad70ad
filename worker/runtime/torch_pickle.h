// The part of Python's pickle that torch.save writes for a state dict (data.pkl inside its zip):
// a dict — usually a collections.OrderedDict — of tensors, each rebuilt by
// torch._utils._rebuild_tensor_v2 (or _rebuild_parameter) from a storage that a persistent id
// names ('storage', torch.FloatStorage, key, location, numel). Read by a small stack machine of
// our own, without LibTorch: LibTorch 1.13's unpickler reads an OrderedDict as None.
#ifndef MAPD_WORKER_RUNTIME_TORCH_PICKLE_H_
#define MAPD_WORKER_RUNTIME_TORCH_PICKLE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/mapd/v1/graph.pb.h"

namespace mapd {

// One entry of a pickled state dict: a view of a storage record ("data/<storage_key>").
struct PickledTensor {
  std::string name;
  std::string storage_key;
  v1::DType dtype = v1::DTYPE_UNSPECIFIED;  // the storage's element type
  int64_t storage_offset = 0;               // in elements
  std::vector<int64_t> shape;
  std::vector<int64_t> stride;
};

// The tensors of the state dict `pickle` holds: a dict of tensors, or a dict whose "model" or
// "state_dict" entry is one (what checkpoints of training loops, and `mapctl export
// --optimizer-state`, write). INVALID_ARGUMENT saying what was found instead (an opcode or global
// not in a state dict, a value that is no tensor, a truncated stream).
absl::StatusOr<std::vector<PickledTensor>> ParseStateDictPickle(absl::string_view pickle);

}  // namespace mapd

#endif  // MAPD_WORKER_RUNTIME_TORCH_PICKLE_H_

// Training batches, one tensor per graph input, chosen by the input's role.
//
// Sources:
// - synthetic (seeded): tokens/targets and other integer inputs uniform in their range
//   (InputRange: the stated one, else [0, bound) from the graph — rows of the embedding the input
//   indexes, classes of the loss it is the target of); images, features and other float inputs
//   N(0, 1).
// - text file, byte-level: each batch row is a random window of T bytes of the file as
//   `tokens` and the same window shifted by one as `targets`; the vocabulary must be >= 256.
// - token file: the same windows over little-endian uint16 ids (nanoGPT's train.bin); every
//   id must be below the vocabulary.
// - NumPy arrays (.npy): `inputs` [N, ...] feeds the graph's first input [B, ...] and, if given,
//   `targets` [N, ...] its second: each batch is B samples (rows) in the order of a seeded
//   permutation of the N, a new permutation each epoch (a batch may span two epochs), converted
//   to the inputs' dtypes as PyTorch's .to() converts (uint8 images are not rescaled). Integer
//   inputs must lie in their range (InputRange). Floats do not become integers.
// Text and token files feed a language model: an input of role "tokens" [B, T] (and optionally
// "targets" of the same shape). An input no file feeds is synthetic. Every batch is drawn from a
// generator seeded with DeriveSeed(seed, "data"), so a seed gives the same batch sequence; every
// rank of a plan draws the same global batches and keeps its block.
#ifndef MAPD_WORKER_RUNTIME_DATA_H_
#define MAPD_WORKER_RUNTIME_DATA_H_

#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "proto/mapd/v1/graph.pb.h"
#include "worker/runtime/input_range.h"  // IndexBound, InputRange
#include "worker/runtime/torch_types.h"

namespace mapd {

struct DataOptions {
  enum class Source { kSynthetic, kText, kTokens, kNpy };
  Source source = Source::kSynthetic;
  // The text or token file (kText, kTokens), or the inputs' array (kNpy).
  std::string path;
  // kNpy: the targets' array, or empty (the graph's second input is then synthetic).
  std::string targets_path;
  uint64_t seed = 0;
};

// "synthetic", "text", "tokens" or "npy"; INVALID_ARGUMENT otherwise.
absl::StatusOr<DataOptions::Source> ParseDataSource(const std::string& name);


class DataSource {
 public:
  virtual ~DataSource() = default;
  // The next batch: every graph input by name, on the source's device.
  virtual absl::StatusOr<TensorMap> Next() = 0;
};

// INVALID_ARGUMENT for a graph the source cannot feed (no tokens input for a text or token file,
// a vocabulary below 256 for text, ids at or above the vocabulary, a file shorter than T+1
// tokens; an array whose sample shape differs from its input's, float values for an integer
// input, integer targets outside their bound, arrays of different lengths) or an integer input
// without a bound; NOT_FOUND for a missing file.
absl::StatusOr<std::unique_ptr<DataSource>> MakeDataSource(const v1::Graph& graph, const DataOptions& options,
                                                           c10::Device device);

}  // namespace mapd

#endif  // MAPD_WORKER_RUNTIME_DATA_H_

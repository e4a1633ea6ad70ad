// The values of a graph's integer inputs: what synthetic data draws and given data is checked
// against. A stated range (GraphInput.value_range, from `--input t:i64[8]:0..999`) is followed
// forward through simple ops — views, where, clamp, arithmetic with constants, remainder — to
// every index it reaches, and must fit each; without one, the range is read off the graph: the
// rows of the embedding the input indexes, the classes of the loss it is the target of. Torch-free.
#ifndef MAPD_WORKER_RUNTIME_INPUT_RANGE_H_
#define MAPD_WORKER_RUNTIME_INPUT_RANGE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "proto/mapd/v1/graph.pb.h"

namespace mapd {

// Exclusive upper bound of the values of integer input `input`, read off the graph: the rows
// of an embedding it indexes, or the classes of a cross_entropy/nll_loss it is the target of,
// following view-like ops in between (the smallest bound if several). INVALID_ARGUMENT when the
// input reaches neither, saying how to state a range.
absl::StatusOr<int64_t> IndexBound(const v1::Graph& graph, const std::string& input);

struct ValueRange {
  int64_t low = 0;
  int64_t high = 0;  // inclusive
};

// The input's values: its stated range, checked against every index it reaches (INVALID_ARGUMENT
// naming the op and the range that does not fit), else [0, IndexBound).
absl::StatusOr<ValueRange> InputRange(const v1::Graph& graph, const std::string& input);

}  // namespace mapd

#endif  // MAPD_WORKER_RUNTIME_INPUT_RANGE_H_

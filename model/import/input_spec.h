// Input specs: the dtype and shape of each model input, which the importer needs to fold
// shape computations. Given on the command line as `name:dtype[d0,d1,...]` (repeatable) or
// inside a TorchScript archive as the extra file `mapd_inputs.json`:
//   {"inputs": [{"name": "idx", "dtype": "int64", "shape": [8, 1024], "range": [0, 999]}]}
// ("range", optional: an integer input's values, both ends inclusive).
#ifndef MAPD_MODEL_IMPORT_INPUT_SPEC_H_
#define MAPD_MODEL_IMPORT_INPUT_SPEC_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "model/ir/tensor_type.h"

namespace mapd {

struct InputSpec {
  std::string name;
  TensorType type;
  // An integer input's values, low..high inclusive, when stated.
  std::optional<std::pair<int64_t, int64_t>> range;
  std::string ToString() const;  // "idx:i64[8,1024]", "t:i64[8]:0..999"
};

// Parses "idx:i64[8,1024]" (dtype names: see ParseDType; "x:f32[]" is a scalar), and an integer
// input's value range after the shape, "t:i64[8]:0..999" (inclusive).
absl::StatusOr<InputSpec> ParseInputSpec(const std::string& text);
// Parses the mapd_inputs.json document.
absl::StatusOr<std::vector<InputSpec>> ParseInputSpecsJson(const std::string& json);
std::string InputSpecsToJson(const std::vector<InputSpec>& specs);

}  // namespace mapd

#endif  // MAPD_MODEL_IMPORT_INPUT_SPEC_H_

// The model zoo: MAP's Graph IR for well-known models, built from a spec string.
//
// Zoo graphs declare every parameter with its shape and an init rule only; no weight is
// allocated, so a 70B-parameter model builds in milliseconds and a few MiB. That is what lets
// the planner and the benchmarks work on models that no test machine could hold.
//
// A spec is a zoo name with optional overrides: "gpt2" or
// "gpt2:layers=2,hidden=128,heads=4,vocab=512,seq=64". Every graph is a training graph whose
// single output is the scalar cross-entropy loss.
#ifndef MAPD_MODEL_ZOO_ZOO_H_
#define MAPD_MODEL_ZOO_ZOO_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/mapd/v1/graph.pb.h"

namespace mapd {

struct ZooOption {
  std::string key;
  std::string default_value;
  std::string doc;
};

struct ZooModelInfo {
  std::string name;
  std::string family;
  std::string description;
  int64_t published_params = 0;  // published trainable parameter count (0 if none, e.g. mlp)
  std::vector<ZooOption> options;
};

// All zoo models, in a stable order (by family, then size).
std::vector<ZooModelInfo> ListZooModels();

// True when the part of `spec` before ':' names a zoo model (the overrides are not checked).
bool IsZooModelSpec(const std::string& spec);

// Builds the training graph of `spec`. Errors are INVALID_ARGUMENT and name the fault: an
// unknown model (with the known names), an unknown option (with the model's keys), or a bad
// value ("heads=abc", a non-positive size, hidden not divisible by heads, ...).
absl::StatusOr<v1::Graph> BuildZooModel(const std::string& spec);

}  // namespace mapd

#endif  // MAPD_MODEL_ZOO_ZOO_H_

// Zoo spec strings ("gpt2:layers=2,heads=4") and the typed options a family reads from them.
#ifndef MAPD_MODEL_ZOO_MODEL_SPEC_H_
#define MAPD_MODEL_ZOO_MODEL_SPEC_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "model/ir/dtype.h"
#include "model/zoo/zoo.h"

namespace mapd {

struct ModelSpec {
  std::string name;
  std::vector<std::pair<std::string, std::string>> overrides;  // in spec order
};

// "name[:key=value[,key=value...]]"; whitespace around parts is ignored. Fails on a missing
// name, a part without '=', an empty key or value, and a key given twice.
absl::StatusOr<ModelSpec> ParseModelSpec(const std::string& spec);

// A model's option values (defaults, then overrides) with typed readers.
//
// Readers are sticky like GraphBuilder: the first bad value is recorded, later reads return
// a harmless 1, and the family checks status() once after reading its whole config. This
// keeps a family's config block a flat list of reads instead of one early-return per option.
class ModelOptions {
 public:
  // Fails when an override names a key the model does not have (the message lists its keys).
  static absl::StatusOr<ModelOptions> Make(const std::vector<ZooOption>& options,
                                           const std::vector<std::pair<std::string, std::string>>& overrides);

  // An integer in [1, kMaxSize].
  int64_t Size(const std::string& key);
  // A count of repeated layers, in [1, kMaxLayers]: the graph grows with it, and a spec of a few
  // bytes ("layers=1000000") must not make one of gigabytes.
  int64_t Layers(const std::string& key);
  // As Size, but the value "auto" gives `auto_value` (e.g. ffn = 4*hidden when not set).
  int64_t SizeOr(const std::string& key, int64_t auto_value);
  // A positive, finite number.
  double PositiveFloat(const std::string& key);
  // A floating-point dtype name ("f32", "bf16", ...).
  DType FloatDType(const std::string& key);

  // Records `message` as the error unless `ok`; for constraints between options.
  template <typename... Args>
  void Require(bool ok, const Args&... message) {
    if (!ok) Fail(absl::StrCat(message...));
  }
  const absl::Status& status() const { return status_; }

  // Sizes above this would overflow int64 element counts of activations (B*T*V and alike).
  static constexpr int64_t kMaxSize = int64_t{1} << 20;
  // The deepest published transformers have 96-126 layers.
  static constexpr int64_t kMaxLayers = 512;

 private:
  const std::string* Find(const std::string& key);
  void Fail(const std::string& message);

  std::map<std::string, std::string> values_;
  absl::Status status_;
};

}  // namespace mapd

#endif  // MAPD_MODEL_ZOO_MODEL_SPEC_H_

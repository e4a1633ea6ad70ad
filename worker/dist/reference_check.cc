#include "worker/dist/reference_check.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "worker/runtime/parameters.h"
#include "worker/runtime/torch_types.h"

namespace mapd {

absl::StatusOr<BlockDifference> WorstBlockDifference(const std::vector<v1::RankProgram>& programs,
                                                     const std::vector<v1::RankCheckpoint>& finals,
                                                     const std::vector<v1::TensorData>& reference) {
  if (programs.size() != finals.size()) {
    return absl::InvalidArgumentError(absl::StrCat(programs.size(), " programs but ", finals.size(), " ranks' final blocks"));
  }
  std::unordered_map<std::string, at::Tensor> one_device;
  for (const v1::TensorData& d : reference) {
    auto t = TensorFromProto(d);
    if (!t.ok()) return t.status();
    one_device[d.name()] = t->to(at::kDouble);
  }
  BlockDifference worst;
  for (size_t r = 0; r < programs.size(); ++r) {
    std::unordered_map<std::string, const v1::Shard*> shards;
    for (const v1::Shard& s : programs[r].parameters()) shards[s.name()] = &s;
    for (const v1::TensorData& d : finals[r].parameters()) {
      auto shard = shards.find(d.name());
      auto expected = one_device.find(d.name());
      if (shard == shards.end() || expected == one_device.end()) {
        return absl::InvalidArgumentError(absl::StrCat("rank ", r, "'s final block of '", d.name(), "' has no ",
                                                       shard == shards.end() ? "place in its program" : "single-device tensor"));
      }
      auto block = TensorFromProto(d);
      if (!block.ok()) return block.status();
      at::Tensor want = expected->second;
      const auto& start = shard->second->offsets().start();
      if (want.dim() != block->dim() || start.size() != block->dim()) {
        return absl::InvalidArgumentError(absl::StrCat("rank ", r, "'s block of '", d.name(), "' is ", DescribeTensor(*block),
                                                       "; one device's tensor is ", DescribeTensor(want)));
      }
      for (int64_t k = 0; k < block->dim(); ++k) {
        if (start[k] + block->size(k) > want.size(k)) {
          return absl::InvalidArgumentError(absl::StrCat("rank ", r, "'s block of '", d.name(), "' (", DescribeTensor(*block),
                                                         ") does not fit one device's ", DescribeTensor(want)));
        }
        want = want.narrow(k, start[k], block->size(k));
      }
      if (want.numel() == 0) continue;
      const double scale = std::max(1.0, want.abs().max().item<double>());
      const double diff = (block->to(at::kDouble) - want).abs().max().item<double>() / scale;
      ++worst.blocks;
      if (worst.parameter.empty() || diff > worst.relative) {
        worst.relative = diff;
        worst.parameter = d.name();
        worst.rank = static_cast<int>(r);
      }
    }
  }
  return worst;
}

}  // namespace mapd

#include "planner/plan/baselines.h"

#include <unordered_map>

namespace mapd {

namespace {

bool HasTrainableMatrix(const PreparedNode& pn) {
  for (size_t i = 0; i < pn.in.size(); ++i) {
    if (IsTrainable(pn.role[i]) && pn.in[i].shape.size() >= 2) return true;
  }
  return false;
}

// Does strategy `s` of node `pn` (batch label `batch`) play `role` on mesh axis `a`?
bool PlaysRole(const PreparedNode& pn, char batch, const Strategy& s, int a, AxisRole role) {
  const char picked = s.axis_label[a];
  if (role == AxisRole::kData) return picked == batch;
  if (picked != 0 && picked == batch) return false;  // a tensor-parallel axis never splits the batch
  if (HasTrainableMatrix(pn)) {
    // Every trainable matrix sharded on this axis.
    for (size_t i = 0; i < pn.in.size(); ++i) {
      if (!IsTrainable(pn.role[i]) || pn.in[i].shape.size() < 2) continue;
      if (s.inputs[i][a].kind != AxisPlacement::Kind::kShard) return false;
    }
    return true;
  }
  // Norms (trainable vectors only) and everything else: replicated across the group, or split on
  // a dimension other than the batch — Megatron's sequence parallelism, where norms, dropouts
  // and residual adds run split on the sequence (their normalised dimensions are unsplittable).
  return true;
}

}  // namespace

std::vector<std::vector<bool>> FamilyMask(const CostGraph& cg, const BatchInfo& batch,
                                          const std::vector<std::unique_ptr<PreparedNode>>& prepared,
                                          const std::vector<AxisRole>& roles) {
  std::vector<std::vector<bool>> mask(cg.strategies.size());
  for (size_t n = 0; n < cg.strategies.size(); ++n) {
    const auto& strategies = cg.strategies[n];
    mask[n].assign(strategies.size(), false);
    bool any = false;
    for (size_t k = 0; k < strategies.size(); ++k) {
      bool ok = true;
      for (size_t a = 0; a < roles.size() && ok; ++a) ok = PlaysRole(*prepared[n], batch.label[n], strategies[k], static_cast<int>(a), roles[a]);
      mask[n][k] = ok;
      any = any || ok;
    }
    if (!any && !strategies.empty()) mask[n][0] = true;  // generation puts the replicated strategy first
  }
  return mask;
}

}  // namespace mapd

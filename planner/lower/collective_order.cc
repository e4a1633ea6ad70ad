#include "planner/lower/collective_order.h"

#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/ir/tensor_type.h"
#include "planner/lower/lowering.h"

namespace mapd {

namespace {

// What rank `p` issues on `axis`, one line per collective, in order.
std::vector<std::string> CollectivesOnAxis(const v1::RankProgram& p, int axis) {
  std::vector<int> segment_of(p.instructions_size(), -1);
  for (int s = 0; s < p.recompute_size(); ++s) {
    for (int i = p.recompute(s).first(); i <= p.recompute(s).last() && i < p.instructions_size(); ++i) {
      if (i >= 0) segment_of[i] = s;
    }
  }
  std::vector<std::string> out;
  for (int i = 0; i < p.instructions_size(); ++i) {
    if (!p.instructions(i).has_communicate()) continue;
    const v1::Communicate& c = p.instructions(i).communicate();
    if (c.axis() != axis) continue;
    out.push_back(absl::StrCat(v1::Communicate::Kind_Name(c.kind()), "(dim ", c.dim(), ", to ", c.to_dim(), ") -> ",
                               TensorType::FromProto(c.output_type()).ToString(),
                               segment_of[i] >= 0 ? absl::StrCat(" in recompute segment ", segment_of[i]) : ""));
  }
  return out;
}

std::string StepCollectives(const v1::RankProgram& p) {
  return absl::StrCat("loss all-reduced over axes [", absl::StrJoin(p.loss_partial_axes(), ","), "], ZeRO ", p.zero_stage(),
                      ", ", std::max<int64_t>(1, p.micro_batches()), " micro-batch(es)");
}

}  // namespace

absl::Status VerifyCollectiveOrder(const std::vector<v1::RankProgram>& programs, const std::vector<int64_t>& mesh) {
  int64_t world = 1;
  for (int64_t d : mesh) world *= d;
  if (static_cast<int64_t>(programs.size()) != world) {
    return absl::InvalidArgumentError(absl::StrCat(programs.size(), " rank programs for a mesh of ", world, " devices"));
  }
  for (int r = 1; r < world; ++r) {
    if (StepCollectives(programs[r]) != StepCollectives(programs[0])) {
      return absl::FailedPreconditionError(absl::StrCat("ranks 0 and ", r, " would end their steps differently (",
                                                        StepCollectives(programs[0]), " against ", StepCollectives(programs[r]),
                                                        "); the run would deadlock — a lowering fault, not the plan's"));
    }
  }
  for (int axis = 0; axis < static_cast<int>(mesh.size()); ++axis) {
    // The group of a rank on this axis: its coordinates with this axis' left out.
    std::map<std::vector<int64_t>, int> first_of_group;
    for (int r = 0; r < world; ++r) {
      std::vector<int64_t> key = RankCoords(mesh, r);
      key.erase(key.begin() + axis);
      auto [it, fresh] = first_of_group.emplace(key, r);
      if (fresh) continue;
      const std::vector<std::string> a = CollectivesOnAxis(programs[it->second], axis), b = CollectivesOnAxis(programs[r], axis);
      for (size_t k = 0; k < std::max(a.size(), b.size()); ++k) {
        const std::string sa = k < a.size() ? a[k] : "nothing", sb = k < b.size() ? b[k] : "nothing";
        if (sa == sb) continue;
        return absl::FailedPreconditionError(absl::StrCat(
            "ranks ", it->second, " and ", r, " of a group on mesh axis ", axis, " disagree at its collective ", k + 1, ": ",
            sa, " against ", sb, "; the run would deadlock — a lowering fault, not the plan's"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace mapd

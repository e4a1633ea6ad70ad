#include "worker/rank/one_f_one_b.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace mapd {

std::vector<PassAction> OneFOneBSchedule(int stage, int stages, int64_t micro_batches) {
  const int64_t warmup = std::min<int64_t>(std::max(0, stages - 1 - stage), micro_batches);
  std::vector<PassAction> out;
  int64_t next_forward = 0, next_backward = 0;
  for (; next_forward < warmup; ++next_forward) out.push_back({true, next_forward});
  while (next_forward < micro_batches) {  // steady state: one forward, one backward
    out.push_back({true, next_forward++});
    out.push_back({false, next_backward++});
  }
  for (; next_backward < micro_batches; ++next_backward) out.push_back({false, next_backward});
  return out;
}

std::string DescribeSchedule(const std::vector<PassAction>& actions) {
  std::string out;
  for (const PassAction& a : actions) absl::StrAppend(&out, out.empty() ? "" : " ", a.forward ? "F" : "B", a.micro_batch);
  return out;
}

}  // namespace mapd

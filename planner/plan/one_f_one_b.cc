#include "planner/plan/one_f_one_b.h"

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

std::vector<PassAction> InterleavedSchedule(int stage, int stages, int chunks, int64_t micro_batches) {
  if (chunks <= 1) return OneFOneBSchedule(stage, stages, micro_batches);
  const int64_t p = stages, v = chunks, total = micro_batches * v;
  // The k-th chunk pass of a direction: its micro-batch and chunk (backwards from the last chunk).
  auto nth = [&](int64_t k, bool forward) {
    const int64_t group = k / (p * v), in_group = k % (p * v);
    const int chunk = static_cast<int>(in_group / p);
    return PassAction{forward, group * p + in_group % p, forward ? chunk : static_cast<int>(v - 1 - chunk)};
  };
  const int64_t warmup = std::min<int64_t>(total, 2 * (p - stage - 1) + (v - 1) * p);
  std::vector<PassAction> out;
  int64_t next_forward = 0, next_backward = 0;
  for (; next_forward < warmup; ++next_forward) out.push_back(nth(next_forward, true));
  while (next_forward < total) {  // steady state: one forward, one backward
    out.push_back(nth(next_forward++, true));
    out.push_back(nth(next_backward++, false));
  }
  for (; next_backward < total; ++next_backward) out.push_back(nth(next_backward, false));
  return out;
}

std::string DescribeSchedule(const std::vector<PassAction>& actions) {
  const bool chunked = std::any_of(actions.begin(), actions.end(), [](const PassAction& a) { return a.chunk != 0; });
  std::string out;
  for (const PassAction& a : actions) {
    absl::StrAppend(&out, out.empty() ? "" : " ", a.forward ? "F" : "B", a.micro_batch);
    if (chunked) absl::StrAppend(&out, ".", a.chunk);
  }
  return out;
}

}  // namespace mapd

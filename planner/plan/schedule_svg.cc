#include "planner/plan/schedule_svg.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace mapd {

std::vector<ScheduleSlot> OneFOneBSchedule(const std::vector<double>& pass_seconds, int64_t m) {
  const int p = static_cast<int>(pass_seconds.size());
  // Each stage's order of work: warm-up forwards, then one forward and one backward, then backwards.
  std::vector<std::vector<ScheduleSlot>> order(p);
  for (int i = 0; i < p; ++i) {
    const int64_t warm = std::min<int64_t>(p - i - 1, m);
    int64_t f = 0, b = 0;
    for (; f < warm; ++f) order[i].push_back({i, f, false});
    while (f < m) {
      order[i].push_back({i, f++, false});
      order[i].push_back({i, b++, true});
    }
    while (b < m) order[i].push_back({i, b++, true});
  }
  // forward_end[i][j], backward_end[i][j]: when stage i finished micro-batch j's forward/backward.
  std::vector<std::vector<double>> forward_end(p, std::vector<double>(m, -1)), backward_end(p, std::vector<double>(m, -1));
  std::vector<size_t> next(p, 0);
  std::vector<double> free_at(p, 0);
  std::vector<ScheduleSlot> out;
  for (bool progress = true; progress;) {
    progress = false;
    for (int i = 0; i < p; ++i) {
      while (next[i] < order[i].size()) {
        ScheduleSlot s = order[i][next[i]];
        const int64_t j = s.micro_batch;
        double ready = free_at[i];
        if (!s.backward && i > 0) {
          if (forward_end[i - 1][j] < 0) break;
          ready = std::max(ready, forward_end[i - 1][j]);
        }
        if (s.backward) {
          if (forward_end[i][j] < 0) break;
          if (i + 1 < p) {
            if (backward_end[i + 1][j] < 0) break;
            ready = std::max(ready, backward_end[i + 1][j]);
          }
        }
        s.start = ready;
        s.end = ready + pass_seconds[i] * (s.backward ? 2.0 / 3 : 1.0 / 3);
        (s.backward ? backward_end : forward_end)[i][j] = s.end;
        free_at[i] = s.end;
        out.push_back(s);
        ++next[i];
        progress = true;
      }
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const ScheduleSlot& a, const ScheduleSlot& b) { return a.stage < b.stage; });
  return out;
}

std::string ScheduleSvg(const PipelinePlan& plan, size_t max_slots) {
  std::vector<double> passes;
  for (const StagePlan& s : plan.stage_plans) passes.push_back(s.pass_seconds);
  const std::vector<ScheduleSlot> slots = OneFOneBSchedule(passes, plan.micro_batches);
  double makespan = 0;
  for (const ScheduleSlot& s : slots) makespan = std::max(makespan, s.end);
  // The first micro-batches when there are too many slots to draw.
  const int64_t shown = std::max<int64_t>(
      1, std::min<int64_t>(plan.micro_batches, static_cast<int64_t>(max_slots / std::max<size_t>(1, 2 * passes.size()))));
  const int left = 80, top = 30, row = 34, width = 1000;
  const int height = top + row * static_cast<int>(passes.size()) + 50;
  std::string svg = absl::StrFormat(
      R"(<svg id="schedule" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">)",
      left + width + 20, height);
  const double scale = makespan > 0 ? width / makespan : 0;
  for (size_t i = 0; i < passes.size(); ++i) {
    absl::StrAppendFormat(&svg, R"(<text x="4" y="%d">stage %d</text>)", top + row * static_cast<int>(i) + 20, i);
  }
  for (const ScheduleSlot& s : slots) {
    if (s.micro_batch >= shown) continue;
    const double x = left + s.start * scale, w = std::max(1.0, (s.end - s.start) * scale);
    const int y = top + row * s.stage + 4;
    absl::StrAppendFormat(&svg, R"(<rect x="%.2f" y="%d" width="%.2f" height="%d" fill="%s" stroke="#fff" stroke-width="0.5"/>)",
                          x, y, w, row - 8, s.backward ? "#f28e2b" : "#4e79a7");
    if (w >= 14) {
      absl::StrAppendFormat(&svg, R"(<text x="%.2f" y="%d" fill="#fff" text-anchor="middle">%d</text>)", x + w / 2,
                            y + (row - 8) / 2 + 4, s.micro_batch);
    }
  }
  const int legend = top + row * static_cast<int>(passes.size()) + 20;
  absl::StrAppendFormat(&svg,
                        R"(<rect x="%d" y="%d" width="12" height="12" fill="#4e79a7"/><text x="%d" y="%d">forward</text>)"
                        R"(<rect x="%d" y="%d" width="12" height="12" fill="#f28e2b"/><text x="%d" y="%d">backward</text>)"
                        R"(<text x="%d" y="%d">1F1B, %d micro-batches%s: %.1f ms from the first forward to the last backward</text>)",
                        left, legend, left + 16, legend + 10, left + 90, legend, left + 106, legend + 10, left + 200,
                        legend + 10, plan.micro_batches,
                        shown < plan.micro_batches ? absl::StrCat(" (the first ", shown, " drawn)") : "", makespan * 1e3);
  svg += "</svg>";
  return svg;
}

}  // namespace mapd

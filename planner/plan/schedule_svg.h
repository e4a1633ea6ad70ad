// The 1F1B schedule of a pipeline plan (DESIGN §6b), simulated from its stages' predicted times,
// and drawn as a timeline for the plan report: which micro-batch each stage runs when, forward
// and backward.
//
// 1F1B (PipeDream-flush): stage i of p first runs min(p − i − 1, m) forwards (the warm-up), then
// alternates one forward and one backward until its m forwards are done, then the remaining
// backwards. A forward of micro-batch j on stage i waits for stage i − 1's forward of j (and
// the send), a backward for stage i + 1's backward of j. A pass's forward is a third of it and
// its backward two thirds (the backward computes the gradients of inputs and of weights).
#ifndef MAPD_PLANNER_PLAN_SCHEDULE_SVG_H_
#define MAPD_PLANNER_PLAN_SCHEDULE_SVG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "planner/plan/planner.h"

namespace mapd {

struct ScheduleSlot {
  int stage = 0;
  int64_t micro_batch = 0;
  bool backward = false;
  double start = 0, end = 0;  // seconds from the step's start
};

// Per stage, its passes' seconds (forward + backward of one micro-batch, sends included as the
// plan counts them): the slots in the order each stage runs them, stage by stage.
std::vector<ScheduleSlot> OneFOneBSchedule(const std::vector<double>& pass_seconds, int64_t micro_batches);

// The timeline as an inline SVG (id="schedule"): one row per stage, forward slots blue, backward
// orange, the micro-batch in each slot wide enough for it. At most `max_slots` are drawn (the
// first micro-batches; the figure says how many).
std::string ScheduleSvg(const PipelinePlan& plan, size_t max_slots = 4000);

}  // namespace mapd

#endif  // MAPD_PLANNER_PLAN_SCHEDULE_SVG_H_

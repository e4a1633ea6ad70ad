// The plan report: one self-contained HTML file (inline CSS and SVG, no scripts, nothing
// fetched) with the mesh, the per-layer sharding, memory per device against the budget for the
// plan and every baseline, and the step times (`mapctl plan --report plan.html`).
#ifndef MAPD_PLANNER_PLAN_REPORT_HTML_H_
#define MAPD_PLANNER_PLAN_REPORT_HTML_H_

#include <string>

#include "model/ir/graph.h"
#include "planner/plan/planner.h"

namespace mapd {

struct PlanReportInfo {
  std::string model;
  int64_t devices = 0;
  std::string device_type;
  double memory_per_device = 0;  // the budget, bytes
};

std::string RenderPlanHtml(const Graph& graph, const PlanResult& result, const PlanReportInfo& info);

// Escapes &, <, >, " and ' for HTML text and attributes.
std::string HtmlEscape(const std::string& text);

}  // namespace mapd

#endif  // MAPD_PLANNER_PLAN_REPORT_HTML_H_

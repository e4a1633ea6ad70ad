#include "planner/plan/report_html.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/bytes.h"
#include "planner/plan/describe.h"
#include "planner/plan/schedule_svg.h"

namespace mapd {

std::string HtmlEscape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

namespace {

// Memory parts in drawing order, with their colours (also the legend).
struct Part {
  const char* name;
  const char* color;
};
constexpr Part kParts[] = {{"parameters", "#4e79a7"},
                           {"gradients", "#f28e2b"},
                           {"optimizer states", "#e15759"},
                           {"activations", "#76b7b2"},
                           {"gathered parameters", "#b07aa1"}};
constexpr const char* kAxisColors[] = {"#59a14f", "#edc948", "#9c755f"};

std::string Size(double bytes) { return FormatBytes(static_cast<int64_t>(bytes)); }
std::string Ms(double s) { return absl::StrFormat("%.1f ms", s * 1e3); }
std::string Mesh(const std::vector<int64_t>& m) { return absl::StrJoin(m, "x"); }

std::vector<double> PartsOf(const ChoiceCost& c) {
  return {c.parameter_bytes, c.gradient_bytes, c.optimizer_bytes, c.activation_bytes, c.fixed_bytes};
}

// The devices as a grid: axis 0 down, axis 1 across (a 1-D mesh is one row); at most 16 cells
// per direction are drawn, the rest elided.
std::string MeshSvg(const Cluster& cluster) {
  const int64_t rows = cluster.num_axes() >= 2 ? cluster.mesh[0] : 1;
  const int64_t cols = cluster.num_axes() >= 2 ? cluster.mesh[1] : cluster.mesh[0];
  const int64_t dr = std::min<int64_t>(rows, 16), dc = std::min<int64_t>(cols, 16);
  const int cell = 34, left = 90, top = 40;
  const int width = left + static_cast<int>(dc) * cell + 60, height = top + static_cast<int>(dr) * cell + 40;
  std::string s = absl::StrFormat(R"(<svg id="mesh" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" role="img">)", width, height);
  for (int64_t r = 0; r < dr; ++r) {
    for (int64_t c = 0; c < dc; ++c) {
      const int64_t id = r * cols + c;
      absl::StrAppendFormat(&s, R"(<rect x="%d" y="%d" width="%d" height="%d" rx="4" fill="#4e79a7" stroke="#fff"/>)",
                            left + c * cell, top + r * cell, cell - 4, cell - 4);
      absl::StrAppendFormat(&s, R"(<text x="%d" y="%d" font-size="10" fill="#fff" text-anchor="middle">%d</text>)",
                            left + c * cell + (cell - 4) / 2, top + r * cell + cell / 2 + 2, id);
    }
  }
  const int last_axis = cluster.num_axes() - 1;
  absl::StrAppendFormat(&s, R"(<text x="%d" y="%d" font-size="12">axis %d: %d devices, %s%s</text>)", left, top - 12,
                        last_axis, cols, cluster.links[last_axis].inter_node ? "across nodes" : "inside a node",
                        dc < cols ? " (first 16 drawn)" : "");
  if (cluster.num_axes() >= 2) {
    absl::StrAppendFormat(&s, R"(<text x="4" y="%d" font-size="12">axis 0: %d</text>)", top + 12, rows);
    absl::StrAppendFormat(&s, R"(<text x="4" y="%d" font-size="11">%s</text>)", top + 28,
                          cluster.links[0].inter_node ? "across nodes" : "inside a node");
  }
  s += "</svg>";
  return s;
}

// Labels of the bar charts. SVG text is not laid out by the browser's flow: a name wider than the
// chart's left margin runs off the drawing and is cut. So the margin is sized from the labels,
// each name's width estimated from the advance widths of DejaVu Sans (Debian's sans-serif, and
// wider than Liberation Sans, Arial or Helvetica, so a bound where those draw it), in
// thousandths of an em for ASCII 32..126; other characters count as a full em.
constexpr int kAdvance[95] = {
    318, 401, 460, 838, 636, 950, 780, 275, 390, 390, 500, 838, 318, 361, 318, 337,  //  !"#$%&'()*+,-./
    636, 636, 636, 636, 636, 636, 636, 636, 636, 636, 337, 337, 838, 838, 838, 531,  // 0-9 :;<=>?
    1000, 684, 686, 698, 770, 632, 575, 775, 752, 295, 295, 656, 557, 863, 748, 787,  // @A-O
    603, 787, 695, 635, 611, 732, 684, 989, 685, 611, 685, 390, 337, 390, 838, 500,  // P-Z [\]^_
    500, 613, 635, 550, 635, 615, 352, 635, 634, 278, 278, 579, 278, 974, 634, 612,  // `a-o
    635, 635, 411, 521, 392, 634, 592, 818, 592, 592, 525, 636, 337, 636, 838};      // p-z {|}~
constexpr int kLabelFontPx = 12;

// The estimated width in pixels of `text` (UTF-8) at `font_px`, with 5% to spare.
double TextWidth(const std::string& text, int font_px) {
  double em = 0;
  for (const char ch : text) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c >= 32 && c < 127) {
      em += kAdvance[c - 32] / 1000.0;
    } else if ((c & 0xC0) != 0x80) {  // the first byte of a character outside ASCII
      em += 1.0;
    }
  }
  return em * font_px * 1.05;
}

// The charts' left margin: the widest label and 16 px, at least `min_px`.
int LabelMargin(const std::vector<std::string>& names, int min_px) {
  double widest = 0;
  for (const std::string& name : names) widest = std::max(widest, TextWidth(name, kLabelFontPx));
  return std::max(min_px, static_cast<int>(std::ceil(widest)) + 16);
}

// A bar's label, right-aligned 8 px left of the bars.
std::string LabelSvg(const std::string& name, int left, int y) {
  return absl::StrFormat(R"(<text class="label" x="%d" y="%d" font-size="%d" text-anchor="end">%s</text>)", left - 8, y,
                         kLabelFontPx, HtmlEscape(name));
}

// Horizontal stacked bars of memory per device with the budget as a red line.
std::string MemorySvg(const std::vector<std::pair<std::string, const ChoiceCost*>>& bars, double budget) {
  double scale_max = budget;
  std::vector<std::string> names;
  for (const auto& [name, c] : bars) {
    scale_max = std::max(scale_max, c->peak_bytes());
    names.push_back(name);
  }
  const int left = LabelMargin(names, 120), bar_h = 20, gap = 8, top = 30, plot_w = 560;
  const int height = top + static_cast<int>(bars.size()) * (bar_h + gap) + 40;
  std::string s = absl::StrFormat(R"(<svg id="memory" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" role="img">)",
                                  left + plot_w + 120, height);
  // Legend.
  int lx = left;
  for (const Part& p : kParts) {
    absl::StrAppendFormat(&s, R"(<rect x="%d" y="6" width="12" height="12" fill="%s"/><text x="%d" y="16" font-size="11">%s</text>)",
                          lx, p.color, lx + 16, p.name);
    lx += 16 + static_cast<int>(std::ceil(TextWidth(p.name, 11))) + 14;
  }
  for (size_t i = 0; i < bars.size(); ++i) {
    const int y = top + static_cast<int>(i) * (bar_h + gap);
    absl::StrAppend(&s, LabelSvg(bars[i].first, left, y + 14));
    double x = left;
    const std::vector<double> parts = PartsOf(*bars[i].second);
    for (size_t p = 0; p < parts.size(); ++p) {
      const double w = parts[p] / scale_max * plot_w;
      if (w <= 0) continue;
      absl::StrAppendFormat(&s, R"(<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>%s: %s</title></rect>)", x,
                            y, w, bar_h, kParts[p].color, kParts[p].name, Size(parts[p]));
      x += w;
    }
    absl::StrAppendFormat(&s, R"(<text x="%.1f" y="%d" font-size="11">%s</text>)", x + 4, y + 14, Size(bars[i].second->peak_bytes()));
  }
  const double bx = left + budget / scale_max * plot_w;
  absl::StrAppendFormat(&s, R"(<line id="budget" x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#d00" stroke-width="3"/>)", bx,
                        top - 4, bx, height - 30);
  absl::StrAppendFormat(&s, R"(<text x="%.1f" y="%d" font-size="12" fill="#d00" text-anchor="middle">budget %s</text>)", bx,
                        height - 14, Size(budget));
  s += "</svg>";
  return s;
}

// Horizontal bars of predicted step time; the plan green, fitting baselines grey, the others hatched pale.
std::string StepSvg(const std::vector<std::tuple<std::string, double, bool, bool>>& bars) {
  double max_s = 0;
  std::vector<std::string> names;
  for (const auto& b : bars) {
    max_s = std::max(max_s, std::get<1>(b));
    names.push_back(std::get<0>(b));
  }
  const int left = LabelMargin(names, 120), bar_h = 18, gap = 6, top = 10, plot_w = 560;
  const int height = top + static_cast<int>(bars.size()) * (bar_h + gap) + 10;
  std::string s = absl::StrFormat(R"(<svg id="steps" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" role="img">)",
                                  left + plot_w + 160, height);
  for (size_t i = 0; i < bars.size(); ++i) {
    const auto& [name, seconds, fits, is_plan] = bars[i];
    const int y = top + static_cast<int>(i) * (bar_h + gap);
    const double w = max_s > 0 ? seconds / max_s * plot_w : 0;
    absl::StrAppend(&s, LabelSvg(name, left, y + 13));
    absl::StrAppendFormat(&s, R"(<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>)", left, y, w, bar_h,
                          is_plan ? "#59a14f" : (fits ? "#9d9d9d" : "#e8c4c4"));
    absl::StrAppendFormat(&s, R"(<text x="%.1f" y="%d" font-size="11">%s%s</text>)", left + w + 4, y + 13, Ms(seconds),
                          fits ? "" : " (does not fit)");
  }
  s += "</svg>";
  return s;
}

// A coloured chip per mesh axis that the strategy splits.
std::string AxisChips(const Strategy& s) {
  std::string out;
  for (size_t a = 0; a < s.axis_label.size(); ++a) {
    const bool split = s.axis_label[a] != 0;
    absl::StrAppendFormat(&out, R"(<span class="chip" style="background:%s">%d</span>)",
                          split ? kAxisColors[a % 3] : "#ddd", a);
  }
  return out;
}

}  // namespace

std::string RenderPlanHtml(const Graph& graph, const PlanResult& result, const PlanReportInfo& info) {
  const PlanCandidate& plan = result.plan;
  const ChoiceCost& cost = plan.cost;
  std::string h = R"(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>MAP plan: )" +
                  HtmlEscape(info.model) + R"(</title>
<style>
body{font-family:sans-serif;margin:24px;color:#222;max-width:1100px}
h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ccc}
table{border-collapse:collapse;font-size:13px}td,th{padding:3px 10px;border-bottom:1px solid #eee;text-align:left}
.kv td:first-child{color:#666}.fits{color:#2a7}.nofit{color:#c33}
td.axes{white-space:nowrap}.chip{display:inline-block;width:16px;height:16px;border-radius:3px;color:#000;font-size:11px;text-align:center;margin-right:2px}
</style></head><body>
)";
  absl::StrAppend(&h, "<h1>MAP plan for ", HtmlEscape(info.model), " on ", info.devices, " × ", HtmlEscape(info.device_type), "</h1>\n");
  if (result.pipeline) {
    // The plan has stages: what each holds and keeps, and the schedule drawn.
    const PipelinePlan& pp = *result.pipeline;
    absl::StrAppend(&h, "<h2>Pipeline stages: the plan</h2>\n<p>", pp.stages, " stages, ", HtmlEscape(pp.schedule), ", each on ",
                    Mesh(pp.stage_mesh), " devices; ", pp.micro_batches, " micro-batches; predicted step ",
                    Ms(pp.step_seconds), " (bubble ", absl::StrFormat("%.1f%%", 100 * pp.bubble_fraction),
                    "); the fullest stage ", Size(pp.peak_bytes), " per device",
                    result.fits ? absl::StrCat("; without stages ", Ms(cost.step_seconds), " (below)") : "", ".</p>\n");
    h += "<table id=\"stages\"><tr><th>Stage</th><th>Layers</th><th>Mesh</th><th>ZeRO</th><th>Recomputed</th><th>In flight</th>"
         "<th>Pass</th><th>Send</th><th>Once a step</th><th>Peak / device</th></tr>";
    for (size_t i = 0; i < pp.stage_plans.size(); ++i) {
      const StagePlan& s = pp.stage_plans[i];
      absl::StrAppend(&h, "<tr><td>", i, "</td><td>", HtmlEscape(s.first_name), " – ", HtmlEscape(s.last_name), "</td><td>",
                      Mesh(s.plan.mesh), "</td><td>", s.plan.zero_stage, "</td><td>", s.plan.recomputed_layers.size(), "</td><td>",
                      s.in_flight, "</td><td>", Ms(s.pass_seconds), "</td><td>", Ms(s.send_seconds), "</td><td>",
                      Ms(s.once_seconds), "</td><td>", Size(s.plan.cost.peak_bytes()), "</td></tr>");
    }
    absl::StrAppend(&h, "</table>\n<h2>Schedule</h2>\n", ScheduleSvg(pp), "\n");
    h += "<h2>Without stages</h2>\n<p>The best plan without pipeline stages, for comparison, and the baselines.</p>\n";
  }
  absl::StrAppend(&h, "<table class=\"kv\" id=\"summary\">");
  auto kv = [&](const std::string& k, const std::string& v) { absl::StrAppend(&h, "<tr><td>", k, "</td><td>", v, "</td></tr>"); };
  kv("Mesh", Mesh(plan.mesh));
  kv("ZeRO", plan.zero_stage == 0 ? "off" : absl::StrCat("stage ", plan.zero_stage));
  kv("Micro-batches", absl::StrCat(plan.micro_batches, " × ", plan.micro_batches > 0 ? result.global_batch / plan.micro_batches : 0,
                                   " samples per step", plan.micro_batches > 1 ? " (gradients accumulated, applied once)" : ""));
  if (!plan.recomputed_layers.empty()) kv("Recomputed layers", absl::StrCat(plan.recomputed_layers.size()));
  const int sp = SequenceParallelNorms(graph, plan.strategies);
  kv("Sequence parallelism", sp == 0 ? "no" : absl::StrCat("yes (", sp, " norms split on the sequence)"));
  kv("Predicted step time", absl::StrCat(Ms(cost.step_seconds), " (compute ", Ms(cost.compute_seconds), ", communication ",
                                         Ms(cost.comm_seconds), ")"));
  kv("Predicted peak memory per device",
     absl::StrCat("<span class=\"", result.fits ? "fits" : "nofit", "\">", Size(cost.peak_bytes()), "</span> of ",
                  Size(info.memory_per_device)));
  std::vector<std::string> comm;
  for (int k = 0; k < 4; ++k) comm.push_back(absl::StrCat(CollectiveName(static_cast<CollectiveKind>(k)), " ", Size(cost.comm_bytes[k])));
  kv("Communication per device per step", absl::StrJoin(comm, ", "));
  kv("Search", absl::StrFormat("%.2f s; %d mesh shape(s) solved, %d pruned; %d decisions for %d operators",
                               result.search_seconds, result.meshes_solved, result.meshes_pruned, plan.decisions,
                               graph.num_nodes()));
  h += "</table>\n";

  absl::StrAppend(&h, "<h2>Device mesh</h2>\n", MeshSvg(result.cluster), "\n");

  h += "<h2>Memory per device against the budget</h2>\n";
  std::vector<std::pair<std::string, const ChoiceCost*>> mem = {{"MAP plan", &cost}};
  for (const auto& b : result.baselines) {
    if (b.applicable) mem.push_back({b.name, &b.cost});
  }
  absl::StrAppend(&h, MemorySvg(mem, info.memory_per_device), "\n");

  h += "<h2>Predicted step time: the plan and the baselines</h2>\n";
  std::vector<std::tuple<std::string, double, bool, bool>> steps = {{"MAP plan", cost.step_seconds, result.fits, true}};
  for (const auto& b : result.baselines) {
    if (b.applicable) steps.emplace_back(b.name, b.cost.step_seconds, b.fits, false);
  }
  absl::StrAppend(&h, StepSvg(steps), "\n");
  h += "<table id=\"baselines\"><tr><th>Baseline</th><th>Mesh</th><th>Micro-batches</th><th>Step</th><th>Peak / device</th><th>Fits</th><th>MAP speed-up</th></tr>";
  for (const auto& b : result.baselines) {
    if (!b.applicable) {
      absl::StrAppend(&h, "<tr><td>", HtmlEscape(b.name), "</td><td>", Mesh(b.mesh), "</td><td colspan=5>not applicable: ",
                      HtmlEscape(b.note), "</td></tr>");
      continue;
    }
    absl::StrAppend(&h, "<tr><td>", HtmlEscape(b.name), "</td><td>", Mesh(b.mesh), "</td><td>", b.micro_batches, "</td><td>", Ms(b.cost.step_seconds),
                    "</td><td>", Size(b.cost.peak_bytes()), "</td><td class=\"", b.fits ? "fits\">yes" : "nofit\">no",
                    "</td><td>", absl::StrFormat("%.2f×", b.cost.step_seconds / cost.step_seconds), "</td></tr>");
  }
  h += "</table>\n";

  h += "<h2>Sharding per layer</h2>\n<p>Chips: mesh axes the operator splits (coloured) or not (grey).</p>\n";
  h += "<table id=\"layers\"><tr><th>Layer</th><th>Op</th><th>Axes</th><th>Strategy</th><th>Placements</th><th>Count</th></tr>";
  for (const LayerSummary& row : SummarizeLayers(graph, plan.strategies)) {
    const Strategy& s = plan.strategies[row.node];
    absl::StrAppend(&h, "<tr><td>", HtmlEscape(row.layer), "</td><td>", HtmlEscape(graph.node(row.node).op()),
                    "</td><td class=\"axes\">", AxisChips(s), "</td><td>", HtmlEscape(row.words), "</td><td><code>",
                    HtmlEscape(s.PlacementsString()), "</code></td><td>", row.count, "</td></tr>");
  }
  h += "</table>\n";

  h += "<h2>Mesh shapes searched (MAP's best on each)</h2>\n<table id=\"alternatives\"><tr><th>Mesh</th><th>ZeRO</th><th>Micro-batches</th><th>Step</th><th>Peak / device</th><th>Fits</th></tr>";
  for (const auto& a : result.alternatives) {
    absl::StrAppend(&h, "<tr><td>", Mesh(a.mesh), "</td><td>", a.zero_stage, "</td><td>", a.micro_batches, "</td><td>", Ms(a.cost.step_seconds), "</td><td>",
                    Size(a.cost.peak_bytes()), "</td><td>", a.fits ? "yes" : "no", "</td></tr>");
  }
  for (const auto& p : result.pruned) {
    absl::StrAppend(&h, "<tr><td>", Mesh(p.mesh), "</td><td>-</td><td>-</td><td>&ge; ", Ms(p.cost.step_seconds),
                    "</td><td>-</td><td>pruned</td></tr>");
  }
  h += "</table>\n<p style=\"color:#888;font-size:12px\">Generated by mapctl plan (MAP). Predictions come from MAP's cost model "
       "(docs/planner.md).</p>\n</body></html>\n";
  return h;
}

}  // namespace mapd

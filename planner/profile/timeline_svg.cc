#include "planner/profile/timeline_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/bytes.h"

namespace mapd {

namespace {

std::string Escape(const std::string& s) {
  return absl::StrReplaceAll(s, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}});
}

const char* PhaseColor(Phase p) {
  switch (p) {
    case Phase::kForward: return "#e8f1fb";
    case Phase::kBackward: return "#fdf0e6";
    case Phase::kOptimizer: return "#eaf7ea";
    default: return "#f4f4f4";
  }
}

// A "nice" axis step (1, 2 or 5 × 10^k) for about `ticks` ticks up to `max`.
double NiceStep(double max, int ticks) {
  const double raw = max / ticks;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * mag >= raw) return m * mag;
  }
  return 10 * mag;
}

}  // namespace

std::string RenderTimelineSvg(const ProfileReport& r, const std::string& title) {
  const double W = 960, H = 500, left = 90, right = 40, top = 70, bottom = 70;
  const double pw = W - left - right, ph = H - top - bottom;
  const auto& pts = r.timeline;
  const size_t n = std::max<size_t>(pts.size(), 2);
  const double peak = std::max<double>(static_cast<double>(r.predicted_peak_bytes), 1.0);
  // Axis in MiB or GiB, whichever reads better.
  const double unit = peak >= (1LL << 30) ? double(1LL << 30) : double(1LL << 20);
  const char* unit_name = unit > (1 << 20) ? "GiB" : "MiB";
  const double step = NiceStep(peak / unit, 5);
  const double ymax = std::ceil(peak / unit / step) * step * unit;
  auto X = [&](size_t i) { return left + pw * static_cast<double>(i) / static_cast<double>(n - 1); };
  auto Y = [&](double b) { return top + ph * (1 - b / ymax); };

  std::string s = absl::StrCat("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"", W, "\" height=\"", H,
                               "\" viewBox=\"0 0 ", W, " ", H, "\" font-family=\"sans-serif\" font-size=\"12\">\n");
  absl::StrAppend(&s, "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
  absl::StrAppend(&s, "<text x=\"", left, "\" y=\"22\" font-size=\"16\" font-weight=\"bold\">", Escape(title),
                  "</text>\n");
  absl::StrAppend(&s, "<text x=\"", left, "\" y=\"40\" fill=\"#555\">live memory over one training step (",
                  OptimizerName(r.options.optimizer), ", ", PrecisionName(r.options.precision),
                  "); predicted peak ", FormatBytes(r.predicted_peak_bytes), "</text>\n");
  // Phase bands.
  size_t i = 0;
  while (i < pts.size()) {
    size_t j = i;
    while (j + 1 < pts.size() && pts[j + 1].phase == pts[i].phase) ++j;
    const double x0 = X(i), x1 = std::max(X(j), x0 + 2);
    absl::StrAppend(&s, "<rect x=\"", x0, "\" y=\"", top, "\" width=\"", x1 - x0, "\" height=\"", ph, "\" fill=\"",
                    PhaseColor(pts[i].phase), "\"/>\n");
    if (pts[i].phase != Phase::kStart) {
      const double label_x = std::min(std::max((x0 + x1) / 2, left + 30), left + pw - 30);
      absl::StrAppend(&s, "<text x=\"", label_x, "\" y=\"", top + ph + 32, "\" text-anchor=\"middle\" fill=\"#333\">",
                      PhaseName(pts[i].phase), "</text>\n");
    }
    i = j + 1;
  }
  // Y axis grid.
  for (double v = 0; v <= ymax / unit + 1e-9; v += step) {
    const double y = Y(v * unit);
    absl::StrAppend(&s, "<line x1=\"", left, "\" y1=\"", y, "\" x2=\"", left + pw, "\" y2=\"", y,
                    "\" stroke=\"#ddd\"/>\n");
    char label[32];
    std::snprintf(label, sizeof(label), "%g %s", v, unit_name);
    absl::StrAppend(&s, "<text x=\"", left - 8, "\" y=\"", y + 4, "\" text-anchor=\"end\">", label, "</text>\n");
  }
  absl::StrAppend(&s, "<line x1=\"", left, "\" y1=\"", top + ph, "\" x2=\"", left + pw, "\" y2=\"", top + ph,
                  "\" stroke=\"#333\"/>\n");
  absl::StrAppend(&s, "<text x=\"", left + pw / 2, "\" y=\"", H - 12,
                  "\" text-anchor=\"middle\" fill=\"#555\">events (forward nodes, backward nodes, optimizer step)</text>\n");
  // The curve.
  std::string path;
  for (size_t k = 0; k < pts.size(); ++k) {
    absl::StrAppend(&path, k == 0 ? "M" : " L", X(k), ",", Y(static_cast<double>(pts[k].live_bytes)));
  }
  absl::StrAppend(&s, "<path d=\"", path, "\" fill=\"none\" stroke=\"#1f5fa8\" stroke-width=\"1.5\"/>\n");
  // Peak marker.
  size_t peak_i = 0;
  for (size_t k = 0; k < pts.size(); ++k) {
    if (pts[k].live_bytes > pts[peak_i].live_bytes) peak_i = k;
  }
  if (!pts.empty()) {
    const double px = X(peak_i), py = Y(static_cast<double>(pts[peak_i].live_bytes));
    const auto& b = r.peak_breakdown;
    absl::StrAppend(&s, "<circle cx=\"", px, "\" cy=\"", py, "\" r=\"4\" fill=\"#c0392b\"/>\n");
    const bool flip = px > left + pw * 0.6;
    absl::StrAppend(&s, "<text x=\"", flip ? px - 8 : px + 8, "\" y=\"", std::max(py - 8, top + 12),
                    "\" fill=\"#c0392b\" text-anchor=\"", flip ? "end" : "start", "\">peak ",
                    FormatBytes(r.predicted_peak_bytes), " (", PhaseName(r.peak_phase), ", ", Escape(r.peak_at),
                    ")</text>\n");
    absl::StrAppend(&s, "<text x=\"", left, "\" y=\"58\" fill=\"#c0392b\">at the peak: parameters ",
                    FormatBytes(b.parameters), ", gradients ", FormatBytes(b.gradients), ", optimizer states ",
                    FormatBytes(b.optimizer_states), ", saved activations ", FormatBytes(b.saved_activations),
                    ", transients ", FormatBytes(b.transients), "</text>\n");
  }
  absl::StrAppend(&s, "</svg>\n");
  return s;
}

}  // namespace mapd

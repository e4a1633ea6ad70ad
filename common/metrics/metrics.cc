#include "common/metrics/metrics.h"

#include <charconv>
#include <cmath>
#include <iterator>
#include <regex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace mapd {

namespace {

bool ValidName(const std::string& name) {
  static const std::regex re("[a-zA-Z_:][a-zA-Z0-9_:]*");
  return std::regex_match(name, re);
}

std::string Number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::abs(v) < 1e15) return absl::StrFormat("%.0f", v);
  // The shortest text that reads back as the same double ("0.05", not "0.050000000000000003").
  char buf[32];
  const auto end = std::to_chars(buf, buf + sizeof(buf), v).ptr;
  return std::string(buf, end);
}

std::string EscapeHelp(const std::string& help) {
  std::string out;
  for (char c : help) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string LabelText(const Labels& labels, const std::string& extra_key = "", const std::string& extra_value = "") {
  std::vector<std::string> parts;
  for (const auto& [k, v] : labels) parts.push_back(absl::StrCat(k, "=\"", EscapeLabelValue(v), "\""));
  if (!extra_key.empty()) parts.push_back(absl::StrCat(extra_key, "=\"", extra_value, "\""));
  if (parts.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < parts.size(); ++i) absl::StrAppend(&out, i ? "," : "", parts[i]);
  return out + "}";
}

}  // namespace

std::string EscapeLabelValue(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

absl::Status MetricsRegistry::Declare(const std::string& name, const std::string& help, Type type, std::vector<double> bounds) {
  if (!ValidName(name)) return absl::InvalidArgumentError(absl::StrCat("metric name '", name, "' is not [a-zA-Z_:][a-zA-Z0-9_:]*"));
  if (type == Type::kCounter && (name.size() < 6 || name.substr(name.size() - 6) != "_total")) {
    return absl::InvalidArgumentError(absl::StrCat("counter '", name, "' must end in _total"));
  }
  for (size_t i = 1; i < bounds.size(); ++i) {
    if (!(bounds[i] > bounds[i - 1])) return absl::InvalidArgumentError(absl::StrCat("histogram '", name, "': bounds must increase"));
  }
  absl::MutexLock lock(&mu_);
  for (const Family& f : families_) {
    if (f.name == name) {
      if (f.type != type) return absl::InvalidArgumentError(absl::StrCat("metric '", name, "' is already declared as another type"));
      return absl::OkStatus();
    }
  }
  families_.push_back(Family{name, help, type, std::move(bounds), {}, {}});
  return absl::OkStatus();
}

absl::Status MetricsRegistry::Counter(const std::string& name, const std::string& help) { return Declare(name, help, Type::kCounter, {}); }
absl::Status MetricsRegistry::Gauge(const std::string& name, const std::string& help) { return Declare(name, help, Type::kGauge, {}); }
absl::Status MetricsRegistry::Histogram(const std::string& name, const std::string& help, std::vector<double> bounds) {
  return Declare(name, help, Type::kHistogram, std::move(bounds));
}

MetricsRegistry::Family* MetricsRegistry::Find(const std::string& name, Type type) {
  for (Family& f : families_) {
    if (f.name == name && f.type == type) return &f;
  }
  ++errors_;
  return nullptr;
}

void MetricsRegistry::Add(const std::string& name, const Labels& labels, double by) {
  absl::MutexLock lock(&mu_);
  if (Family* f = Find(name, Type::kCounter); f != nullptr && by >= 0) f->values[labels] += by;
}

void MetricsRegistry::Set(const std::string& name, const Labels& labels, double value) {
  absl::MutexLock lock(&mu_);
  if (Family* f = Find(name, Type::kGauge)) f->values[labels] = value;
}

void MetricsRegistry::Clear(const std::string& name) {
  absl::MutexLock lock(&mu_);
  if (Family* f = Find(name, Type::kGauge)) f->values.clear();
}

void MetricsRegistry::RemoveSeries(const std::string& label, const std::string& value) {
  absl::MutexLock lock(&mu_);
  auto has = [&](const Labels& labels) {
    auto it = labels.find(label);
    return it != labels.end() && it->second == value;
  };
  auto erase = [&](auto& samples) {
    for (auto it = samples.begin(); it != samples.end();) it = has(it->first) ? samples.erase(it) : std::next(it);
  };
  for (Family& f : families_) {
    erase(f.values);
    erase(f.histograms);
  }
}

void MetricsRegistry::Observe(const std::string& name, const Labels& labels, double value) {
  absl::MutexLock lock(&mu_);
  Family* f = Find(name, Type::kHistogram);
  if (f == nullptr) return;
  HistogramSample& h = f->histograms[labels];
  h.counts.resize(f->bounds.size(), 0);
  for (size_t i = 0; i < f->bounds.size(); ++i) {
    if (value <= f->bounds[i]) {
      ++h.counts[i];
      break;
    }
  }
  h.sum += value;
  ++h.count;
}

std::string MetricsRegistry::Encode() const {
  absl::MutexLock lock(&mu_);
  std::string out;
  for (const Family& f : families_) {
    const char* type = f.type == Type::kCounter ? "counter" : f.type == Type::kGauge ? "gauge" : "histogram";
    absl::StrAppend(&out, "# HELP ", f.name, " ", EscapeHelp(f.help), "\n# TYPE ", f.name, " ", type, "\n");
    if (f.type != Type::kHistogram) {
      for (const auto& [labels, v] : f.values) absl::StrAppend(&out, f.name, LabelText(labels), " ", Number(v), "\n");
      continue;
    }
    for (const auto& [labels, h] : f.histograms) {
      double cumulative = 0;
      for (size_t i = 0; i < f.bounds.size(); ++i) {
        cumulative += i < h.counts.size() ? h.counts[i] : 0;
        absl::StrAppend(&out, f.name, "_bucket", LabelText(labels, "le", Number(f.bounds[i])), " ", Number(cumulative), "\n");
      }
      absl::StrAppend(&out, f.name, "_bucket", LabelText(labels, "le", "+Inf"), " ", Number(h.count), "\n");
      absl::StrAppend(&out, f.name, "_sum", LabelText(labels), " ", Number(h.sum), "\n");
      absl::StrAppend(&out, f.name, "_count", LabelText(labels), " ", Number(h.count), "\n");
    }
  }
  absl::StrAppend(&out, "# HELP mapd_metrics_errors_total Updates of metrics that were never declared (a bug if not 0).\n",
                  "# TYPE mapd_metrics_errors_total counter\nmapd_metrics_errors_total ", Number(errors_), "\n");
  return out;
}

}  // namespace mapd

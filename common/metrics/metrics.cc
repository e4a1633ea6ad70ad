#include "common/metrics/metrics.h"

#include <prometheus/check_names.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace mapd {

namespace {

// prometheus-cpp 1.0.1 writes HELP text as given; the format wants backslash and newline escaped
// (a raw newline ends the comment and the next line is read as a sample).
std::string EscapeHelp(const std::string& help) {
  std::string out;
  for (char c : help) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

}  // namespace

MetricsRegistry::MetricsRegistry() : registry_(std::make_unique<prometheus::Registry>()) {
  errors_ = &prometheus::BuildCounter()
                 .Name("mapd_metrics_errors_total")
                 .Help("Updates of metrics that were never declared, or with a label name Prometheus refuses (a bug if not 0).")
                 .Register(*registry_)
                 .Add({});
}

MetricsRegistry::~MetricsRegistry() = default;

absl::Status MetricsRegistry::Declare(const std::string& name, const std::string& help, Type type, std::vector<double> bounds) {
  if (!prometheus::CheckMetricName(name)) {
    return absl::InvalidArgumentError(absl::StrCat("metric name '", name, "' is not [a-zA-Z_:][a-zA-Z0-9_:]*"));
  }
  if (type == Type::kCounter && !absl::EndsWith(name, "_total")) {
    return absl::InvalidArgumentError(absl::StrCat("counter '", name, "' must end in _total"));
  }
  for (size_t i = 1; i < bounds.size(); ++i) {
    if (!(bounds[i] > bounds[i - 1])) return absl::InvalidArgumentError(absl::StrCat("histogram '", name, "': bounds must increase"));
  }
  absl::MutexLock lock(&mu_);
  if (auto it = families_.find(name); it != families_.end() || name == "mapd_metrics_errors_total") {
    if (it == families_.end() || it->second.type != type) {
      return absl::InvalidArgumentError(absl::StrCat("metric '", name, "' is already declared as another type"));
    }
    return absl::OkStatus();
  }
  Family f{type};
  f.help = EscapeHelp(help);
  f.bounds = std::move(bounds);
  switch (type) {
    case Type::kCounter: f.counters = &prometheus::BuildCounter().Name(name).Help(f.help).Register(*registry_); break;
    case Type::kGauge: f.gauges = &prometheus::BuildGauge().Name(name).Help(f.help).Register(*registry_); break;
    case Type::kHistogram: f.histograms = &prometheus::BuildHistogram().Name(name).Help(f.help).Register(*registry_); break;
  }
  families_.emplace(name, std::move(f));
  return absl::OkStatus();
}

absl::Status MetricsRegistry::Counter(const std::string& name, const std::string& help) { return Declare(name, help, Type::kCounter, {}); }
absl::Status MetricsRegistry::Gauge(const std::string& name, const std::string& help) { return Declare(name, help, Type::kGauge, {}); }
absl::Status MetricsRegistry::Histogram(const std::string& name, const std::string& help, std::vector<double> bounds) {
  return Declare(name, help, Type::kHistogram, std::move(bounds));
}

MetricsRegistry::Family* MetricsRegistry::Series(const std::string& name, Type type, const Labels& labels) {
  auto it = families_.find(name);
  bool valid = it != families_.end() && it->second.type == type;
  for (auto l = labels.begin(); valid && l != labels.end(); ++l) valid = prometheus::CheckLabelName(l->first);
  if (!valid) {
    errors_->Increment();
    return nullptr;
  }
  it->second.series.insert(labels);
  return &it->second;
}

void MetricsRegistry::Add(const std::string& name, const Labels& labels, double by) {
  absl::MutexLock lock(&mu_);
  if (!(by >= 0)) return;  // a counter only goes up
  if (Family* f = Series(name, Type::kCounter, labels)) f->counters->Add(labels).Increment(by);
}

void MetricsRegistry::Set(const std::string& name, const Labels& labels, double value) {
  absl::MutexLock lock(&mu_);
  if (Family* f = Series(name, Type::kGauge, labels)) f->gauges->Add(labels).Set(value);
}

void MetricsRegistry::Observe(const std::string& name, const Labels& labels, double value) {
  absl::MutexLock lock(&mu_);
  if (Family* f = Series(name, Type::kHistogram, labels)) {
    f->histograms->Add(labels, prometheus::Histogram::BucketBoundaries(f->bounds)).Observe(value);
  }
}

void MetricsRegistry::RemoveLocked(Family& f, const Labels& labels) {
  // Add returns the series already there; Remove drops it.
  switch (f.type) {
    case Type::kCounter: f.counters->Remove(&f.counters->Add(labels)); break;
    case Type::kGauge: f.gauges->Remove(&f.gauges->Add(labels)); break;
    case Type::kHistogram: f.histograms->Remove(&f.histograms->Add(labels, prometheus::Histogram::BucketBoundaries(f.bounds))); break;
  }
}

void MetricsRegistry::Clear(const std::string& name) {
  absl::MutexLock lock(&mu_);
  auto it = families_.find(name);
  if (it == families_.end() || it->second.type != Type::kGauge) {
    errors_->Increment();
    return;
  }
  for (const Labels& labels : it->second.series) RemoveLocked(it->second, labels);
  it->second.series.clear();
}

void MetricsRegistry::RemoveSeries(const std::string& label, const std::string& value) {
  absl::MutexLock lock(&mu_);
  for (auto& [name, f] : families_) {
    for (auto it = f.series.begin(); it != f.series.end();) {
      const auto l = it->find(label);
      if (l == it->end() || l->second != value) {
        ++it;
        continue;
      }
      RemoveLocked(f, *it);
      it = f.series.erase(it);
    }
  }
}

std::string MetricsRegistry::Encode() const {
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  // prometheus-cpp leaves out a family without series; ours are listed anyway (HELP and TYPE, no
  // samples), so every metric a process can serve shows from its start (the dashboard test and
  // the docs' table are checked against an idle daemon's).
  std::set<std::string> collected;
  for (const prometheus::MetricFamily& f : families) collected.insert(f.name);
  absl::MutexLock lock(&mu_);
  for (const auto& [name, f] : families_) {
    if (collected.count(name) != 0) continue;
    prometheus::MetricFamily empty;
    empty.name = name;
    empty.help = f.help;
    empty.type = f.type == Type::kCounter ? prometheus::MetricType::Counter
                 : f.type == Type::kGauge ? prometheus::MetricType::Gauge
                                          : prometheus::MetricType::Histogram;
    families.push_back(std::move(empty));
  }
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace mapd

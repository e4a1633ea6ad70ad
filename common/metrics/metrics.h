// Metrics in the Prometheus text exposition format (version 0.0.4), encoded here: prometheus-cpp
// is not packaged for Debian (DESIGN §10). Families of counters, gauges and histograms with label
// sets; names follow Prometheus' conventions (base units, `_total` for counters, prefix `mapd_`),
// checked by `promtool check metrics` in the tests. Thread-safe.
#ifndef MAPD_COMMON_METRICS_METRICS_H_
#define MAPD_COMMON_METRICS_METRICS_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace mapd {

using Labels = std::map<std::string, std::string>;

class MetricsRegistry {
 public:
  // Declares a family (INVALID_ARGUMENT for a bad name, or one declared with another type).
  absl::Status Counter(const std::string& name, const std::string& help);
  absl::Status Gauge(const std::string& name, const std::string& help);
  // `bounds`: the buckets' upper bounds, increasing (+Inf is added).
  absl::Status Histogram(const std::string& name, const std::string& help, std::vector<double> bounds);

  // Sample updates; a family not declared is an error in debug terms: ignored and counted in
  // mapd_metrics_errors_total so a typo shows.
  void Add(const std::string& name, const Labels& labels, double by = 1);   // counters
  void Set(const std::string& name, const Labels& labels, double value);    // gauges
  void Observe(const std::string& name, const Labels& labels, double value);  // histograms
  // Drops a gauge family's samples (before setting a fresh set, e.g. jobs by state).
  void Clear(const std::string& name);
  // Drops every sample, in every family, whose labels have `label`="`value`" (a finished job's
  // series, so a long-lived process's series do not grow with every job).
  void RemoveSeries(const std::string& label, const std::string& value);

  // The exposition text: families in declaration order, samples by label set.
  std::string Encode() const;

 private:
  enum class Type { kCounter, kGauge, kHistogram };
  struct HistogramSample {
    std::vector<double> counts;  // per bound, not cumulative
    double sum = 0, count = 0;
  };
  struct Family {
    std::string name, help;
    Type type;
    std::vector<double> bounds;
    std::map<Labels, double> values;
    std::map<Labels, HistogramSample> histograms;
  };
  absl::Status Declare(const std::string& name, const std::string& help, Type type, std::vector<double> bounds);
  Family* Find(const std::string& name, Type type) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::vector<Family> families_ ABSL_GUARDED_BY(mu_);
  double errors_ ABSL_GUARDED_BY(mu_) = 0;
};

// A label value escaped for the exposition format (backslash, quote, newline).
std::string EscapeLabelValue(const std::string& value);

}  // namespace mapd

#endif  // MAPD_COMMON_METRICS_METRICS_H_

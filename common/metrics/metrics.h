// MAP's metrics: a name-keyed facade over prometheus-cpp (Debian's prometheus-cpp-dev), whose
// registry holds the series and whose TextSerializer writes the exposition text (format 0.0.4).
// Families of counters, gauges and histograms with label sets; names follow Prometheus' rules
// (base units, `_total` for counters, `_ratio` for fractions, prefix `mapd_`), checked by
// `promtool check metrics` in the tests. Thread-safe.
//
// Why a facade rather than prometheus-cpp's families at each call site: a finished job's series
// are dropped by label (`RemoveSeries`), which prometheus-cpp only does one metric pointer at a
// time, and an update of an undeclared family or with a bad label name must count an error
// rather than throw (prometheus-cpp throws std::invalid_argument).
#ifndef MAPD_COMMON_METRICS_METRICS_H_
#define MAPD_COMMON_METRICS_METRICS_H_

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace prometheus {
class Registry;
class Counter;
class Gauge;
class Histogram;
template <typename T>
class Family;
}  // namespace prometheus

namespace mapd {

using Labels = std::map<std::string, std::string>;

class MetricsRegistry {
 public:
  MetricsRegistry();
  ~MetricsRegistry();

  // Declares a family (INVALID_ARGUMENT for a bad name, or one declared with another type).
  absl::Status Counter(const std::string& name, const std::string& help);
  absl::Status Gauge(const std::string& name, const std::string& help);
  // `bounds`: the buckets' upper bounds, increasing (+Inf is added).
  absl::Status Histogram(const std::string& name, const std::string& help, std::vector<double> bounds);

  // Sample updates; a family not declared, or a label name Prometheus refuses, is a bug: ignored
  // and counted in mapd_metrics_errors_total so it shows.
  void Add(const std::string& name, const Labels& labels, double by = 1);   // counters
  void Set(const std::string& name, const Labels& labels, double value);    // gauges
  void Observe(const std::string& name, const Labels& labels, double value);  // histograms
  // Drops a gauge family's samples (before setting a fresh set, e.g. jobs by state).
  void Clear(const std::string& name);
  // Drops every sample, in every family, whose labels have `label`="`value`" (a finished job's
  // series, so a long-lived process's series do not grow with every job).
  void RemoveSeries(const std::string& label, const std::string& value);

  // The exposition text (prometheus-cpp's TextSerializer): families grouped by type (counters,
  // gauges, histograms), then those without series yet (HELP and TYPE only); a family's series in
  // no fixed order.
  std::string Encode() const;

 private:
  enum class Type { kCounter, kGauge, kHistogram };
  struct Family {
    Type type;
    std::string help;  // escaped for the text format
    prometheus::Family<prometheus::Counter>* counters = nullptr;
    prometheus::Family<prometheus::Gauge>* gauges = nullptr;
    prometheus::Family<prometheus::Histogram>* histograms = nullptr;
    std::vector<double> bounds;
    std::set<Labels> series;  // the label sets added, to remove them by label
  };
  absl::Status Declare(const std::string& name, const std::string& help, Type type, std::vector<double> bounds);
  // The family `name` of `type` with `labels` recorded as one of its series; nullptr (an error
  // counted) when there is none or a label name is invalid.
  Family* Series(const std::string& name, Type type, const Labels& labels) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveLocked(Family& family, const Labels& labels) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::unique_ptr<prometheus::Registry> registry_;
  std::map<std::string, Family> families_ ABSL_GUARDED_BY(mu_);
  prometheus::Counter* errors_ = nullptr;
};

}  // namespace mapd

#endif  // MAPD_COMMON_METRICS_METRICS_H_

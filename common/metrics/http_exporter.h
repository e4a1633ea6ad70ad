// Serves GET /metrics (the registry's exposition text) over HTTP with cpp-httplib, on its own
// thread. `collect` runs before each scrape to refresh gauges (jobs by state, workers).
#ifndef MAPD_COMMON_METRICS_HTTP_EXPORTER_H_
#define MAPD_COMMON_METRICS_HTTP_EXPORTER_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "common/metrics/metrics.h"

namespace httplib {
class Server;
}

namespace mapd {

class MetricsExporter {
 public:
  // `listen` is host:port (port 0: a free one). UNAVAILABLE when it cannot bind.
  static absl::StatusOr<std::unique_ptr<MetricsExporter>> Start(const std::string& listen, MetricsRegistry* registry,
                                                                std::function<void()> collect);
  ~MetricsExporter();
  int port() const { return port_; }

 private:
  MetricsExporter() = default;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace mapd

#endif  // MAPD_COMMON_METRICS_HTTP_EXPORTER_H_

// mapd_build_info: which build a process's series come from.
#ifndef MAPD_COMMON_METRICS_BUILD_INFO_H_
#define MAPD_COMMON_METRICS_BUILD_INFO_H_

#include <string>

#include "common/metrics/metrics.h"

namespace mapd {

// Declares and sets mapd_build_info{component,version,revision} = 1 (Prometheus' idiom: join on
// it to tell which build a series came from). `component`: "coordinator" or "worker".
void ExportBuildInfo(MetricsRegistry* metrics, const std::string& component);

}  // namespace mapd

#endif  // MAPD_COMMON_METRICS_BUILD_INFO_H_

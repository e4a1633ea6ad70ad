#include "common/metrics/build_info.h"

#include "common/version.h"

namespace mapd {

void ExportBuildInfo(MetricsRegistry* metrics, const std::string& component) {
  (void)metrics->Gauge("mapd_build_info", "1, labelled with the build's version, source revision and program (coordinator, worker).");
  metrics->Set("mapd_build_info", {{"component", component}, {"version", MapdVersion()}, {"revision", MapdRevision()}}, 1);
}

}  // namespace mapd

// Plans costed on what will run them (docs/coordinator.md "Measured profiles"): a job whose spec
// names no device_type is planned on the profile its workers measured at start and sent with
// their registration, not the catalogue's.
#ifndef MAPD_SERVER_DISPATCH_MEASURED_PROFILES_H_
#define MAPD_SERVER_DISPATCH_MEASURED_PROFILES_H_

#include <string>
#include <vector>

#include "proto/mapd/v1/jobs.pb.h"
#include "proto/mapd/v1/workers.pb.h"

namespace mapd {

// The spec a job is planned with. With device_type empty: named the measured profile of the
// ALIVE workers that offer its kind of device — where they differ, the slowest (lowest fp32
// rate: a step waits for its slowest rank) — with the memory of the smallest such device, as
// RegisterMeasuredProfile names it ("measured-worker-a-1f2e3d4c", what the plan's summary shows);
// "cpu" (the catalogue's) where one of them sent no profile, or for a cuda job (workers measure
// their host's CPU only). Other specs are returned as they are.
v1::JobSpec CostedSpec(const v1::JobSpec& spec, const std::vector<v1::Worker>& workers);

}  // namespace mapd

#endif  // MAPD_SERVER_DISPATCH_MEASURED_PROFILES_H_

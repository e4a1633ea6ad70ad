// DeviceProfile on the wire (proto/mapd/v1/device_profile.proto): what a worker sends of the host
// it measured, and the one place that reads it back — bounded (a worker's message is input like
// a client's: sizes capped, every figure finite, DeviceProfile::Validate) with errors that name
// the field at fault.
#ifndef MAPD_PLANNER_PROFILE_DEVICE_PROFILE_PROTO_H_
#define MAPD_PLANNER_PROFILE_DEVICE_PROFILE_PROTO_H_

#include "absl/status/statusor.h"
#include "planner/profile/device_profile.h"
#include "proto/mapd/v1/device_profile.pb.h"

namespace mapd {

// The most entries a profile from the wire may carry: calibrate measures 7 product sizes, 6 op
// rates and 2-3 group sizes; these leave room and bound what a hostile sender can make us keep.
inline constexpr int kMaxProfileMatmulRates = 64;
inline constexpr int kMaxProfileOpRates = 64;
inline constexpr int kMaxProfileHostCollectives = 16;
inline constexpr size_t kMaxProfileStringBytes = 512;

v1::DeviceProfile DeviceProfileToProto(const DeviceProfile& profile);

// INVALID_ARGUMENT naming the field: "profile.matmul_rates: 70 entries, at most 64".
absl::StatusOr<DeviceProfile> DeviceProfileFromProto(const v1::DeviceProfile& proto);

}  // namespace mapd

#endif  // MAPD_PLANNER_PROFILE_DEVICE_PROFILE_PROTO_H_

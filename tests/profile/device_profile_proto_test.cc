// A measured profile on the wire: it round-trips, and what a worker sends is bounded and checked
// (sizes, finite figures) with the field named; measured profiles registered by name are found
// by that name, the same figures under the same name.
#include "planner/profile/device_profile_proto.h"

#include <gtest/gtest.h>

#include <limits>

namespace mapd {
namespace {

DeviceProfile Measured() {
  DeviceProfile p = *FindDeviceProfile("cpu");
  p.name = "this-host";
  p.source = "measured";
  p.host_threads = 2;
  p.threads = 1;
  p.matmul_rates = {{8192, 1e9}, {2e9, 9e10}};
  p.op_rates = {{"gelu", 2e10}};
  p.host_collectives = {{2, 1.5e-5, 2.6e-10, 0.97, 7e-5}};
  p.measured_unix_seconds = 1.8e9;
  p.calibration_key = "host: h; software: s";
  return p;
}

TEST(DeviceProfileProto, RoundTrips) {
  auto back = DeviceProfileFromProto(DeviceProfileToProto(Measured()));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->ToJson(), Measured().ToJson());
}

TEST(DeviceProfileProto, WhatAWorkerSendsIsBoundedAndChecked) {
  v1::DeviceProfile many = DeviceProfileToProto(Measured());
  for (int i = 0; i < kMaxProfileMatmulRates; ++i) many.add_matmul_rates()->set_flops(1e10 + i);
  auto st = DeviceProfileFromProto(many).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("profile.matmul_rates"), absl::string_view::npos) << st;

  v1::DeviceProfile infinite = DeviceProfileToProto(Measured());
  infinite.set_fp32_flops(std::numeric_limits<double>::infinity());
  st = DeviceProfileFromProto(infinite).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("finite"), absl::string_view::npos) << st;

  v1::DeviceProfile long_name = DeviceProfileToProto(Measured());
  long_name.set_name(std::string(kMaxProfileStringBytes + 1, 'x'));
  EXPECT_EQ(DeviceProfileFromProto(long_name).status().code(), absl::StatusCode::kInvalidArgument);

  v1::DeviceProfile no_rate = DeviceProfileToProto(Measured());
  no_rate.set_memory_bandwidth(0);
  EXPECT_EQ(DeviceProfileFromProto(no_rate).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DeviceProfileProto, MeasuredProfilesAreRegisteredByNameAndFigures) {
  DeviceProfile p = Measured();
  p.name = "worker a/../x";  // a name from the wire: only letters, digits, '.', '_', '-' kept
  auto name = RegisterMeasuredProfile(p);
  ASSERT_TRUE(name.ok()) << name.status();
  EXPECT_EQ(name->rfind("measured-worker_a_.._x-", 0), 0u) << *name;
  EXPECT_EQ(name->find('/'), std::string::npos);
  EXPECT_EQ(*RegisterMeasuredProfile(p), *name);  // the same figures, the same name
  const DeviceProfile* found = FindDeviceProfile(*name);
  ASSERT_NE(found, nullptr);
  EXPECT_DOUBLE_EQ(found->fp32_flops, p.fp32_flops);
  p.fp32_flops *= 2;
  EXPECT_NE(*RegisterMeasuredProfile(p), *name);
  p.vector_flops = -1;
  EXPECT_EQ(RegisterMeasuredProfile(p).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mapd

// mapd-worker --rank-ports: the range parsed, the kernel's ephemeral range read, and a worker
// whose kernel would hand its ranks ports outside the range refused with what to set.
#include "worker/daemon/rank_ports.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "common/file_io.h"

namespace mapd {
namespace {

using ::testing::HasSubstr;

TEST(RankPorts, ARangeIsLoDashHiWithinTheTcpPorts) {
  auto r = ParsePortRange("30000-30999");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->low, 30000);
  EXPECT_EQ(r->high, 30999);
  EXPECT_EQ(r->ToString(), "30000-30999");
  for (const char* bad : {"", "30000", "0-10", "10-5", "1-65536", "a-b", "1-2-3", "-5"}) {
    EXPECT_EQ(ParsePortRange(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(RankPorts, AWorkerStartsOnlyWhenTheKernelsRangeLiesInside) {
  const std::string file = ::testing::TempDir() + "/port_range_" + std::to_string(getpid());
  ASSERT_TRUE(WriteStringToFileAtomic(file, "32768\t60999\n").ok());
  auto ephemeral = ReadEphemeralPorts(file);
  ASSERT_TRUE(ephemeral.ok()) << ephemeral.status();
  EXPECT_EQ(ephemeral->ToString(), "32768-60999");
  EXPECT_TRUE(CheckRankPorts(*ParsePortRange("32768-60999"), *ephemeral).ok());
  EXPECT_TRUE(CheckRankPorts(*ParsePortRange("1024-65535"), *ephemeral).ok());
  const absl::Status narrow = CheckRankPorts(*ParsePortRange("30000-30999"), *ephemeral);
  EXPECT_EQ(narrow.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(narrow.message()), HasSubstr("net.ipv4.ip_local_port_range, which is 32768-60999 here"));
  EXPECT_THAT(std::string(narrow.message()), HasSubstr("sysctl -w net.ipv4.ip_local_port_range=\"30000 30999\""));
  ASSERT_TRUE(WriteStringToFileAtomic(file, "garbage\n").ok());
  EXPECT_EQ(ReadEphemeralPorts(file).status().code(), absl::StatusCode::kDataLoss);
  // This machine's own range reads.
  EXPECT_TRUE(ReadEphemeralPorts().ok());
  unlink(file.c_str());
}

}  // namespace
}  // namespace mapd

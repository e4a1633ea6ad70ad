// This host's calibration is measured once per host and build: a second read takes the cached
// profile without measuring; another host or build, or a cache that does not parse, measures again
// (and says why); a failed measurement writes nothing.
#include "worker/calibrate/calibration_cache.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "common/file_io.h"

namespace mapd {
namespace {

std::string TempDir(const std::string& name) {
  const auto dir = std::filesystem::path(testing::TempDir()) / ("calibration_cache_" + name);
  std::filesystem::remove_all(dir);
  return dir.string();
}

// A measurement that counts its calls and reports a rate of its own.
struct FakeMeasure {
  int calls = 0;
  double rate = 1e11;
  absl::StatusOr<DeviceProfile> operator()() {
    ++calls;
    DeviceProfile p = *FindDeviceProfile("cpu");
    p.name = "this-host";
    p.source = "measured";
    p.fp32_flops = rate;
    return p;
  }
};

CalibrationKey Key(const std::string& host, const std::string& software) { return CalibrationKey{host, software}; }

// Other processes runnable: none, and far past any host's threads.
constexpr double kQuiet = 0, kBusy = 1e6;

TEST(CalibrationCache, MeasuresOnceAndReadsTheCacheAfter) {
  const std::string dir = TempDir("once");
  FakeMeasure m;
  auto measure = [&] { return m(); };
  auto first = LoadOrCalibrate(dir, Key("h", "s"), measure, kQuiet);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->measured_now);
  EXPECT_EQ(first->why, "no calibration is cached for this host");
  EXPECT_EQ(first->profile.calibration_key, Key("h", "s").ToString());
  EXPECT_GT(first->profile.measured_unix_seconds, 0);
  m.rate = 5e10;  // what a second measurement would say: the cache's answer is the first
  auto second = LoadOrCalibrate(dir, Key("h", "s"), measure, kQuiet);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE(second->measured_now);
  EXPECT_EQ(m.calls, 1);
  EXPECT_DOUBLE_EQ(second->profile.fp32_flops, 1e11);
  EXPECT_LT(second->seconds, 1.0);
  // The file is a profile as `mapctl calibrate` writes it: --device-type FILE reads it.
  auto loaded = LoadDeviceProfile(second->path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_DOUBLE_EQ(loaded->fp32_flops, 1e11);
}

TEST(CalibrationCache, AnotherHostOrBuildMeasuresAgain) {
  const std::string dir = TempDir("changed");
  FakeMeasure m;
  auto measure = [&] { return m(); };
  ASSERT_TRUE(LoadOrCalibrate(dir, Key("h", "s"), measure, kQuiet).ok());
  m.rate = 2e11;
  auto build = LoadOrCalibrate(dir, Key("h", "s2"), measure, kQuiet);
  ASSERT_TRUE(build.ok()) << build.status();
  EXPECT_TRUE(build->measured_now);
  EXPECT_EQ(build->why, "this build differs from the one it was measured with");
  EXPECT_DOUBLE_EQ(build->profile.fp32_flops, 2e11);
  auto host = LoadOrCalibrate(dir, Key("h2", "s2"), measure, kQuiet);
  ASSERT_TRUE(host.ok()) << host.status();
  EXPECT_TRUE(host->measured_now);
  EXPECT_EQ(host->why, "the host differs from the one it was measured on");
  EXPECT_EQ(m.calls, 3);
  // This machine's key names both parts.
  const CalibrationKey here = ThisHostKey();
  EXPECT_NE(here.host.find("hardware threads"), std::string::npos) << here.host;
  EXPECT_NE(here.software.find("LibTorch"), std::string::npos) << here.software;
}

TEST(CalibrationCache, AnUnreadableCacheIsMeasuredOverAndAFailedMeasurementWritesNothing) {
  const std::string dir = TempDir("broken");
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(WriteStringToFileAtomic(dir + "/host-calibration.json", "{not json").ok());
  FakeMeasure m;
  auto again = LoadOrCalibrate(dir, Key("h", "s"), [&] { return m(); }, kQuiet);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->why, "the cached calibration does not parse");
  const std::string other = TempDir("failed");
  auto failed = LoadOrCalibrate(other, Key("h", "s"), [] { return absl::StatusOr<DeviceProfile>(absl::InternalError("no LibTorch")); });
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kInternal);
  EXPECT_FALSE(std::filesystem::exists(other + "/host-calibration.json"));
  EXPECT_EQ(LoadOrCalibrate("", Key("h", "s"), [&] { return m(); }).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(CalibrationCache, AMeasurementOnABusyHostIsMeasuredAgainOnceTheHostIsQuiet) {
  const std::string dir = TempDir("busy");
  FakeMeasure m;
  auto measure = [&] { return m(); };
  auto busy = LoadOrCalibrate(dir, Key("h", "s"), measure, kBusy);
  ASSERT_TRUE(busy.ok()) << busy.status();
  EXPECT_TRUE(busy->profile.measured_busy);
  EXPECT_NE(busy->why.find("the host was busy"), std::string::npos) << busy->why;
  // Still busy: nothing better to measure, the busy one is used.
  auto again = LoadOrCalibrate(dir, Key("h", "s"), measure, kBusy);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->measured_now);
  // Quiet: measured again, and kept as a quiet measurement.
  auto quiet = LoadOrCalibrate(dir, Key("h", "s"), measure, kQuiet);
  ASSERT_TRUE(quiet.ok());
  EXPECT_TRUE(quiet->measured_now);
  EXPECT_EQ(quiet->why, "it was measured on a busy host, and the host is quiet now");
  EXPECT_FALSE(quiet->profile.measured_busy);
  EXPECT_FALSE(LoadOrCalibrate(dir, Key("h", "s"), measure, kQuiet)->measured_now);
  EXPECT_EQ(m.calls, 2);
}

TEST(CalibrationCache, TheSettingSaysWhereAutoTakesItsProfileFrom) {
  setenv("MAPD_CALIBRATION", "off", 1);
  EXPECT_EQ(AutoDeviceTypeWithoutCache(), std::optional<std::string>("cpu"));
  setenv("MAPD_CALIBRATION", "/p/host.json", 1);
  EXPECT_EQ(AutoDeviceTypeWithoutCache(), std::optional<std::string>("/p/host.json"));
  unsetenv("MAPD_CALIBRATION");
  EXPECT_EQ(DefaultCalibrationSetting(), "auto");
  EXPECT_FALSE(AutoDeviceTypeWithoutCache().has_value());
}

}  // namespace
}  // namespace mapd

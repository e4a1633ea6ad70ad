// The safety margin learned from the record of predicted against measured rank peaks
// (planner/runnable/memory_margin.h).
#include "planner/runnable/memory_margin.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace mapd {
namespace {

std::string FreshDir(const std::string& name) {
  const std::string dir = (std::filesystem::temp_directory_path() / ("memory_margin_test_" + name + "_" + std::to_string(getpid()))).string();
  std::filesystem::remove_all(dir);
  return dir;
}

TEST(MemoryMarginTest, TheDefaultWithoutARecordTheLargestShortfallWithOne) {
  const std::string dir = FreshDir("learn");
  EXPECT_DOUBLE_EQ(ReadMemoryMargin("").fraction, kDefaultMemoryMargin);
  EXPECT_DOUBLE_EQ(ReadMemoryMargin(dir).fraction, kDefaultMemoryMargin);
  EXPECT_EQ(ReadMemoryMargin(dir).recorded, 0);
  // Peaks at or under their predictions keep the default.
  ASSERT_TRUE(RecordMemoryPeaks(dir, {{1000, 990}, {2000, 2000}}).ok());
  EXPECT_DOUBLE_EQ(ReadMemoryMargin(dir).fraction, kDefaultMemoryMargin);
  EXPECT_EQ(ReadMemoryMargin(dir).recorded, 2);
  // A peak 4% over its prediction sets it; one far over is capped.
  ASSERT_TRUE(RecordMemoryPeaks(dir, {{1000, 1040}, {0, 5}}).ok());  // the pair with a zero is left out
  EXPECT_NEAR(ReadMemoryMargin(dir).fraction, 0.04, 1e-12);
  EXPECT_EQ(ReadMemoryMargin(dir).recorded, 3);
  EXPECT_NE(ReadMemoryMargin(dir).Describe().find("4.00%, among 3 rank peaks"), std::string::npos) << ReadMemoryMargin(dir).Describe();
  ASSERT_TRUE(RecordMemoryPeaks(dir, {{1000, 3000}}).ok());
  EXPECT_DOUBLE_EQ(ReadMemoryMargin(dir).fraction, kMaxMemoryMargin);
  std::filesystem::remove_all(dir);
}

TEST(MemoryMarginTest, TheRecordKeepsTheLastRunsAndABrokenOneIsTheDefault) {
  const std::string dir = FreshDir("keep");
  ASSERT_TRUE(RecordMemoryPeaks(dir, {{1000, 1500}}).ok());  // 50% short: falls out of the window below
  for (int i = 0; i < kMemoryRecordRuns; ++i) ASSERT_TRUE(RecordMemoryPeaks(dir, {{1000, 1000}}).ok());
  EXPECT_EQ(ReadMemoryMargin(dir).recorded, kMemoryRecordRuns);
  EXPECT_DOUBLE_EQ(ReadMemoryMargin(dir).fraction, kDefaultMemoryMargin);
  std::ofstream(dir + "/memory-record.json") << "{not json";
  EXPECT_DOUBLE_EQ(ReadMemoryMargin(dir).fraction, kDefaultMemoryMargin);
  EXPECT_TRUE(RecordMemoryPeaks(dir, {{1000, 1020}}).ok());  // a broken record is started again
  EXPECT_NEAR(ReadMemoryMargin(dir).fraction, 0.02, 1e-12);
  std::filesystem::remove_all(dir);
}

TEST(MemoryMarginTest, FitsWithMarginKeepsTheFractionFree) {
  EXPECT_TRUE(FitsWithMargin(1000, 1010, 0.01));
  EXPECT_FALSE(FitsWithMargin(1000, 1009, 0.01));
  EXPECT_TRUE(FitsWithMargin(1000, 1000, 0));
}

}  // namespace
}  // namespace mapd

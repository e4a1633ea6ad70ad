// The CUDA inventory answers on every machine: built or not, GPU or not.
#include "worker/device/device_info.h"

#include <gtest/gtest.h>

namespace mapd {
namespace {

TEST(DeviceInfo, AnswersWhetherBuiltOrNot) {
  auto inv = QueryCuda();
#ifdef MAPD_HAVE_CUDA
  EXPECT_TRUE(BuiltWithCuda());
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_GT(inv->runtime_version, 0);
  EXPECT_FALSE(inv->nccl_version.empty());
  // Without a GPU the note says why; with one, every device reports memory.
  if (inv->devices.empty()) {
    EXPECT_FALSE(inv->note.empty());
  }
  for (const auto& d : inv->devices) EXPECT_GT(d.total_memory_bytes, 0) << d.name;
#else
  EXPECT_FALSE(BuiltWithCuda());
  ASSERT_FALSE(inv.ok());
  EXPECT_EQ(inv.status().code(), absl::StatusCode::kFailedPrecondition);
#endif
}

}  // namespace
}  // namespace mapd

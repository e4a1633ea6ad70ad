// A job's data file on a worker: under the operator's --data-root and nowhere else, with one
// answer for every refusal (issue 18's probes: /etc/passwd, a root-only file, ../ escapes).
#include "worker/daemon/job_data.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace mapd {
namespace {

TEST(JobData, OnlyRegularFilesUnderTheDataRootAreRead) {
  namespace fs = std::filesystem;
  const fs::path base = fs::path(::testing::TempDir()) / ("job_data_" + std::to_string(getpid()));
  fs::remove_all(base);
  const fs::path root = base / "root", outside = base / "outside";
  fs::create_directories(root / "corpus");
  fs::create_directories(outside);
  std::ofstream(root / "corpus" / "a.txt") << "hello";
  std::ofstream(outside / "secret.txt") << "secret";
  fs::create_symlink(outside / "secret.txt", root / "escape.txt");
  fs::create_symlink(root / "corpus" / "a.txt", root / "inside.txt");
  ASSERT_EQ(mkfifo((root / "pipe").c_str(), 0600), 0);

  auto good = ResolveJobData(root.string(), "corpus/a.txt");
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ(*good, fs::canonical(root / "corpus" / "a.txt").string());
  auto linked = ResolveJobData(root.string(), "inside.txt");  // a symlink that stays inside
  ASSERT_TRUE(linked.ok()) << linked.status();
  EXPECT_EQ(*linked, *good);

  const absl::Status first = ResolveJobData(root.string(), "missing.txt").status();
  EXPECT_EQ(first.code(), absl::StatusCode::kPermissionDenied);
  for (const std::string& bad : {std::string("/etc/passwd"), std::string("../outside/secret.txt"), std::string("../../../../etc/passwd"),
                                 std::string("escape.txt"), std::string("pipe"), std::string("corpus"), std::string("")}) {
    const absl::Status st = ResolveJobData(root.string(), bad).status();
    EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied) << bad;
    // The same words whether the file exists, is a pipe, a directory or outside: nothing learnt.
    EXPECT_EQ(std::string(st.message()).substr(st.message().find("' is")), std::string(first.message()).substr(first.message().find("' is")))
        << bad;
  }
  const absl::Status none = ResolveJobData("", "corpus/a.txt").status();
  EXPECT_EQ(none.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(none.message().find("give mapd-worker --data-root DIR"), std::string::npos) << none;
  fs::remove_all(base);
}

}  // namespace
}  // namespace mapd

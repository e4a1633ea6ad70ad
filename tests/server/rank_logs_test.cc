// The coordinator's copy of ranks' output: offsets that only grow, the bound per rank (a job's
// share), the tail, a reader behind what is kept, and the bound over all jobs.
#include "server/jobs/rank_logs.h"

#include <gtest/gtest.h>

namespace mapd {
namespace {

TEST(RankLogs, ReadsFromAnOffsetAndTheTail) {
  RankLogs logs;
  logs.Append(1, 2, 0, "a\nb\n", 0);
  logs.Append(1, 2, 0, "c\nd", 0);
  auto all = logs.Read(1, 0, 0, 0);
  EXPECT_EQ(all.text, "a\nb\nc\nd");
  EXPECT_EQ(all.start_offset, 0);
  EXPECT_EQ(all.next_offset, 7);
  auto after = logs.Read(1, 0, 4, 0);  // a follower that has read "a\nb\n"
  EXPECT_EQ(after.text, "c\nd");
  EXPECT_EQ(after.start_offset, 4);
  EXPECT_EQ(logs.Read(1, 0, 0, 2).text, "c\nd");
  EXPECT_EQ(logs.Read(1, 0, 0, 1).text, "d");
  EXPECT_EQ(logs.Read(1, 0, 0, 10).text, "a\nb\nc\nd");
  logs.Append(1, 2, 0, "\n", 0);
  EXPECT_EQ(logs.Read(1, 0, 0, 1).text, "d\n");
  EXPECT_EQ(logs.Read(1, 0, 0, 1).start_offset, 6);
  EXPECT_EQ(logs.Read(1, 1, 0, 0).text, "");  // rank 1 said nothing
  EXPECT_EQ(logs.Read(2, 0, 0, 0).text, "");  // nor job 2
  // An offset past the end: the coordinator restarted since the reader's last answer.
  EXPECT_EQ(logs.Read(1, 0, 100, 0).text, "a\nb\nc\nd\n");
}

TEST(RankLogs, KeepsTheLastPartOfEachRankWithinItsShareAndAllJobsWithinTheTotal) {
  RankLogLimits limits;
  limits.per_job_bytes = 400;
  limits.min_rank_bytes = 100;
  limits.max_rank_bytes = 1000;
  limits.total_bytes = 500;
  RankLogs logs(limits);
  std::string lines;
  for (int i = 0; i < 100; ++i) lines += "line " + std::to_string(i) + "\n";  // 690 bytes
  logs.Append(1, 2, 0, lines, 0);  // 2 ranks: 200 bytes each
  auto kept = logs.Read(1, 0, 0, 0);
  EXPECT_LE(kept.text.size(), 200u);
  EXPECT_EQ(kept.text.substr(0, 5), "line ");  // cut at a line's start
  EXPECT_EQ(kept.text.substr(kept.text.size() - 8), "line 99\n");
  EXPECT_EQ(kept.start_offset + static_cast<int64_t>(kept.text.size()), static_cast<int64_t>(lines.size()));
  EXPECT_EQ(kept.dropped_bytes, kept.start_offset);  // asked from 0: what went is said
  EXPECT_EQ(logs.total_bytes(), static_cast<int64_t>(kept.text.size()));
  // Over the total, the oldest job goes; the job being written to stays.
  for (int job = 2; job <= 4; ++job) logs.Append(job, 1, 0, std::string(190, 'x') + "\n", 0);
  EXPECT_LE(logs.total_bytes(), 500);
  EXPECT_EQ(logs.Read(1, 0, 0, 0).text, "");
  EXPECT_EQ(logs.Read(4, 0, 0, 0).text.size(), 191u);
  logs.Forget(4);
  EXPECT_EQ(logs.Read(4, 0, 0, 0).text, "");
  EXPECT_LE(logs.total_bytes(), 191 * 2);
}

}  // namespace
}  // namespace mapd

#include "server/jobs/rank_logs.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace mapd {

void RankLogs::Append(int64_t job, int ranks, int rank, std::string_view text, int64_t dropped_before) {
  absl::MutexLock lock(&mu_);
  Stream& s = jobs_[job][rank];
  const size_t before = s.text.size();
  if (dropped_before > 0) {
    absl::StrAppend(&s.text, "[mapd: ", dropped_before, " bytes of rank ", rank,
                    "'s output dropped by its worker; its rank_", rank, ".log has them]\n");
  }
  s.text.append(text);
  const int64_t bound = std::clamp(limits_.per_job_bytes / std::max(1, ranks), limits_.min_rank_bytes, limits_.max_rank_bytes);
  if (static_cast<int64_t>(s.text.size()) > bound) {
    // Cut at a line's start where one is near, so a reader's first line is whole.
    size_t cut = s.text.size() - static_cast<size_t>(bound);
    const size_t newline = s.text.find('\n', cut);
    if (newline != std::string::npos && newline + 1 - cut < 4096) cut = newline + 1;
    s.text.erase(0, cut);
    s.start += static_cast<int64_t>(cut);
  }
  total_ += static_cast<int64_t>(s.text.size()) - static_cast<int64_t>(before);
  TrimTotalLocked(job);
}

void RankLogs::TrimTotalLocked(int64_t keep_job) {
  while (total_ > limits_.total_bytes && !jobs_.empty() && jobs_.begin()->first != keep_job) {
    for (const auto& [rank, s] : jobs_.begin()->second) total_ -= static_cast<int64_t>(s.text.size());
    jobs_.erase(jobs_.begin());
  }
}

RankLogs::Slice RankLogs::Read(int64_t job, int rank, int64_t after_offset, int tail_lines) const {
  absl::MutexLock lock(&mu_);
  Slice out;
  auto j = jobs_.find(job);
  if (j == jobs_.end()) return out;
  auto r = j->second.find(rank);
  if (r == j->second.end()) return out;
  const Stream& s = r->second;
  const int64_t end = s.start + static_cast<int64_t>(s.text.size());
  int64_t from = after_offset > end ? 0 : std::max<int64_t>(after_offset, 0);
  if (from < s.start) {
    out.dropped_bytes = s.start - from;
    from = s.start;
  }
  std::string_view text(s.text);
  text.remove_prefix(static_cast<size_t>(from - s.start));
  if (tail_lines > 0) {
    // The last `tail_lines` lines (a last line without its newline counts).
    size_t pos = text.size();
    if (pos > 0 && text[pos - 1] == '\n') --pos;
    size_t begin = 0;
    for (int n = 0; n < tail_lines && pos > 0; ++n) {
      const size_t newline = text.rfind('\n', pos - 1);
      if (newline == std::string_view::npos) break;
      if (n + 1 == tail_lines) begin = newline + 1;
      pos = newline;
    }
    if (begin > 0) {
      from += static_cast<int64_t>(begin);
      text.remove_prefix(begin);
      out.dropped_bytes = 0;  // left out by asking for the tail, not lost
    }
  }
  out.text = std::string(text);
  out.start_offset = from;
  out.next_offset = end;
  return out;
}

void RankLogs::Forget(int64_t job) {
  absl::MutexLock lock(&mu_);
  auto j = jobs_.find(job);
  if (j == jobs_.end()) return;
  for (const auto& [rank, s] : j->second) total_ -= static_cast<int64_t>(s.text.size());
  jobs_.erase(j);
}

int64_t RankLogs::total_bytes() const {
  absl::MutexLock lock(&mu_);
  return total_;
}

}  // namespace mapd

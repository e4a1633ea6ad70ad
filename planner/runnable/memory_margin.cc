#include "planner/runnable/memory_margin.h"

#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "absl/strings/str_format.h"
#include "common/file_io.h"
#include "common/file_lock.h"

namespace mapd {

namespace {

constexpr const char* kRecordFile = "/memory-record.json";

// The record's pairs; empty when it is missing or does not parse.
std::vector<std::pair<int64_t, int64_t>> ReadRecord(const std::string& dir) {
  std::vector<std::pair<int64_t, int64_t>> out;
  auto text = ReadFileToString(dir + kRecordFile);
  if (!text.ok()) return out;
  const nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("peaks") || !j["peaks"].is_array()) return out;
  for (const auto& p : j["peaks"]) {
    if (!p.is_array() || p.size() != 2 || !p[0].is_number_integer() || !p[1].is_number_integer()) continue;
    const int64_t predicted = p[0].get<int64_t>(), measured = p[1].get<int64_t>();
    if (predicted > 0 && measured > 0) out.emplace_back(predicted, measured);
  }
  return out;
}

}  // namespace

std::string MemoryMargin::Describe() const {
  if (recorded == 0) return absl::StrFormat("%.1f%% (the default: no rank peaks recorded on this host)", 100 * fraction);
  if (worst_shortfall <= 0) {
    return absl::StrFormat("%.1f%% (no measured peak over its prediction among %d rank peaks recorded on this host)", 100 * fraction, recorded);
  }
  return absl::StrFormat("%.1f%% (the largest shortfall of a prediction, %.2f%%, among %d rank peaks recorded on this host)", 100 * fraction,
                         100 * worst_shortfall, recorded);
}

MemoryMargin ReadMemoryMargin(const std::string& dir) {
  MemoryMargin m;
  if (dir.empty()) return m;
  const auto record = ReadRecord(dir);
  m.recorded = static_cast<int>(record.size());
  m.worst_shortfall = record.empty() ? 0 : -1;
  for (const auto& [predicted, measured] : record) {
    m.worst_shortfall = std::max(m.worst_shortfall, static_cast<double>(measured) / static_cast<double>(predicted) - 1);
  }
  m.fraction = std::clamp(m.worst_shortfall, kDefaultMemoryMargin, kMaxMemoryMargin);
  return m;
}

absl::Status RecordMemoryPeaks(const std::string& dir, const std::vector<std::pair<int64_t, int64_t>>& predicted_measured) {
  if (dir.empty()) return absl::OkStatus();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  auto lock = FileLock::Acquire(dir + "/memory-record.lock", "the memory record's lock");
  if (!lock.ok()) return lock.status();
  auto record = ReadRecord(dir);
  for (const auto& [predicted, measured] : predicted_measured) {
    if (predicted > 0 && measured > 0) record.emplace_back(predicted, measured);
  }
  if (record.size() > static_cast<size_t>(kMemoryRecordRuns)) record.erase(record.begin(), record.end() - kMemoryRecordRuns);
  nlohmann::json peaks = nlohmann::json::array();
  for (const auto& [predicted, measured] : record) peaks.push_back({predicted, measured});
  return WriteStringToFileAtomic(dir + kRecordFile, nlohmann::json{{"peaks", peaks}}.dump() + "\n");
}

}  // namespace mapd

#include "server/api/event_log.h"

#include <chrono>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace mapd {

namespace {

bool NeedsQuotes(const std::string& v) {
  if (v.empty()) return true;
  for (unsigned char c : v) {
    if (c <= ' ' || c == '"' || c == '=' || c == '\\' || c == 127) return true;
  }
  return false;
}

std::string Quoted(const std::string& v) {
  std::string out = "\"";
  for (char c : v) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default: out += static_cast<unsigned char>(c) < ' ' ? ' ' : c;
    }
  }
  return out + "\"";
}

}  // namespace

std::string LogfmtLine(double unix_seconds, const std::string& kind, const LogFields& fields) {
  const absl::Time t = absl::FromUnixMicros(static_cast<int64_t>(unix_seconds * 1e6));
  std::string line = absl::StrCat("time=", absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", t, absl::UTCTimeZone()), " kind=", kind);
  for (const auto& [key, value] : fields) absl::StrAppend(&line, " ", key, "=", NeedsQuotes(value) ? Quoted(value) : value);
  return line;
}

void LogLine(const std::string& kind, const LogFields& fields) {
  static absl::Mutex mu(absl::kConstInit);
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const std::string line = LogfmtLine(now, kind, fields) + "\n";
  absl::MutexLock lock(&mu);
  std::cerr << line << std::flush;
}

void LogJobEvent(const v1::Job& job, const v1::JobEvent& event) {
  LogLine("job", {{"job", absl::StrCat(job.id())},
                  {"seq", absl::StrCat(event.seq())},
                  {"state", v1::JobState_Name(job.state())},
                  {"attempt", absl::StrCat(job.attempt())},
                  {"message", event.message()}});
}

}  // namespace mapd

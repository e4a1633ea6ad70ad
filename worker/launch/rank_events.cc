#include "worker/launch/rank_events.h"

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace mapd {

namespace {

void AppendVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

// The varint at the start of `s`: its value and length in bytes; length 0 while incomplete,
// -1 when longer than any length we accept could be.
int ReadVarint(const std::string& s, uint64_t* value) {
  *value = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i >= 4) return -1;  // 4 varint bytes hold 2^28 > kMaxRankEventBytes
    *value |= static_cast<uint64_t>(static_cast<unsigned char>(s[i]) & 0x7f) << (7 * i);
    if (!(static_cast<unsigned char>(s[i]) & 0x80)) return static_cast<int>(i + 1);
  }
  return 0;
}

}  // namespace

std::string FrameRankEvent(const v1::RankEvent& event) {
  const std::string body = event.SerializeAsString();
  std::string framed(1, kRankEventMarker);
  AppendVarint(body.size(), &framed);
  framed += body;
  return framed;
}

absl::Status WriteRankEvent(int fd, const v1::RankEvent& event) {
  const std::string framed = FrameRankEvent(event);
  size_t done = 0;
  while (done < framed.size()) {
    const ssize_t n = write(fd, framed.data() + done, framed.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::InternalError(absl::StrCat("cannot report to the launcher: ", std::strerror(errno)));
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status RankEventReader::Feed(const char* data, size_t size, std::vector<v1::RankEvent>* events) {
  if (broken_) return absl::DataLossError("the rank's event stream is already broken");
  buffer_.append(data, size);
  size_t start = 0;
  for (;;) {
    if (start == buffer_.size()) break;
    if (buffer_[start] != kRankEventMarker) {
      broken_ = true;
      return absl::DataLossError(absl::StrCat("the rank's output is not a stream of events (it begins '",
                                              absl::CHexEscape(buffer_.substr(start, 24)), "'): did something else write to its stdout?"));
    }
    uint64_t length = 0;
    const int varint = ReadVarint(buffer_.substr(start + 1, 4), &length);
    if (varint == 0) break;
    const int header = varint < 0 ? varint : 1 + varint;
    if (header < 0 || length > kMaxRankEventBytes) {
      broken_ = true;
      return absl::DataLossError(absl::StrCat("the rank's output is not a stream of events (a length of ",
                                              header < 0 ? "over 2^28" : std::to_string(length), " bytes; at most ",
                                              kMaxRankEventBytes, "): did something else write to its stdout?"));
    }
    if (buffer_.size() - start - header < length) break;
    v1::RankEvent event;
    if (!event.ParseFromArray(buffer_.data() + start + header, static_cast<int>(length))) {
      broken_ = true;
      return absl::DataLossError("an event of the rank's does not parse: did something else write to its stdout?");
    }
    events->push_back(std::move(event));
    start += header + length;
  }
  buffer_.erase(0, start);
  return absl::OkStatus();
}

}  // namespace mapd

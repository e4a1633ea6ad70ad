// The channel a rank reports on (proto/mapd/v1/rank_job.proto): RankEvents on the rank's stdout,
// each a marker byte, a varint length and the serialized message (protobuf's length-delimited
// framing behind a marker, so that text written to the channel by mistake is refused at its first
// byte rather than read as a length). The one writer (the rank) and the one reader (the
// launcher). No LibTorch.
#ifndef MAPD_WORKER_LAUNCH_RANK_EVENTS_H_
#define MAPD_WORKER_LAUNCH_RANK_EVENTS_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "proto/mapd/v1/rank_job.pb.h"

namespace mapd {

// An event larger than this is refused by the reader (a corrupt or foreign stream).
inline constexpr size_t kMaxRankEventBytes = 1 << 20;
// The byte before each event: not ASCII, not the first byte of any UTF-8 character.
inline constexpr char kRankEventMarker = '\xa7';

// A rank's progress lines on stderr (its log: "[rank 1] step 3/40 loss ...") begin with this;
// the launcher leaves them out of a failed rank's last words, which are its error.
constexpr char kRankProgressPrefix[] = "[rank ";

// Frames `event` for the channel.
std::string FrameRankEvent(const v1::RankEvent& event);

// Writes one framed event to `fd` (all of it, retrying short writes); INTERNAL naming errno.
absl::Status WriteRankEvent(int fd, const v1::RankEvent& event);

// Reassembles events from the bytes of one rank's channel as they arrive, in any pieces.
class RankEventReader {
 public:
  // Appends the events `data` completes to `events`. DATA_LOSS (and nothing more is read) when
  // the stream is not RankEvents: a missing marker, a length over kMaxRankEventBytes, a malformed
  // length, or a message that does not parse.
  absl::Status Feed(const char* data, size_t size, std::vector<v1::RankEvent>* events);
  // Bytes of an event not yet complete (at the end of a stream: it was cut off).
  size_t pending_bytes() const { return buffer_.size(); }

 private:
  std::string buffer_;
  bool broken_ = false;
};

}  // namespace mapd

#endif  // MAPD_WORKER_LAUNCH_RANK_EVENTS_H_

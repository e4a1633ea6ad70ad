// mapd's log: one structured line (logfmt: key=value, values with spaces quoted) for each thing
// an operator reconstructs an incident from — a job's submission, placement, failure, resume,
// cancel, refused report and every state change (the job's own events, as `mapctl logs` shows
// them, less the per-step progress), a worker's registration and loss. Written to stderr, where
// systemd, Kubernetes and `mapd 2>>file` collect it:
//   time=2026-12-07T14:52:01.123Z kind=job job=3 seq=4 state=RUNNING attempt=0 message="placed on w-1 (rank 0-1)"
//   time=... kind=worker_lost worker=w-2 message="no heartbeat for 5 s"
#ifndef MAPD_SERVER_API_EVENT_LOG_H_
#define MAPD_SERVER_API_EVENT_LOG_H_

#include <string>
#include <utility>
#include <vector>

#include "proto/mapd/v1/jobs.pb.h"

namespace mapd {

using LogFields = std::vector<std::pair<std::string, std::string>>;

// One logfmt line (no newline): time=<UTC, ms> kind=<kind>, then `fields` in order; a value with
// a space, quote, '=' or control character is quoted, with \", \\, \n and \t escaped.
std::string LogfmtLine(double unix_seconds, const std::string& kind, const LogFields& fields);

// Writes LogfmtLine(now, kind, fields) and a newline to stderr, whole (lines from several
// threads never interleave).
void LogLine(const std::string& kind, const LogFields& fields);

// A job's event as a line of kind "job".
void LogJobEvent(const v1::Job& job, const v1::JobEvent& event);

}  // namespace mapd

#endif  // MAPD_SERVER_API_EVENT_LOG_H_

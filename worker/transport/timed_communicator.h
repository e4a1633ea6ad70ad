// A Communicator that times the one it wraps: seconds spent, bytes sent (the input tensor's) and
// calls per kind of collective, for the per-step report and the worker's metrics (DESIGN §10). Ranks
// share one CollectiveStats across their groups' communicators (one thread uses them).
#ifndef MAPD_WORKER_TRANSPORT_TIMED_COMMUNICATOR_H_
#define MAPD_WORKER_TRANSPORT_TIMED_COMMUNICATOR_H_

#include <map>
#include <memory>
#include <string>

#include "worker/transport/communicator.h"

namespace mapd {

struct CollectiveTotals {
  double seconds = 0;
  double bytes = 0;
  int64_t calls = 0;  // collectives started
};
// By kind: "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "barrier", "send", "recv".
using CollectiveStats = std::map<std::string, CollectiveTotals>;

// `stats` must outlive the communicator and what it starts; the caller may clear it between
// steps (a wait is counted in the stats as they are when it ends).
std::unique_ptr<Communicator> TimeCollectives(std::unique_ptr<Communicator> inner, CollectiveStats* stats);

}  // namespace mapd

#endif  // MAPD_WORKER_TRANSPORT_TIMED_COMMUNICATOR_H_

// Watch streams without a thread each: a job's events pushed by a gRPC callback reactor.
//
// A sync Watch held a server thread for as long as its client kept the stream open, so a few
// hundred idle watchers took every thread and List, Get and the workers' heartbeats were refused.
// A WatchStream holds no thread while it waits: every kPollInterval an alarm looks for new
// events (an in-memory check of the job's last sequence number, the store read only when there
// are some), and writes them one at a time; the stream ends after the event that finishes the
// job, when the client goes away, or when the server shuts down (within one interval).
//
// WatchLimits caps the open streams — in all, and per client host (the peer's address without
// its port) — so one client cannot take every slot; a stream over either cap is
// RESOURCE_EXHAUSTED saying which and what to do.
#ifndef MAPD_SERVER_API_WATCH_STREAM_H_
#define MAPD_SERVER_API_WATCH_STREAM_H_

#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>

#include <deque>
#include <map>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/mapd/v1/jobs.pb.h"
#include "server/jobs/job_manager.h"

namespace mapd {

class WatchLimits {
 public:
  // `max_streams` open at once in all, `max_per_client` from one client host (both >= 1).
  WatchLimits(int max_streams, int max_per_client) : max_streams_(max_streams), max_per_client_(max_per_client) {}

  // A held place among the open streams, given back when destroyed.
  class Slot {
   public:
    Slot(WatchLimits* limits, std::string client) : limits_(limits), client_(std::move(client)) {}
    ~Slot() { limits_->Release(client_); }
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;

   private:
    WatchLimits* limits_;
    std::string client_;
  };

  // A slot for a stream from `peer` (gRPC's "ipv4:10.0.0.7:51234"), or RESOURCE_EXHAUSTED.
  absl::StatusOr<std::unique_ptr<Slot>> Acquire(const std::string& peer);

  int open() const;

  // The client host of a gRPC peer string: "ipv4:10.0.0.7:51234" -> "10.0.0.7", "ipv6:[::1]:5" -> "[::1]".
  static std::string ClientOf(const std::string& peer);

 private:
  void Release(const std::string& client);

  const int max_streams_, max_per_client_;
  mutable absl::Mutex mu_;
  int open_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, int> per_client_ ABSL_GUARDED_BY(mu_);
};

// One Watch call's reactor; it deletes itself when gRPC is done with the call.
class WatchStream final : public grpc::ServerWriteReactor<v1::JobEvent> {
 public:
  static constexpr absl::Duration kPollInterval = absl::Milliseconds(200);

  // Starts streaming job `id`'s events after `after_seq`. `jobs` outlives the server's calls.
  WatchStream(const JobManager* jobs, int64_t id, int64_t after_seq, std::unique_ptr<WatchLimits::Slot> slot);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override { delete this; }

 private:
  // Looks for events; writes the next one, ends the stream, or waits one interval.
  void Poll();
  void WriteNextOrWait();
  void End(const grpc::Status& status);

  const JobManager* jobs_;
  const int64_t id_;
  int64_t after_seq_;
  std::unique_ptr<WatchLimits::Slot> slot_;
  std::deque<v1::JobEvent> pending_;  // read from the store, not yet written
  v1::JobEvent writing_;              // the event being written (gRPC reads it until OnWriteDone)
  std::unique_ptr<grpc::Alarm> alarm_;  // the next poll, while no write is in flight (one per wait)
  absl::Mutex mu_;                    // orders OnCancel against the poll/write chain
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool polled_ = false;               // the first poll is done (it alone asks whether the job is over)
  bool finished_ = false;             // the last event written finished the job
};

// A Watch call answered at once with `status` (unauthenticated, over a cap, no such job).
grpc::ServerWriteReactor<v1::JobEvent>* RefusedWatch(const grpc::Status& status);

}  // namespace mapd

#endif  // MAPD_SERVER_API_WATCH_STREAM_H_

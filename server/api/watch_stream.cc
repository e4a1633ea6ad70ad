#include "server/api/watch_stream.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/rpc/grpc_status.h"

namespace mapd {

std::string WatchLimits::ClientOf(const std::string& peer) {
  std::string address = peer;
  for (const char* scheme : {"ipv4:", "ipv6:"}) {
    if (address.rfind(scheme, 0) == 0) {
      address = address.substr(5);
      const size_t colon = address.rfind(':');
      if (colon != std::string::npos) address.resize(colon);
    }
  }
  return address;  // another transport (unix:PATH): the whole peer
}

absl::StatusOr<std::unique_ptr<WatchLimits::Slot>> WatchLimits::Acquire(const std::string& peer) {
  std::string client = ClientOf(peer);
  absl::MutexLock lock(&mu_);
  if (open_ >= max_streams_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        max_streams_, " watch streams are open, the most this coordinator serves (mapd --max-watch-streams); try "
                      "again later, or poll with `mapctl get`"));
  }
  int& mine = per_client_[client];
  if (mine >= max_per_client_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        mine, " watch streams are open from ", client, ", the most one client host may hold (mapd "
        "--max-watch-streams-per-client); close some, or poll with `mapctl get`"));
  }
  ++mine;
  ++open_;
  return std::make_unique<Slot>(this, std::move(client));
}

void WatchLimits::Release(const std::string& client) {
  absl::MutexLock lock(&mu_);
  --open_;
  auto it = per_client_.find(client);
  if (it != per_client_.end() && --it->second == 0) per_client_.erase(it);
}

int WatchLimits::open() const {
  absl::MutexLock lock(&mu_);
  return open_;
}

WatchStream::WatchStream(const JobManager* jobs, int64_t id, int64_t after_seq, std::unique_ptr<WatchLimits::Slot> slot)
    : jobs_(jobs), id_(id), after_seq_(after_seq), slot_(std::move(slot)) {
  Poll();
}

void WatchStream::OnCancel() {
  // The chain (a poll, its alarm, or a write) sees this at its next step: a write in flight
  // completes not ok at once, an alarm within one interval.
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
}

void WatchStream::OnWriteDone(bool ok) {
  if (!ok) return End(grpc::Status(grpc::StatusCode::CANCELLED, "the watcher went away"));
  WriteNextOrWait();
}

void WatchStream::Poll() {
  auto events = jobs_->WaitForEvents(id_, after_seq_, 0);  // in memory unless there are new events
  if (!events.ok()) return End(ToGrpcStatus(events.status()));
  pending_.insert(pending_.end(), events->begin(), events->end());
  const bool first = !std::exchange(polled_, true);
  if (first && pending_.empty()) {
    auto job = jobs_->Get(id_);
    if (job.ok() && IsFinished(job->state())) return End(grpc::Status::OK);  // finished before the watch began
  }
  WriteNextOrWait();
}

void WatchStream::WriteNextOrWait() {
  {
    absl::MutexLock lock(&mu_);
    if (cancelled_) return End(grpc::Status(grpc::StatusCode::CANCELLED, "the watch was cancelled"));
  }
  if (finished_) return End(grpc::Status::OK);  // the event that finished the job was written
  if (!pending_.empty()) {
    writing_ = std::move(pending_.front());
    pending_.pop_front();
    after_seq_ = writing_.seq();
    finished_ = IsFinished(writing_.state());
    return StartWrite(&writing_);  // OnWriteDone continues the chain, maybe on another thread
  }
  alarm_ = std::make_unique<grpc::Alarm>();  // the previous one has fired (this may be its callback)
  alarm_->Set(absl::ToChronoTime(absl::Now() + kPollInterval), [this](bool) { Poll(); });
}

namespace {
class Refused final : public grpc::ServerWriteReactor<v1::JobEvent> {
 public:
  explicit Refused(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};
}  // namespace

grpc::ServerWriteReactor<v1::JobEvent>* RefusedWatch(const grpc::Status& status) { return new Refused(status); }

void WatchStream::End(const grpc::Status& status) {
  Finish(status);  // OnDone, and the deletion, may follow at once: nothing of this after it
}

}  // namespace mapd

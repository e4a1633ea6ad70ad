#include "server/api/job_service.h"

#include "absl/strings/str_cat.h"

namespace mapd {

grpc::Status JobServiceImpl::Submit(grpc::ServerContext* ctx, const v1::SubmitJobRequest* req, v1::Job* out) {
  if (auto st = auth_->Check(*ctx); !st.ok()) return st;
  return Reply(jobs_->Submit(req->spec()), out);
}

grpc::Status JobServiceImpl::Get(grpc::ServerContext* ctx, const v1::GetJobRequest* req, v1::Job* out) {
  if (auto st = auth_->Check(*ctx); !st.ok()) return st;
  return Reply(jobs_->Get(req->id()), out);
}

grpc::Status JobServiceImpl::List(grpc::ServerContext* ctx, const v1::ListJobsRequest*, v1::ListJobsResponse* out) {
  if (auto st = auth_->Check(*ctx); !st.ok()) return st;
  for (const v1::Job& job : jobs_->List()) *out->add_jobs() = job;
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::Events(grpc::ServerContext* ctx, const v1::JobEventsRequest* req, v1::JobEventsResponse* out) {
  if (auto st = auth_->Check(*ctx); !st.ok()) return st;
  auto events = jobs_->Events(req->id());
  if (!events.ok()) return ToGrpcStatus(events.status());
  for (const v1::JobEvent& e : *events) *out->add_events() = e;
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::Watch(grpc::ServerContext* ctx, const v1::WatchJobRequest* req,
                                   grpc::ServerWriter<v1::JobEvent>* out) {
  if (auto st = auth_->Check(*ctx); !st.ok()) return st;
  struct Slot {  // this stream's place among the open ones, given back however it ends
    std::atomic<int>& open;
    ~Slot() { --open; }
  } slot{watch_streams_};
  if (++watch_streams_ > max_watch_streams_) {
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        absl::StrCat(max_watch_streams_, " watch streams are open, the most this coordinator serves (mapd "
                                                         "--max-watch-streams); try again later, or poll with `mapctl get`"));
  }
  int64_t after = req->after_seq();
  // Events as they come, in short waits so a client that goes away or a server shutting down
  // ends the stream promptly; the stream ends after the event that finishes the job.
  while (!ctx->IsCancelled()) {
    auto events = jobs_->WaitForEvents(req->id(), after, 0.5);
    if (!events.ok()) return ToGrpcStatus(events.status());
    for (const v1::JobEvent& e : *events) {
      if (!out->Write(e)) return grpc::Status(grpc::StatusCode::CANCELLED, "the watcher went away");
      after = e.seq();
      if (IsFinished(e.state())) return grpc::Status::OK;
    }
    if (events->empty()) {
      auto job = jobs_->Get(req->id());
      if (job.ok() && IsFinished(job->state())) return grpc::Status::OK;  // finished before the watch began
    }
  }
  return grpc::Status(grpc::StatusCode::CANCELLED, "the watch was cancelled");
}

grpc::Status JobServiceImpl::Cancel(grpc::ServerContext* ctx, const v1::CancelJobRequest* req, v1::Job* out) {
  if (auto st = auth_->Check(*ctx); !st.ok()) return st;
  return Reply(jobs_->Cancel(req->id()), out);
}

}  // namespace mapd

#include "server/api/job_service.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace mapd {

grpc::Status JobServiceImpl::Submit(grpc::ServerContext* ctx, const v1::SubmitJobRequest* req, v1::Job* out) {
  if (auto st = auth_->Check(*ctx); !st.ok()) return st;
  auto ticket = plans_->Enter(absl::FromChrono(ctx->deadline()));
  if (!ticket.ok()) return ToGrpcStatus(ticket.status());
  return Reply(jobs_->Submit(req->spec()), out);
}

grpc::Status JobServiceImpl::Get(grpc::ServerContext* ctx, const v1::GetJobRequest* req, v1::Job* out) {
  if (auto st = auth_->Check(*ctx); !st.ok()) return st;
  return Reply(jobs_->Get(req->id()), out);
}

grpc::Status JobServiceImpl::List(grpc::ServerContext* ctx, const v1::ListJobsRequest* req, v1::ListJobsResponse* out) {
  if (auto st = auth_->Check(*ctx); !st.ok()) return st;
  constexpr int kDefaultPage = 100, kMaxPage = 1000;
  if (req->page_size() < 0 || req->page_size() > kMaxPage) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("page_size ", req->page_size(), ": give 1..", kMaxPage, " (0 for ", kDefaultPage, ")"));
  }
  int64_t after_id = 0;
  if (!req->page_token().empty() && (!absl::SimpleAtoi(req->page_token(), &after_id) || after_id < 0)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "page_token: give the next_page_token of the previous page, or none for the first");
  }
  JobManager::Page page = jobs_->ListPage(after_id, req->page_size() == 0 ? kDefaultPage : req->page_size());
  for (v1::Job& job : page.jobs) *out->add_jobs() = std::move(job);
  if (page.more) out->set_next_page_token(std::to_string(out->jobs(out->jobs_size() - 1).id()));
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::Events(grpc::ServerContext* ctx, const v1::JobEventsRequest* req, v1::JobEventsResponse* out) {
  if (auto st = auth_->Check(*ctx); !st.ok()) return st;
  auto events = jobs_->Events(req->id());
  if (!events.ok()) return ToGrpcStatus(events.status());
  for (const v1::JobEvent& e : *events) *out->add_events() = e;
  return grpc::Status::OK;
}

grpc::ServerWriteReactor<v1::JobEvent>* JobServiceImpl::Watch(grpc::CallbackServerContext* ctx,
                                                              const v1::WatchJobRequest* req) {
  if (auto st = auth_->Check(*ctx); !st.ok()) return RefusedWatch(st);
  auto slot = watch_limits_.Acquire(ctx->peer());
  if (!slot.ok()) return RefusedWatch(ToGrpcStatus(slot.status()));
  return new WatchStream(jobs_, req->id(), req->after_seq(), *std::move(slot));
}

grpc::Status JobServiceImpl::Cancel(grpc::ServerContext* ctx, const v1::CancelJobRequest* req, v1::Job* out) {
  if (auto st = auth_->Check(*ctx); !st.ok()) return st;
  return Reply(jobs_->Cancel(req->id()), out);
}

grpc::Status JobServiceImpl::Delete(grpc::ServerContext* ctx, const v1::DeleteJobRequest* req, v1::DeleteJobResponse* out) {
  if (auto st = auth_->Check(*ctx); !st.ok()) return st;
  return ToGrpcStatus(jobs_->Delete(req->id()));
}

grpc::Status JobServiceImpl::Logs(grpc::ServerContext* ctx, const v1::JobLogsRequest* req, v1::JobLogsResponse* out) {
  if (auto st = auth_->Check(*ctx); !st.ok()) return st;
  return Reply(jobs_->RankOutput(*req), out);
}

}  // namespace mapd

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/store/job_store.h"

namespace mapd {

namespace {

class MemoryJobStore : public JobStore {
 public:
  absl::Status Write(const v1::Job& job, const v1::JobEvent& event) override {
    auto& events = events_[event.job_id()];
    if (events.count(event.seq())) {
      return absl::AlreadyExistsError(absl::StrCat("job ", event.job_id(), " already has event ", event.seq()));
    }
    jobs_[job.id()] = job;
    events[event.seq()] = event;
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<v1::Job>> LoadJobs() const override {
    std::vector<v1::Job> out;
    for (const auto& [id, job] : jobs_) out.push_back(job);
    return out;
  }
  absl::StatusOr<std::vector<v1::JobEvent>> LoadEvents(int64_t job_id, int64_t after_seq) const override {
    std::vector<v1::JobEvent> out;
    auto it = events_.find(job_id);
    if (it == events_.end()) return out;
    for (auto e = it->second.upper_bound(after_seq); e != it->second.end(); ++e) out.push_back(e->second);
    return out;
  }
  absl::Status Delete(int64_t job_id) override {
    jobs_.erase(job_id);
    events_.erase(job_id);
    max_deleted_ = std::max(max_deleted_, job_id);
    return absl::OkStatus();
  }
  absl::StatusOr<int64_t> MaxDeletedId() const override { return max_deleted_; }

 private:
  int64_t max_deleted_ = 0;
  std::map<int64_t, v1::Job> jobs_;
  std::map<int64_t, std::map<int64_t, v1::JobEvent>> events_;
};

}  // namespace

std::unique_ptr<JobStore> NewMemoryJobStore() { return std::make_unique<MemoryJobStore>(); }

}  // namespace mapd

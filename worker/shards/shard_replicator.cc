#include "worker/shards/shard_replicator.h"

#include <filesystem>
#include <iostream>
#include <utility>

#include "absl/time/time.h"

namespace mapd {

ShardReplicator::ShardReplicator(ShardStore* store, std::string peer, ShardKey key, std::vector<std::string> files)
    : store_(store), peer_(std::move(peer)), key_(std::move(key)), files_(std::move(files)) {
  thread_ = std::thread([this] { Loop(); });
}

ShardReplicator::~ShardReplicator() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  cancel_.Cancel();
  thread_.join();
}

void ShardReplicator::Committed(int64_t step) {
  absl::MutexLock lock(&mu_);
  wanted_ = std::max(wanted_, step);
}

void ShardReplicator::Drain(double timeout_seconds) {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || (wanted_ == 0 && !busy_); };
  mu_.AwaitWithTimeout(absl::Condition(&idle), absl::Seconds(timeout_seconds));
}

double ShardReplicator::PushTimeoutSeconds(int64_t step) const {
  std::error_code ec;
  double bytes = 0;
  for (const std::string& f : files_) {
    const auto size = std::filesystem::file_size(store_->StepDir(key_.job_id, step) + "/" + f, ec);
    if (!ec) bytes += static_cast<double>(size);
  }
  return 60 + bytes / (16.0 * (1 << 20));
}

void ShardReplicator::Loop() {
  for (;;) {
    int64_t step = 0;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || wanted_ > 0; };
      mu_.Await(absl::Condition(&ready));
      if (stop_) return;
      step = std::exchange(wanted_, 0);
      busy_ = true;
    }
    ShardKey key = key_;
    key.step = step;
    const absl::Status st = PushShards(peer_, key, store_->StepDir(key.job_id, step), files_, PushTimeoutSeconds(step), &cancel_);
    if (st.ok()) {
      replicated_ = std::max(replicated_.load(), step);
    } else if (st.code() != absl::StatusCode::kCancelled) {  // (cancelled: the job's runner ended)
      std::cerr << "mapd-worker: job " << key.job_id << ": checkpoint step " << step << " not kept by peer " << peer_ << ": " << st.message()
                << " (the job resumes from an earlier step if this worker is lost)\n";
    }
    absl::MutexLock lock(&mu_);
    busy_ = false;
  }
}

}  // namespace mapd

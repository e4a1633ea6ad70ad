#include <map>
#include <string>

#include "absl/synchronization/mutex.h"
#include "server/dispatch/rendezvous.h"
#include "worker/dist/gloo_communicator.h"

namespace mapd {

namespace {

class TcpStoreRendezvous : public RendezvousHost {
 public:
  explicit TcpStoreRendezvous(std::string bind_host) : bind_host_(std::move(bind_host)) {}

  absl::StatusOr<int> Open(int64_t job_id) override {
    auto server = StoreServer::Start(bind_host_, 0);
    if (!server.ok()) return server.status();
    const int port = (*server)->port();
    absl::MutexLock lock(&mu_);
    stores_[job_id] = *std::move(server);
    return port;
  }

  void Close(int64_t job_id) override {
    std::unique_ptr<StoreServer> gone;
    {
      absl::MutexLock lock(&mu_);
      auto it = stores_.find(job_id);
      if (it == stores_.end()) return;
      gone = std::move(it->second);
      stores_.erase(it);
    }
  }

 private:
  std::string bind_host_;
  absl::Mutex mu_;
  std::map<int64_t, std::unique_ptr<StoreServer>> stores_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<RendezvousHost> NewTcpStoreRendezvous(const std::string& bind_host) {
  return std::make_unique<TcpStoreRendezvous>(bind_host);
}

}  // namespace mapd

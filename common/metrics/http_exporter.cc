#include "common/metrics/http_exporter.h"

#include <httplib.h>
#include <sys/socket.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace mapd {

absl::StatusOr<std::unique_ptr<MetricsExporter>> MetricsExporter::Start(const std::string& listen, MetricsRegistry* registry,
                                                                        std::function<void()> collect) {
  const size_t colon = listen.rfind(':');
  int port = -1;
  if (colon == std::string::npos || !absl::SimpleAtoi(listen.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("--metrics-listen '", listen, "': give host:port (port 0 picks a free one)"));
  }
  const std::string host = listen.substr(0, colon);
  std::unique_ptr<MetricsExporter> e(new MetricsExporter());
  e->server_ = std::make_unique<httplib::Server>();
  e->server_->Get("/metrics", [registry, collect](const httplib::Request&, httplib::Response& res) {
    if (collect) collect();
    res.set_content(registry->Encode(), "text/plain; version=0.0.4; charset=utf-8");
  });
  // The port is this process's alone: httplib's default options add SO_REUSEPORT, under which a
  // second exporter binds the same port and the kernel splits the scrapes between the two.
  e->server_->set_socket_options([](auto sock) {
    const int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);  // (a port in TIME_WAIT is free)
  });
  e->port_ = port == 0 ? e->server_->bind_to_any_port(host) : (e->server_->bind_to_port(host, port) ? port : -1);
  if (e->port_ <= 0) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", listen, ": port ", port,
                                               " is taken (another process serves there) or ", host,
                                               " is not an address of this machine; give another --metrics-listen (port 0: any free one)"));
  }
  httplib::Server* raw = e->server_.get();
  e->thread_ = std::thread([raw] { raw->listen_after_bind(); });
  return e;
}

MetricsExporter::~MetricsExporter() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace mapd

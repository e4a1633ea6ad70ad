// The rendezvous store's gate (store_gate.h): a connection through a tunnel that presents the
// job's secret reaches the store; one without it — wrong secret, raw bytes, silence — is refused
// and never reaches it.
#include "worker/transport/store_gate.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>

namespace mapd {
namespace {

// A stand-in for the store on 127.0.0.1: echoes each connection's bytes, and counts connections.
class EchoServer {
 public:
  EchoServer() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(listen(fd_, 16), 0);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] {
      while (!stop_) {
        pollfd p{fd_, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0) continue;
        const int c = accept(fd_, nullptr, nullptr);
        if (c < 0) continue;
        ++connections_;
        char buf[256];
        ssize_t r;
        while ((r = recv(c, buf, sizeof buf, 0)) > 0) send(c, buf, static_cast<size_t>(r), MSG_NOSIGNAL);
        close(c);
      }
    });
  }
  ~EchoServer() {
    stop_ = true;
    thread_.join();
    close(fd_);
  }
  int port() const { return port_; }
  int connections() const { return connections_.load(); }

 private:
  int fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::thread thread_;
};

int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

// Sends `out`, then reads until `n` bytes or the connection ends.
std::string Exchange(int fd, const std::string& out, size_t n) {
  send(fd, out.data(), out.size(), MSG_NOSIGNAL);
  std::string in;
  char buf[256];
  while (in.size() < n) {
    const ssize_t r = recv(fd, buf, sizeof buf, 0);
    if (r <= 0) break;
    in.append(buf, static_cast<size_t>(r));
  }
  return in;
}

TEST(StoreGate, OnlyAConnectionWithTheJobsSecretReachesTheStore) {
  EchoServer store;
  auto secret = NewStoreSecret();
  ASSERT_TRUE(secret.ok()) << secret.status();
  ASSERT_TRUE(CheckStoreSecret(*secret).ok());
  EXPECT_NE(*secret, *NewStoreSecret());
  StoreGateLimits limits;
  limits.handshake_timeout = std::chrono::milliseconds(300);
  auto gate = StoreGate::Start("127.0.0.1", store.port(), *secret, limits);
  ASSERT_TRUE(gate.ok()) << gate.status();

  // A peer's client, through its tunnel with the secret: the store answers.
  auto tunnel = StoreTunnel::Start("127.0.0.1", (*gate)->port(), *secret);
  ASSERT_TRUE(tunnel.ok()) << tunnel.status();
  const int through = Connect((*tunnel)->port());
  EXPECT_EQ(Exchange(through, "set key value", 13), "set key value");

  // A raw client speaking the store's protocol to the gate: refused, never reaching the store.
  const int raw = Connect((*gate)->port());
  EXPECT_EQ(Exchange(raw, std::string(64, 'x'), 1), "N");
  // The right magic with a wrong secret, and a tunnel holding another job's secret.
  const int wrong = Connect((*gate)->port());
  EXPECT_EQ(Exchange(wrong, "MAPDSTR1" + std::string(kStoreSecretChars, '0'), 1), "N");
  auto other = StoreTunnel::Start("127.0.0.1", (*gate)->port(), *NewStoreSecret());
  ASSERT_TRUE(other.ok());
  const int stranger = Connect((*other)->port());
  EXPECT_EQ(Exchange(stranger, "get key", 7), "");  // closed
  // A connection that says nothing is closed after the handshake timeout.
  const int silent = Connect((*gate)->port());
  EXPECT_EQ(Exchange(silent, "", 1), "");
  EXPECT_EQ((*gate)->refused(), 4);
  EXPECT_EQ(store.connections(), 1);  // the tunnel's only
  for (int fd : {through, raw, wrong, stranger, silent}) close(fd);

  EXPECT_EQ(StoreGate::Start("127.0.0.1", store.port(), "not-a-secret").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mapd

#include "worker/transport/store_gate.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"

namespace mapd {

namespace {

constexpr char kMagic[] = "MAPDSTR1";  // 8 bytes, without the terminator
constexpr int kMagicBytes = 8;

// A listening socket on `host`:`port` (0: any free port); its port in `*bound`.
absl::StatusOr<int> Listen(const std::string& host, int port, int* bound) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0) {
    return absl::InvalidArgumentError(absl::StrCat("rendezvous gate: cannot resolve ", host, ": ", gai_strerror(rc)));
  }
  int fd = -1;
  std::string why = "no address";
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 128) != 0 || getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      why = strerror(errno);
      close(fd);
      fd = -1;
      continue;
    }
    *bound = ntohs(addr.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  }
  freeaddrinfo(found);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("rendezvous gate: cannot listen on ", host, ":", port, ": ", why));
  return fd;
}

// A connected socket to `host`:`port`, or -1.
int Dial(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return -1;
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd >= 0) {
    const int yes = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);  // the store's messages are small
  }
  return fd;
}

bool WriteAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    const ssize_t w = send(fd, data, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Reads exactly n bytes within the socket's receive timeout.
bool ReadAll(int fd, char* data, size_t n) {
  while (n > 0) {
    const ssize_t r = recv(fd, data, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    data += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

void SetReceiveTimeout(int fd, std::chrono::milliseconds t) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(t.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((t.count() % 1000) * 1000);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

// Copies bytes both ways between `a` and `b` until both directions have ended (a half-close is
// passed on) or either fails.
void Pump(int a, int b) {
  char buf[1 << 16];
  bool open[2] = {true, true};  // a -> b, b -> a
  while (open[0] || open[1]) {
    pollfd p[2] = {{a, static_cast<short>(open[0] ? POLLIN : 0), 0}, {b, static_cast<short>(open[1] ? POLLIN : 0), 0}};
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    for (int side = 0; side < 2; ++side) {
      if (!open[side] || (p[side].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const int from = side == 0 ? a : b, to = side == 0 ? b : a;
      const ssize_t r = recv(from, buf, sizeof buf, 0);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return;
      if (r == 0) {
        open[side] = false;
        shutdown(to, SHUT_WR);
        continue;
      }
      if (!WriteAll(to, buf, static_cast<size_t>(r))) return;
    }
  }
}

}  // namespace

// Connections accepted on a listening socket, each relayed on a thread of its own to the far side
// `open_far` opens for it (-1: turned away), at most `max_connections` at once; destroying it
// stops the accepting, shuts every socket down and joins the threads.
class RelayListener {
 public:
  using OpenFar = std::function<int(int client)>;
  static absl::StatusOr<std::unique_ptr<RelayListener>> Start(const std::string& host, OpenFar open_far, int max_connections) {
    std::unique_ptr<RelayListener> l(new RelayListener(std::move(open_far), max_connections));
    auto fd = Listen(host, 0, &l->port_);
    if (!fd.ok()) return fd.status();
    l->listen_fd_ = *fd;
    l->accept_thread_ = std::thread([raw = l.get()] { raw->AcceptLoop(); });
    return l;
  }
  ~RelayListener();
  int port() const { return port_; }
  int turned_away() const { return turned_away_.load(); }  // past max_connections

 private:
  RelayListener(OpenFar open_far, int max_connections) : open_far_(std::move(open_far)), max_connections_(max_connections) {}
  void AcceptLoop();
  void Relay(int client);  // on a thread of its own
  void Track(int fd);
  void Forget(int fd);

  OpenFar open_far_;
  const int max_connections_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> turned_away_{0};
  std::atomic<int> open_{0};  // connections not yet ended
  std::thread accept_thread_;
  std::mutex mu_;
  std::vector<std::thread> threads_;
  std::vector<int> sockets_;
  bool stopped_ = false;
};

void RelayListener::AcceptLoop() {
  while (!stop_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;  // (a tenth of a second: how soon a stop is seen)
    const int client = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    if (open_.load() >= max_connections_) {
      ++turned_away_;
      close(client);
      continue;
    }
    Track(client);
    ++open_;
    std::lock_guard<std::mutex> lock(mu_);
    threads_.emplace_back([this, client] { Relay(client); });
  }
}

void RelayListener::Relay(int client) {
  const int far = open_far_(client);
  if (far >= 0) {
    Track(far);
    Pump(client, far);
    Forget(far);
  }
  Forget(client);
  --open_;
}

void RelayListener::Track(int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  sockets_.push_back(fd);
  if (stopped_) shutdown(fd, SHUT_RDWR);
}

void RelayListener::Forget(int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  for (int& s : sockets_) {
    if (s == fd) s = -1;
  }
  close(fd);
}

RelayListener::~RelayListener() {
  stop_ = true;
  if (accept_thread_.joinable()) accept_thread_.join();
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
    for (int s : sockets_) {
      if (s >= 0) shutdown(s, SHUT_RDWR);  // wakes the thread's poll or handshake read
    }
    threads.swap(threads_);
  }
  for (std::thread& t : threads) t.join();
  if (listen_fd_ >= 0) close(listen_fd_);
}

absl::StatusOr<std::unique_ptr<StoreGate>> StoreGate::Start(const std::string& host, int store_port, const std::string& secret,
                                                            StoreGateLimits limits) {
  if (auto st = CheckStoreSecret(secret); !st.ok()) return st;
  std::unique_ptr<StoreGate> g(new StoreGate());
  g->store_port_ = store_port;
  g->secret_ = secret;
  g->limits_ = limits;
  auto listener = RelayListener::Start(host, [raw = g.get()](int client) { return raw->Handshake(client); }, limits.max_connections);
  if (!listener.ok()) return listener.status();
  g->listener_ = *std::move(listener);
  return g;
}

StoreGate::~StoreGate() = default;
int StoreGate::port() const { return listener_->port(); }
int StoreGate::refused() const { return refused_.load() + listener_->turned_away(); }

int StoreGate::Handshake(int client) {
  SetReceiveTimeout(client, limits_.handshake_timeout);
  char got[kMagicBytes + kStoreSecretChars];
  const bool read = ReadAll(client, got, sizeof got);
  if (!read || std::memcmp(got, kMagic, kMagicBytes) != 0 || !SameSecret(std::string(got + kMagicBytes, kStoreSecretChars), secret_)) {
    ++refused_;
    if (read) (void)WriteAll(client, "N", 1);
    return -1;
  }
  SetReceiveTimeout(client, std::chrono::milliseconds(0));  // through: the store's own timeouts apply
  const int store = Dial("127.0.0.1", store_port_);
  if (store < 0 || !WriteAll(client, "Y", 1)) {
    if (store >= 0) close(store);
    return -1;
  }
  return store;
}

absl::StatusOr<std::unique_ptr<StoreTunnel>> StoreTunnel::Start(const std::string& host, int port, const std::string& secret) {
  if (auto st = CheckStoreSecret(secret); !st.ok()) return st;
  std::unique_ptr<StoreTunnel> t(new StoreTunnel());
  t->host_ = host;
  t->gate_port_ = port;
  t->secret_ = secret;
  // (One client a rank: the limit only bounds a misbehaving one.)
  auto listener = RelayListener::Start("127.0.0.1", [raw = t.get()](int) { return raw->OpenGate(); }, StoreGateLimits().max_connections);
  if (!listener.ok()) return listener.status();
  t->listener_ = *std::move(listener);
  return t;
}

StoreTunnel::~StoreTunnel() = default;
int StoreTunnel::port() const { return listener_->port(); }

int StoreTunnel::OpenGate() {
  const int gate = Dial(host_, gate_port_);
  if (gate < 0) return -1;
  const std::string hello = std::string(kMagic, kMagicBytes) + secret_;
  char answer = 0;
  SetReceiveTimeout(gate, std::chrono::milliseconds(30000));
  if (!WriteAll(gate, hello.data(), hello.size()) || !ReadAll(gate, &answer, 1) || answer != 'Y') {
    close(gate);
    return -1;
  }
  SetReceiveTimeout(gate, std::chrono::milliseconds(0));
  return gate;
}

}  // namespace mapd

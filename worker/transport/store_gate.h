// The job's secret in front of its rendezvous store (docs/runtime.md "The rendezvous store's
// secret"). c10d's TCPStore takes any connection: anyone who reaches rank 0's port could read and
// write the keys a job's ranks meet by (and so join its process groups or stall them). Under a
// coordinator, each job's ranks get a secret with their assignment; rank 0's store then listens
// on loopback only, and the port its peers are told is a StoreGate's, which lets a connection
// through to the store only after it has presented the secret. A peer's TCPStore client connects
// to a StoreTunnel on its own loopback, which presents the secret for it — so the store and its
// clients stay LibTorch's, whatever its version, and the gate is a byte relay once a connection
// is through. The secret authenticates; it does not encrypt (as the coordinator's bearer tokens
// without TLS).
//
// Handshake, client to gate: the 8 bytes "MAPDSTR1", then the secret (kStoreSecretChars
// characters); the gate answers one byte, 'Y' (then relays both ways) or 'N' (then closes). A
// connection that has not sent it within the handshake timeout is closed.
#ifndef MAPD_WORKER_TRANSPORT_STORE_GATE_H_
#define MAPD_WORKER_TRANSPORT_STORE_GATE_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/store_secret.h"

namespace mapd {

struct StoreGateLimits {
  std::chrono::milliseconds handshake_timeout{5000};  // to send the handshake, once connected
  int max_connections = 1024;  // open at once, through or not (a job's ranks need ~2 each)
};

// A listening socket whose connections are relayed to a far side (store_gate.cc).
class RelayListener;

// Rank 0's side: listens on `host` (port 0: any free one) and lets a connection through to the
// store on 127.0.0.1:`store_port` once it has presented `secret`.
class StoreGate {
 public:
  static absl::StatusOr<std::unique_ptr<StoreGate>> Start(const std::string& host, int store_port, const std::string& secret,
                                                         StoreGateLimits limits = {});
  ~StoreGate();
  int port() const;
  int refused() const;  // connections turned away (wrong secret, silence, too many)

 private:
  StoreGate() = default;
  int Handshake(int client);  // the store's socket for a client that presented the secret; else -1

  int store_port_ = 0;
  std::string secret_;
  StoreGateLimits limits_;
  std::atomic<int> refused_{0};
  std::unique_ptr<RelayListener> listener_;  // last: stopped first, before what Handshake reads
};

// A peer's side: listens on 127.0.0.1 (any free port) for its own TCPStore client and carries
// each connection to the gate at `host`:`port`, presenting `secret` first. A connection the gate
// refuses is closed (the client's calls then fail).
class StoreTunnel {
 public:
  static absl::StatusOr<std::unique_ptr<StoreTunnel>> Start(const std::string& host, int port, const std::string& secret);
  ~StoreTunnel();
  int port() const;  // on 127.0.0.1

 private:
  StoreTunnel() = default;
  int OpenGate();  // a socket to the gate that took the secret; else -1

  std::string host_;
  int gate_port_ = 0;
  std::string secret_;
  std::unique_ptr<RelayListener> listener_;  // last: stopped first
};

}  // namespace mapd

#endif  // MAPD_WORKER_TRANSPORT_STORE_GATE_H_

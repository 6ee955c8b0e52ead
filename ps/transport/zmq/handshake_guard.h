// HandshakeGuard: checks every peer of one ZeroMQ transport at the ZeroMQ handshake, before the peer can
// send a single message frame. libzmq buffers every frame of an unfinished multi-part message with no
// high-water mark, so a check that runs on whole messages comes too late: a peer without the job's
// credentials must never get past the handshake.
//
// With a password (derived from the job's token) the listener speaks ZeroMQ's PLAIN mechanism, which
// costs nothing per byte, and this guard answers libzmq's ZAP requests (inproc://zeromq.zap.01 of the
// transport's context): a wrong password is refused (ZAP 400). With CurveZMQ the guard checks that the
// client's public key is the job's. Without either, every peer passes (an open job).
//
// It also watches the handshakes: a listener counts and logs (rate-limited) peers it refused, including
// those that spoke another mechanism (no token); a client records why a peer refused it, so that a node
// started with a wrong token says so instead of timing out. A client also sees its connection come
// back after a reset (a handshake that succeeds again after the first one) and says so through
// onClientReconnect, so the transport's owner can resend what was lost on the wire.
//
// Owned by the ZmqTransport and used by its I/O thread only, except refused() and clientFailure(),
// which any thread may call.
#pragma once

#include <zmq.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "ps/common/log_limiter.h"
#include "zps/status.h"

namespace zps {

struct HandshakeCredentials {
  std::string plain_password;       // non-empty: PLAIN mechanism with this password
  std::string curve_server_secret;  // non-empty: CURVE (wins over PLAIN)
  std::string curve_server_public;
  std::string curve_client_public;
  std::string curve_client_secret;
  std::string credential_name = "credentials";  // what users set, for messages ("ZPS_AUTH_TOKEN")
};

class HandshakeGuard {
 public:
  HandshakeGuard(void* ctx, std::string name, HandshakeCredentials credentials);
  ~HandshakeGuard() { closeSockets(); }
  HandshakeGuard(const HandshakeGuard&) = delete;
  HandshakeGuard& operator=(const HandshakeGuard&) = delete;

  // Before the listener binds: sets its mechanism and starts answering ZAP requests and watching its
  // handshakes.
  Status prepareListener(void* router);
  // Before a client socket connects: sets its mechanism and watches its handshakes as peer `peer`
  // (`endpoint` names it in log lines). `password`, when not empty, replaces the PLAIN password.
  void prepareClient(void* dealer, uint64_t peer, const std::string& endpoint, const std::string& password = "");
  // Stops watching a client socket (before it is closed).
  void forgetClient(uint64_t peer);
  // Called on the I/O thread when client `peer` finished a handshake again after losing its connection.
  void onClientReconnect(std::function<void(uint64_t)> handler) { on_reconnect_ = std::move(handler); }

  // The ZMQ_FD of each of the guard's sockets, for the I/O thread's wait (io_wait.h); call
  // handleReady() when any is readable. It reads every socket until none has a message left, which
  // takes in all their news, so the descriptors signal the next.
  const std::vector<int>& descriptors() const { return descriptors_; }
  void handleReady();

  // Closes the guard's sockets (before the transport's context ends); the getters still answer.
  void closeSockets();

  uint64_t refused() const { return refused_.load(); }
  // Why the peer refused our handshake ("" while none did).
  std::string clientFailure(uint64_t peer) const;

 private:
  void answerZap();
  void readListenerEvents();
  void readClientEvents(uint64_t peer, void* monitor);
  void refuse(const std::string& who, const std::string& why);
  // After the guard's sockets changed.
  void refreshDescriptors();
  void readNewSockets();

  void* ctx_;
  const std::string name_;
  const HandshakeCredentials credentials_;
  void* zap_ = nullptr;               // REP socket answering libzmq's ZAP requests
  void* listener_monitor_ = nullptr;  // PAIR receiving the listener's handshake events
  std::map<uint64_t, void*> client_monitors_;
  std::vector<int> descriptors_;
  std::map<uint64_t, int> unexplained_closes_;  // per client peer
  std::map<uint64_t, int> handshakes_;          // per client peer: successful handshakes so far
  std::map<uint64_t, std::string> endpoints_;   // per client peer
  std::function<void(uint64_t)> on_reconnect_;
  LogLimiter connection_log_;
  std::atomic<uint64_t> refused_{0};
  LogLimiter refusal_log_;
  mutable std::mutex failures_mu_;
  std::map<uint64_t, std::string> client_failures_;
};

}  // namespace zps

// Transport: moves messages (lists of frames) between this process and its peers and never parses them.
// Peers are named by a PeerId that the transport assigns: connect() returns one for an outgoing connection,
// and every incoming connection gets one on its first message. A PeerId is therefore the transport's word
// for who sent a message, never something read out of the message bytes.
//
// Threading: send() and recv() may be called from any thread; implementations run one I/O thread that
// owns the sockets (a caller waiting for its reply may receive on its connection itself: receiveOn). recv() reads from
// a bounded queue, so a slow consumer slows its peers (backpressure) instead of growing memory. Alternatively
// onMessage() has the I/O thread hand each message to a handler itself, which saves a thread hand-off per message (a
// wake-up on another core costs tens of microseconds, more than a small message's whole processing).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ps/common/blob.h"
#include "zps/status.h"

namespace zps {

using PeerId = uint64_t;

struct TransportMessage {
  PeerId peer = 0;
  std::vector<Blob> frames;
};

struct TransportOptions {
  // CurveZMQ (all 32-byte binary keys; empty = plain TCP). listen() uses the server secret key;
  // connect() uses the server's public key and the client key pair.
  std::string curve_server_secret;
  std::string curve_server_public;
  std::string curve_client_public;
  std::string curve_client_secret;
  // Non-empty (and no CurveZMQ): peers prove this password in ZeroMQ's PLAIN handshake, checked by the
  // listener before any message frame of theirs is read (see zmq/handshake_guard.h). Derived from the
  // job's token, never the token itself.
  std::string handshake_password;
  std::string credential_name = "credentials";  // what users set, for refusal messages
  // A connection that has not finished its handshake by then is closed (an idle or slow peer).
  std::chrono::milliseconds handshake_timeout{10'000};
  // Messages queued for one incoming peer that does not read them; past it, replies to that peer are
  // dropped (counted in droppedReplies() and logged, rate-limited). 0 = unlimited.
  int max_queued_replies = 0;
  size_t max_frame_bytes = size_t{1} << 30;  // larger incoming frames are refused by the socket
  size_t recv_queue_capacity = 4096;         // messages waiting for recv()
  std::chrono::milliseconds linger{1000};    // how long close() keeps flushing queued sends
  std::string name = "transport";            // for log lines
  // Non-empty: listen() also binds ipc://@<ipc_name>, an abstract unix socket, which peers in this
  // network namespace reach with connect(Endpoint::ipc(ipc_name)) faster than over TCP loopback.
  std::string ipc_name;
};

// Where connect() goes: host:port over TCP (host an IP address), or, with ipc_name set, the abstract
// unix socket ipc://@ipc_name (see TransportOptions::ipc_name).
struct Endpoint {
  std::string host;
  int port = 0;
  std::string ipc_name;
  // Non-empty: proven at the PLAIN handshake instead of TransportOptions::handshake_password (each
  // server listens with a password of its own; see dataHandshakePassword in ps/node/auth.h).
  // Transports without a PLAIN handshake ignore it.
  std::string handshake_password;

  static Endpoint tcp(std::string host, int port, std::string password = {}) {
    return Endpoint{std::move(host), port, {}, std::move(password)};
  }
  static Endpoint ipc(std::string name, std::string password = {}) {
    return Endpoint{{}, 0, std::move(name), std::move(password)};
  }
  bool isIpc() const { return !ipc_name.empty(); }
};

class Transport {
 public:
  virtual ~Transport() = default;

  // Listens on host:port (port 0 = a free port) and returns the bound port.
  virtual StatusOr<int> listen(const std::string& host, int port) = 0;
  // Starts connecting to the endpoint and returns the peer's id at once; messages sent before the
  // connection is up are queued.
  virtual StatusOr<PeerId> connect(const Endpoint& to) = 0;
  // Queues frames for the peer. The Blobs are sent without copying; they stay referenced until sent.
  virtual Status send(PeerId peer, std::vector<Blob> frames) = 0;
  // The next incoming message, or kDeadlineExceeded when none came before the deadline.
  virtual StatusOr<TransportMessage> recv(std::chrono::steady_clock::time_point deadline) = 0;
  // From now on the I/O thread calls `handler` with every incoming message (first those already queued
  // for recv()), and recv() gets nothing more; so does a thread inside receiveOn. Call it once. The handler runs on the
  // I/O thread (or a receiveOn caller's), which neither sends nor receives meanwhile: it must not wait for long
  // (blocking on a full queue is fine: backpressure).
  virtual void onMessage(std::function<void(TransportMessage)> handler) = 0;
  // Flushes queued sends for up to the linger time, then stops the I/O thread. Idempotent.
  virtual void close() = 0;
  // A human-readable description of a peer ("tcp://1.2.3.4:5" or "incoming #3").
  virtual std::string describe(PeerId peer) const = 0;
  // Frees what the transport keeps for an incoming peer (a refused or misbehaving one); a later message
  // from the same connection makes it a new peer. Messages already queued for it are still sent.
  virtual void forget(PeerId peer) = 0;
  // Why a peer we connected to refused our handshake ("" while none did): a wrong or missing token.
  virtual std::string handshakeFailure(PeerId peer) const = 0;
  // How many incoming connections were refused at the handshake so far.
  virtual uint64_t refusedHandshakes() const = 0;
  // How many messages to incoming peers were dropped because their queue was full
  // (TransportOptions::max_queued_replies): peers that do not read what they are sent.
  virtual uint64_t droppedReplies() const { return 0; }

  // Outgoing connections survive a reset: ZeroMQ reconnects by itself, and the peer on the other side
  // keeps its PeerId for us (each outgoing connection presents a fixed random ZeroMQ routing id and
  // listeners let a reconnecting routing id take over its old connection). What was on the wire at the
  // reset is lost, both ways. From now on the I/O thread calls `handler` with the peer whenever one of
  // our outgoing connections finished its handshake again after losing its connection, so the owner
  // can resend what is unanswered; the handler must not block.
  virtual void onReconnect(std::function<void(PeerId)> handler) = 0;
  // Closes an outgoing connection (its queued messages are dropped); messages to it are dropped from
  // now on. For a peer whose address changed: connect() to the new one.
  virtual void disconnect(PeerId peer) = 0;
  // How many times outgoing connections came back after losing their connection.
  virtual uint64_t reconnects() const = 0;

  // Receives the messages of outgoing connection `peer` on the calling thread, handing each to the
  // onMessage handler here instead of on the I/O thread, until `done()` (called with no transport
  // lock held) is true or the deadline passes. For a caller waiting for its reply: the reply then
  // wakes the caller alone, as in raw ZeroMQ request-reply, where the I/O thread and then the caller
  // make two wake-ups. One thread at a time per connection; false at once (nothing received) when
  // another thread is receiving there, the connection is closed or unknown, no handler is set, or on
  // the I/O thread: the caller then waits as it would have.
  virtual bool receiveOn(PeerId /*peer*/, std::chrono::steady_clock::time_point /*deadline*/,
                         const std::function<bool()>& /*done*/) {
    return false;
  }
  // Makes every thread inside receiveOn call its `done` again (after something other than a message
  // may have ended its wait).
  virtual void wakeReceivers() {}
  // After receiveOn returns, the connection may stay with the calling thread for a few milliseconds
  // (it usually sends again and receives there next), and what arrives meanwhile waits in the
  // socket. A thread about to wait for messages that the I/O thread delivers (not inside receiveOn)
  // calls this first: such connections go back to the I/O thread, and none stays with a receiveOn
  // caller until the matching endWaitOnIoThread().
  virtual void beginWaitOnIoThread() {}
  virtual void endWaitOnIoThread() {}
};

std::unique_ptr<Transport> makeZmqTransport(const TransportOptions& options);

}  // namespace zps

// The ZeroMQ transport's socket-level pieces: socket options, sending Blobs as ZeroMQ messages without
// copying them, owning a received message's bytes (and keeping their memory), and an outgoing
// connection that several threads send on.
// Used only by zmq_transport.cc.
#pragma once

#include <zmq.h>

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "ps/common/blob.h"
#include "ps/transport/transport.h"

namespace zps {

// A received ZeroMQ message; the Blobs of its frames hold it (shared_ptr) until they are dropped.
struct ReceivedFrame {
  zmq_msg_t msg;
  ReceivedFrame() { zmq_msg_init(&msg); }
  ~ReceivedFrame() { zmq_msg_close(&msg); }
  ReceivedFrame(const ReceivedFrame&) = delete;
  ReceivedFrame& operator=(const ReceivedFrame&) = delete;
};

// An outgoing connection. The transport's I/O thread receives on its socket and callers' threads send
// on it, one at a time under `mu` (a ZeroMQ socket may change threads behind a lock). The I/O thread
// waits on the socket's ZMQ_FD, a plain descriptor, so that it holds no lock while it waits. Owned by
// the transport's map of dealers; a sending thread shares it for the length of one send.
struct Dealer {
  std::mutex mu;
  void* socket = nullptr;  // null once closed
  int fd = -1;             // ZMQ_FD: readable when the socket may have news (see ZmqTransport::ioLoop)
  // A send took in the socket's news (ZMQ_FD then stays quiet), or a batch left messages waiting: the
  // I/O thread must look at the socket without waiting for ZMQ_FD.
  std::atomic<bool> look{false};
};

// Process-wide, once: freed message buffers stay in the heap for the next messages (see the .cc).
void keepFreedMessageMemory();
// The options every socket gets: linger, largest frame, unlimited send buffering, IPv6, handshake
// deadline.
void setCommonOptions(void* socket, const TransportOptions& options);

// Sends one frame: copied when small or ownerless, otherwise zero-copy (ZeroMQ keeps a reference to
// the Blob's owner until it has sent the bytes). False when ZeroMQ refused it.
bool sendFrame(void* socket, const Blob& frame, bool more);
// The frames of one message, after the routing id when there is one (a ROUTER's reply).
bool sendFrames(void* socket, const std::string* routing_id, const std::vector<Blob>& frames);
// True when a message is waiting on the socket (ZMQ_EVENTS; this also takes in the socket's news).
bool hasInput(void* socket);

}  // namespace zps

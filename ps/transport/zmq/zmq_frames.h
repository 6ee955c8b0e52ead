// The ZeroMQ transport's socket-level pieces: socket options, sending Blobs as ZeroMQ messages without
// copying them, owning a received message's bytes (and keeping their memory).
// Used only by zmq_transport.cc and dealer.cc.
#pragma once

#include <zmq.h>

#include <random>
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

// Process-wide, once: freed message buffers stay in the heap for the next messages (see the .cc).
void keepFreedMessageMemory();
// The options every socket gets: linger, largest frame, unlimited send buffering, IPv6, handshake
// deadline.
void setCommonOptions(void* socket, const TransportOptions& options);
// An outgoing connection's options (before it connects): reconnection, a fixed random routing id
// (see ZMQ_ROUTER_HANDOVER on listeners), ZeroMQ heartbeats.
void setClientOptions(void* socket, std::random_device& rng);

// Sends one frame: copied when small or ownerless, otherwise zero-copy (ZeroMQ keeps a reference to
// the Blob's owner until it has sent the bytes). False when ZeroMQ refused it.
bool sendFrame(void* socket, const Blob& frame, bool more);
// The frames of one message, after the routing id when there is one (a ROUTER's reply).
bool sendFrames(void* socket, const std::string* routing_id, const std::vector<Blob>& frames);
// What receiveMessage found.
enum class Received { kNone, kMessage, kTooManyFrames, kBroken };
// Receives one multi-part message, without waiting for its first frame (kNone: none is waiting). A
// ROUTER's (`routed`) first frame is the routing id. Frames past `max_frames` are read and dropped
// (kTooManyFrames); a receive that fails mid-message gives kBroken (see zmq_errno).
Received receiveMessage(void* socket, bool routed, size_t max_frames, std::vector<Blob>* frames,
                        std::string* routing_id);
// True when a message is waiting on the socket (ZMQ_EVENTS; this also takes in the socket's news).
bool hasInput(void* socket);

}  // namespace zps

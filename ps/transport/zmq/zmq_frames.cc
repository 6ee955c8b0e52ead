#include "ps/transport/zmq/zmq_frames.h"

#include <malloc.h>

#include <cstring>
#include <memory>
#include <mutex>

namespace zps {
namespace {

// Frames smaller than this are copied into ZeroMQ's own message; a heap-allocated owner reference would
// cost more than the copy.
constexpr size_t kCopyBelowBytes = 256;
// Outgoing connections send a ZeroMQ PING after this much quiet and reconnect when nothing at all
// came back within the timeout (any traffic counts, so a long transfer never trips it).
constexpr int kConnectionPingMs = 5'000;
constexpr int kConnectionPingTimeoutMs = 30'000;

void releaseOwner(void* /*data*/, void* hint) { delete static_cast<std::shared_ptr<const void>*>(hint); }

}  // namespace

// ZeroMQ allocates a fresh buffer for every large received message. With glibc's defaults, buffers past
// the mmap threshold come from mmap and freed heap tops are trimmed back to the kernel, so many
// messages land on never-touched pages and pay a page fault per 4 KiB: measured with `perf stat -e
// page-faults` on 64 MiB push-pulls, ~6,100 faults (24 MiB of fresh pages) per round with the defaults
// and ~1,350 with these settings. Process-wide and once: every transport's process moves messages.
void keepFreedMessageMemory() {
  static std::once_flag once;
  std::call_once(once, [] {
    mallopt(M_MMAP_THRESHOLD, 32 << 20);   // glibc's maximum; larger blocks still use mmap
    mallopt(M_TRIM_THRESHOLD, 256 << 20);  // keep up to 256 MiB of freed heap for the next messages
  });
}

void setCommonOptions(void* socket, const TransportOptions& options) {
  int linger = static_cast<int>(options.linger.count());
  zmq_setsockopt(socket, ZMQ_LINGER, &linger, sizeof(linger));
  int64_t max_size = static_cast<int64_t>(options.max_frame_bytes);
  zmq_setsockopt(socket, ZMQ_MAXMSGSIZE, &max_size, sizeof(max_size));
  // Unlimited send buffering: what we queue is bounded by the protocol (replies follow requests), and a
  // full high-water mark would make ROUTER drop messages silently.
  int hwm = 0;
  zmq_setsockopt(socket, ZMQ_SNDHWM, &hwm, sizeof(hwm));
  int ipv6 = 1;
  zmq_setsockopt(socket, ZMQ_IPV6, &ipv6, sizeof(ipv6));
  int handshake_ms = static_cast<int>(options.handshake_timeout.count());
  zmq_setsockopt(socket, ZMQ_HANDSHAKE_IVL, &handshake_ms, sizeof(handshake_ms));
}

void setClientOptions(void* socket, std::random_device& rng) {
  int reconnect_max = 1000;
  zmq_setsockopt(socket, ZMQ_RECONNECT_IVL_MAX, &reconnect_max, sizeof(reconnect_max));
  // Random so that no other peer can guess and take it; ids that start with a zero byte are libzmq's own.
  std::string routing_id(16, '\0');
  for (char& c : routing_id) c = static_cast<char>(rng());
  routing_id[0] = static_cast<char>(routing_id[0] | 1);
  zmq_setsockopt(socket, ZMQ_ROUTING_ID, routing_id.data(), routing_id.size());
  // ZeroMQ heartbeats find a connection that died without a reset (a peer host that vanished, a
  // dropped NAT entry), so that it is reconnected instead of waiting for a reply forever.
  int ping_ms = kConnectionPingMs, ping_timeout_ms = kConnectionPingTimeoutMs;
  zmq_setsockopt(socket, ZMQ_HEARTBEAT_IVL, &ping_ms, sizeof(ping_ms));
  zmq_setsockopt(socket, ZMQ_HEARTBEAT_TIMEOUT, &ping_timeout_ms, sizeof(ping_timeout_ms));
}

bool sendFrame(void* socket, const Blob& frame, bool more) {
  zmq_msg_t msg;
  if (frame.size() < kCopyBelowBytes || !frame.owner()) {
    zmq_msg_init_size(&msg, frame.size());
    if (frame.size() > 0) std::memcpy(zmq_msg_data(&msg), frame.data(), frame.size());
  } else {
    auto* hint = new std::shared_ptr<const void>(frame.owner());
    zmq_msg_init_data(&msg, const_cast<uint8_t*>(frame.data()), frame.size(), releaseOwner, hint);
  }
  if (zmq_msg_send(&msg, socket, (more ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT) < 0) {
    zmq_msg_close(&msg);
    return false;
  }
  return true;
}

bool sendFrames(void* socket, const std::string* routing_id, const std::vector<Blob>& frames) {
  bool ok = true;
  if (routing_id != nullptr) ok = sendFrame(socket, Blob::fromString(*routing_id), true);
  for (size_t i = 0; ok && i < frames.size(); ++i) ok = sendFrame(socket, frames[i], i + 1 < frames.size());
  return ok;
}

Received receiveMessage(void* socket, bool routed, size_t max_frames, std::vector<Blob>* frames,
                        std::string* routing_id) {
  bool first = true;
  bool dropped = false;
  for (;;) {
    auto frame = std::make_shared<ReceivedFrame>();
    if (zmq_msg_recv(&frame->msg, socket, first ? ZMQ_DONTWAIT : 0) < 0)
      return first ? Received::kNone : Received::kBroken;
    const bool more = zmq_msg_more(&frame->msg) != 0;
    if (routed && first) {
      routing_id->assign(static_cast<const char*>(zmq_msg_data(&frame->msg)), zmq_msg_size(&frame->msg));
    } else if (frames->size() < max_frames) {
      const void* data = zmq_msg_data(&frame->msg);
      const size_t size = zmq_msg_size(&frame->msg);
      frames->emplace_back(std::shared_ptr<const void>(frame, data), data, size);
    } else {
      dropped = true;
    }
    first = false;
    if (!more) return dropped ? Received::kTooManyFrames : Received::kMessage;
  }
}

bool hasInput(void* socket) {
  int events = 0;
  size_t len = sizeof(events);
  return zmq_getsockopt(socket, ZMQ_EVENTS, &events, &len) == 0 && (events & ZMQ_POLLIN) != 0;
}

}  // namespace zps

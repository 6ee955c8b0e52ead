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

bool hasInput(void* socket) {
  int events = 0;
  size_t len = sizeof(events);
  return zmq_getsockopt(socket, ZMQ_EVENTS, &events, &len) == 0 && (events & ZMQ_POLLIN) != 0;
}

}  // namespace zps

// SharedMemoryLinks: large frames between processes on one host cross in shared memory instead of the
// socket. Over an ipc link (both ends on one host, see TransportOptions::ipc_name) ZeroMQ copies each
// byte twice, into the kernel and out of it; here the sender copies a frame once, into its arena for
// that peer (shared_arena.h), and the message carries a marker frame saying where it lies instead of
// the bytes; the receiver hands up a Blob that points into the arena. For a gradient exchange on one
// host that halves the copies of every byte, on cores that also compute.
//
// Agreement, per link. The connecting side of an ipc link offers its arena with a marker on its
// messages; the listening side maps it and answers ACCEPT, naming its own arena for its replies, or
// REFUSE (another PID namespace, no /proc, a memfd it may not open). The offering side maps the
// listener's arena and answers the same way. A side puts frames in its arena only once the other side
// accepted it. Small frames, frames that do not fit the arena's free room, refused links and TCP links
// go through the socket as before, so every message arrives either way.
//
// Markers come from peers: decode() bounds every field; a marker whose arena cannot be mapped or whose
// frames lie outside it drops that one message, as a corrupt message would be, and refuses the link
// (which a peer of ours never meets: it offers only arenas the receiver accepted, in this host's /proc).
//
// Thread-safe: outgoing() runs on senders' threads, incoming() on the receiving thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ps/common/blob.h"
#include "ps/common/log_limiter.h"
#include "ps/transport/transport.h"
#include "ps/transport/zmq/shared_arena.h"

namespace zps::shm {

// Frames at least this big go through the arena: below it a socket's copies cost less than a marker
// and a slot.
inline constexpr size_t kMinSharedFrameBytes = 16 << 10;
// Each sender's arena per link: room for the 4 MiB partitions that a job on one host sends at once for
// a model of tens of MB (a frame that does not fit waits for no one: it goes through the socket). Only
// the pages a link uses take memory.
inline constexpr uint64_t kArenaBytes = uint64_t{64} << 20;
// A full arena whose oldest slot the receiver has held this long is replaced by a new one (the
// receiver may have lost that message, or keep the frame for good); the old one lives while the
// receiver still maps it.
inline constexpr std::chrono::seconds kStuckSlot{10};

enum class MarkerKind : uint8_t { kFrames = 1, kAccept = 2, kRefuse = 3 };

struct MarkerEntry {
  uint32_t frame = 0;  // index of the (empty) frame it stands for
  uint64_t offset = 0;
  uint64_t length = 0;
};

// A marker frame: kFrames leads a message whose `entries` frames lie in `arena` (none: an offer riding
// on a plain message); kAccept and kRefuse are the whole message, answering for the arena
// `answered`, and kAccept may offer the answering side's own `arena` (id 0: none).
struct Marker {
  MarkerKind kind = MarkerKind::kFrames;
  ArenaRef arena;
  uint64_t answered = 0;
  std::vector<MarkerEntry> entries;
};

bool isMarker(const Blob& frame);
Blob encodeMarker(const Marker& marker);
// A marker frame of a message of `frames` frames; refuses any field out of range.
StatusOr<Marker> decodeMarker(const Blob& frame, size_t frames);

class SharedMemoryLinks {
 public:
  // `enabled` false: this side neither offers nor fills arenas (it still answers offers with REFUSE).
  SharedMemoryLinks(std::string name, bool enabled);
  ~SharedMemoryLinks();

  // `peer` is an ipc connection of ours: offer it our arena.
  void offerTo(PeerId peer);
  // Before `frames` go to `peer`: large frames move into its arena once accepted, and a marker leads.
  std::vector<Blob> outgoing(PeerId peer, std::vector<Blob> frames);

  struct Incoming {
    std::vector<Blob> frames;  // the message to hand up; empty when there is none
    std::vector<Blob> answer;  // to send back to the peer as it is, when not empty
  };
  // A message from `peer` whose first frame isMarker().
  Incoming incoming(PeerId peer, std::vector<Blob> frames);

  // `peer` reconnected (it may be a new process that lost what was on the wire): its arena from us is
  // replaced and offered again.
  void reconnected(PeerId peer);
  // `peer` is gone.
  void forget(PeerId peer);

  // Frames and bytes that went through arenas, and large frames that went through the socket because
  // the arena was full.
  uint64_t sharedFrames() const { return shared_frames_.load(); }
  uint64_t sharedBytes() const { return shared_bytes_.load(); }
  uint64_t fullArenaFrames() const { return full_arena_frames_.load(); }

 private:
  enum class SendState { kNone, kOffered, kAccepted, kRefused };
  struct Link {
    std::mutex mu;  // guards every field; held while a frame is copied into the arena
    SendState state = SendState::kNone;
    std::unique_ptr<SendArena> arena;
    std::shared_ptr<MappedArena> mapped;  // the peer's arena, once mapped
  };
  std::shared_ptr<Link> linkOf(PeerId peer);
  // With link.mu held: a new arena for the link; false (and the link refused) when none can be made.
  bool newArena(PeerId peer, Link& link);
  // With link.mu held: the peer's arena `ref`, mapped (the one mapped already when the id matches), or
  // why not (shared memory off here, or an arena refused).
  StatusOr<std::shared_ptr<MappedArena>> mapPeerArena(Link& link, const ArenaRef& ref);
  // A warning about a peer's marker or arena, at most a few a minute whatever the peer sends.
  void warnLimited(const std::string& line);
  Incoming framesArrived(PeerId peer, Link& link, const Marker& marker, std::vector<Blob> frames);

  const std::string name_;
  const bool enabled_;
  std::mutex mu_;  // guards links_
  std::map<PeerId, std::shared_ptr<Link>> links_;
  std::mutex log_mu_;
  LogLimiter refusal_log_;
  std::atomic<uint64_t> shared_frames_{0};
  std::atomic<uint64_t> shared_bytes_{0};
  std::atomic<uint64_t> full_arena_frames_{0};
};

}  // namespace zps::shm

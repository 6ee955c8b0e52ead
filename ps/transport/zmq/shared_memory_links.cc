#include "ps/transport/zmq/shared_memory_links.h"

#include <glog/logging.h>

#include <cstring>
#include <utility>

namespace zps::shm {
namespace {

// Marker frame, little-endian: magic (8 bytes, the last ones the version), kind (1), 3 zero bytes,
// entry count (4), arena pid (4), fd (4), capacity (8), id (8), answered id (8), then per entry its
// frame index (4), 4 zero bytes, offset (8), length (8). A ZeroMQ message of ours never starts so:
// the codec's envelope is a protobuf message whose first byte is a field tag of 1 to 3.
constexpr char kMagic[8] = {'Z', 'P', 'S', 'H', 'M', 0, 0, 1};
constexpr size_t kFixedBytes = 48;
constexpr size_t kEntryBytes = 24;
// No message of ours has more frames (the codec allows 3; the transport drops past 16).
constexpr size_t kMaxEntries = 16;

template <typename T>
void put(std::string& out, size_t at, T value) {
  std::memcpy(out.data() + at, &value, sizeof(T));
}
template <typename T>
T get(const uint8_t* in, size_t at) {
  T value;
  std::memcpy(&value, in + at, sizeof(T));
  return value;
}

}  // namespace

bool isMarker(const Blob& frame) {
  return frame.size() >= kFixedBytes && std::memcmp(frame.data(), kMagic, sizeof(kMagic)) == 0;
}

Blob encodeMarker(const Marker& m) {
  std::string out(kFixedBytes + kEntryBytes * m.entries.size(), '\0');
  std::memcpy(out.data(), kMagic, sizeof(kMagic));
  put<uint8_t>(out, 8, static_cast<uint8_t>(m.kind));
  put<uint32_t>(out, 12, static_cast<uint32_t>(m.entries.size()));
  put<uint32_t>(out, 16, m.arena.pid);
  put<int32_t>(out, 20, m.arena.fd);
  put<uint64_t>(out, 24, m.arena.capacity);
  put<uint64_t>(out, 32, m.arena.id);
  put<uint64_t>(out, 40, m.answered);
  for (size_t i = 0; i < m.entries.size(); ++i) {
    const size_t at = kFixedBytes + i * kEntryBytes;
    put<uint32_t>(out, at, m.entries[i].frame);
    put<uint64_t>(out, at + 8, m.entries[i].offset);
    put<uint64_t>(out, at + 16, m.entries[i].length);
  }
  return Blob::fromString(std::move(out));
}

StatusOr<Marker> decodeMarker(const Blob& frame, size_t frames) {
  if (!isMarker(frame)) return ProtocolError("not a shared-memory marker");
  const uint8_t* in = frame.data();
  Marker m;
  const uint8_t kind = get<uint8_t>(in, 8);
  if (kind < 1 || kind > 3) return ProtocolError("shared-memory marker of unknown kind " + std::to_string(kind));
  m.kind = static_cast<MarkerKind>(kind);
  const uint32_t count = get<uint32_t>(in, 12);
  if (count > kMaxEntries || count >= frames)
    return ProtocolError("shared-memory marker names " + std::to_string(count) + " frames of a message of " +
                         std::to_string(frames));
  if (frame.size() != kFixedBytes + kEntryBytes * count)
    return ProtocolError("shared-memory marker of " + std::to_string(frame.size()) + " bytes for " +
                         std::to_string(count) + " frames");
  if (m.kind != MarkerKind::kFrames && frames != 1)
    return ProtocolError("a shared-memory answer must be a message of its own");
  m.arena.pid = get<uint32_t>(in, 16);
  m.arena.fd = get<int32_t>(in, 20);
  m.arena.capacity = get<uint64_t>(in, 24);
  m.arena.id = get<uint64_t>(in, 32);
  m.answered = get<uint64_t>(in, 40);
  uint32_t previous = 0;
  for (uint32_t i = 0; i < count; ++i) {
    const size_t at = kFixedBytes + i * kEntryBytes;
    MarkerEntry e{get<uint32_t>(in, at), get<uint64_t>(in, at + 8), get<uint64_t>(in, at + 16)};
    if (e.frame <= previous || e.frame >= frames)
      return ProtocolError("shared-memory marker names frame " + std::to_string(e.frame) + " out of order or range");
    previous = e.frame;
    m.entries.push_back(e);
  }
  return m;
}

SharedMemoryLinks::SharedMemoryLinks(std::string name, bool enabled) : name_(std::move(name)), enabled_(enabled) {}

SharedMemoryLinks::~SharedMemoryLinks() {
  // Worth a line when the arenas were too small for the traffic (frames went through the socket).
  if (full_arena_frames_.load() > 0 || (VLOG_IS_ON(1) && shared_frames_.load() > 0))
    LOG(INFO) << name_ << ": " << shared_frames_.load() << " frames (" << shared_bytes_.load()
              << " bytes) crossed in shared memory; " << full_arena_frames_.load()
              << " large frames went through the socket for lack of arena room";
}

std::shared_ptr<SharedMemoryLinks::Link> SharedMemoryLinks::linkOf(PeerId peer) {
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<Link>& link = links_[peer];
  if (link == nullptr) link = std::make_shared<Link>();
  return link;
}

bool SharedMemoryLinks::newArena(PeerId peer, Link& link) {
  auto arena = SendArena::create(kArenaBytes);
  if (!arena.ok()) {
    LOG(WARNING) << name_ << ": no shared memory for peer #" << peer << " (" << arena.status().message()
                 << "); its large frames go through the socket";
    link.state = SendState::kRefused;
    link.arena.reset();
    return false;
  }
  link.arena = std::move(*arena);
  return true;
}

void SharedMemoryLinks::offerTo(PeerId peer) {
  if (!enabled_) return;
  auto link = linkOf(peer);
  std::lock_guard<std::mutex> lock(link->mu);
  if (link->state == SendState::kNone && newArena(peer, *link)) link->state = SendState::kOffered;
}

void SharedMemoryLinks::reconnected(PeerId peer) {
  std::shared_ptr<Link> link;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = links_.find(peer);
    if (it == links_.end()) return;
    link = it->second;
  }
  std::lock_guard<std::mutex> lock(link->mu);
  link->mapped.reset();
  if (link->state == SendState::kOffered || link->state == SendState::kAccepted) {
    // What was on the wire is lost, so slots may be held for good: a fresh arena, agreed afresh (the
    // peer may be a new process).
    if (newArena(peer, *link)) link->state = SendState::kOffered;
  }
}

void SharedMemoryLinks::forget(PeerId peer) {
  std::lock_guard<std::mutex> lock(mu_);
  links_.erase(peer);
}

std::vector<Blob> SharedMemoryLinks::outgoing(PeerId peer, std::vector<Blob> frames) {
  std::shared_ptr<Link> link;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = links_.find(peer);
    if (it == links_.end()) return frames;
    link = it->second;
  }
  std::lock_guard<std::mutex> lock(link->mu);
  if (link->state != SendState::kOffered && link->state != SendState::kAccepted) return frames;
  Marker marker;
  if (link->state == SendState::kAccepted) {
    for (size_t i = 1; i < frames.size(); ++i) {
      const Blob& frame = frames[i];
      if (frame.size() < kMinSharedFrameBytes) continue;
      std::optional<uint64_t> at = link->arena->put(frame.data(), frame.size());
      // A new arena only between messages: the marker names one arena for all of a message's frames.
      if (!at && marker.entries.empty() && link->arena->oldestHeldFor() > kStuckSlot) {
        LOG(WARNING) << name_ << ": peer #" << peer << " has held a shared-memory frame for over " << kStuckSlot.count()
                     << " s; a new arena replaces the full one";
        if (!newArena(peer, *link)) return frames;
        at = link->arena->put(frame.data(), frame.size());
      }
      if (!at) {
        ++full_arena_frames_;
        continue;
      }
      marker.entries.push_back({static_cast<uint32_t>(i + 1), *at, frame.size()});  // after the marker
      shared_bytes_ += frame.size();
      frames[i] = Blob();
    }
    if (marker.entries.empty()) return frames;
    shared_frames_ += marker.entries.size();
  }
  // kOffered: the marker offers the arena, and the message's frames stay in it.
  marker.kind = MarkerKind::kFrames;
  marker.arena = link->arena->ref();
  frames.insert(frames.begin(), encodeMarker(marker));
  return frames;
}

StatusOr<std::shared_ptr<MappedArena>> SharedMemoryLinks::mapPeerArena(Link& link, const ArenaRef& ref) {
  if (!enabled_) return Unavailable("shared memory is off here");
  if (link.mapped != nullptr && link.mapped->id() == ref.id) return link.mapped;
  auto mapped = MappedArena::open(ref);
  if (!mapped.ok()) return mapped.status();
  link.mapped = *mapped;
  return link.mapped;
}

void SharedMemoryLinks::warnLimited(const std::string& line) {
  std::lock_guard<std::mutex> lock(log_mu_);
  if (refusal_log_.allow()) LOG(WARNING) << name_ << ": " << line;
}

SharedMemoryLinks::Incoming SharedMemoryLinks::incoming(PeerId peer, std::vector<Blob> frames) {
  auto marker = decodeMarker(frames[0], frames.size());
  if (!marker.ok()) {
    warnLimited("dropped a message from peer #" + std::to_string(peer) + ": " + marker.status().message());
    return {};
  }
  auto link = linkOf(peer);
  std::lock_guard<std::mutex> lock(link->mu);
  Incoming result;
  switch (marker->kind) {
    case MarkerKind::kFrames: return framesArrived(peer, *link, *marker, std::move(frames));
    case MarkerKind::kAccept:
      if (link->arena != nullptr && marker->answered == link->arena->ref().id && link->state == SendState::kOffered) {
        link->state = SendState::kAccepted;
        LOG(INFO) << name_ << ": frames of " << (kMinSharedFrameBytes >> 10) << " KiB or more to peer #" << peer
                  << " cross in shared memory";
      }
      if (marker->arena.id != 0) {  // the peer's own arena, offered for its frames to us
        Marker answer;
        answer.answered = marker->arena.id;
        auto mapped = mapPeerArena(*link, marker->arena);
        answer.kind = mapped.ok() ? MarkerKind::kAccept : MarkerKind::kRefuse;
        if (!mapped.ok())
          warnLimited("cannot map peer #" + std::to_string(peer) + "'s arena: " + mapped.status().message());
        result.answer.push_back(encodeMarker(answer));
      }
      return result;
    case MarkerKind::kRefuse:
      if (link->arena != nullptr && marker->answered == link->arena->ref().id) {
        link->state = SendState::kRefused;
        LOG(INFO) << name_ << ": peer #" << peer << " cannot map shared memory from here; large frames to it "
                  << "go through the socket";
      }
      return result;
  }
  return result;
}

SharedMemoryLinks::Incoming SharedMemoryLinks::framesArrived(PeerId peer, Link& link, const Marker& marker,
                                                             std::vector<Blob> frames) {
  Incoming result;
  Marker answer;
  answer.answered = marker.arena.id;
  auto refuse = [&](const Status& why) {
    warnLimited("peer #" + std::to_string(peer) + "'s shared memory refused: " + why.message() +
                (marker.entries.empty() ? "" : " (its message is dropped)"));
    answer.kind = MarkerKind::kRefuse;
    result.answer.push_back(encodeMarker(answer));
  };
  auto mapped = mapPeerArena(link, marker.arena);
  if (!mapped.ok()) {
    refuse(mapped.status());
    if (!marker.entries.empty()) return result;
  } else {
    for (const MarkerEntry& e : marker.entries) {
      auto frame = frames[e.frame].empty() ? (*mapped)->frame(e.offset, e.length)
                                           : StatusOr<Blob>(ProtocolError("a frame in shared memory also came inline"));
      if (!frame.ok()) {
        link.mapped.reset();
        refuse(frame.status());
        return result;
      }
      frames[e.frame] = std::move(*frame);
    }
    if (marker.entries.empty()) {
      // An offer: accepted, with this side's own arena offered for its frames to the peer.
      answer.kind = MarkerKind::kAccept;
      if (link.state == SendState::kNone && newArena(peer, link)) link.state = SendState::kOffered;
      if (link.state == SendState::kOffered) answer.arena = link.arena->ref();
      result.answer.push_back(encodeMarker(answer));
    }
  }
  frames.erase(frames.begin());
  result.frames = std::move(frames);
  return result;
}

}  // namespace zps::shm

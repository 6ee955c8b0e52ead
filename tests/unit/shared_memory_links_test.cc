// Large frames between processes on one host cross in shared memory (ps/transport/zmq/shared_memory_links.h):
// the agreement, the bytes, the reuse of released room (first fit, so few pages are ever touched), a full arena falling
// back to the socket, and markers from a hostile peer. Both sides live in this process, which maps its own arenas
// through /proc/self, as a peer on the same host does through /proc/<pid>.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "ps/transport/zmq/shared_memory_links.h"

namespace zps::shm {
namespace {

constexpr PeerId kListenerSeen = 7;   // the listener, as the connecting side names it
constexpr PeerId kConnectorSeen = 9;  // the connecting side, as the listener names it

Blob bytes(size_t n, uint8_t seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(seed + i * 31);
  return Blob::fromString(std::move(s));
}

// What the transport hands up of a message that `to` receives: a message without a marker goes up as it is.
std::vector<Blob> deliver(SharedMemoryLinks& to, PeerId from, std::vector<Blob> frames) {
  if (!isMarker(frames[0])) return frames;
  auto got = to.incoming(from, std::move(frames));
  CHECK(got.answer.empty());
  return got.frames;
}

// Both ends of an ipc link, agreed: each side's arena accepted by the other.
struct AgreedLink {
  SharedMemoryLinks connector{"connector", true};
  SharedMemoryLinks listener{"listener", true};

  AgreedLink() {
    connector.offerTo(kListenerSeen);
    std::vector<Blob> first = connector.outgoing(kListenerSeen, {Blob::fromString("hello"), bytes(1 << 20, 1)});
    REQUIRE(first.size() == 3);  // the offer rides in front; the frames stay inline until accepted
    REQUIRE(isMarker(first[0]));
    auto got = listener.incoming(kConnectorSeen, first);
    REQUIRE(got.frames.size() == 2);
    CHECK(got.frames[0].view() == "hello");
    CHECK(got.frames[1].view() == bytes(1 << 20, 1).view());
    REQUIRE(got.answer.size() == 1);  // ACCEPT, offering the listener's arena
    auto back = connector.incoming(kListenerSeen, got.answer);
    CHECK(back.frames.empty());
    REQUIRE(back.answer.size() == 1);  // ACCEPT of the listener's arena
    auto done = listener.incoming(kConnectorSeen, back.answer);
    CHECK(done.frames.empty());
    CHECK(done.answer.empty());
  }
};

TEST_CASE("shared memory: after the agreement, large frames cross in the arena and arrive intact, both ways") {
  AgreedLink link;
  std::vector<Blob> out = link.connector.outgoing(kListenerSeen, {Blob::fromString("env"), bytes(3 << 20, 5)});
  REQUIRE(out.size() == 3);
  CHECK(out[2].empty());  // the bytes are in the arena, not in the message
  auto in = link.listener.incoming(kConnectorSeen, out);
  REQUIRE(in.frames.size() == 2);
  CHECK(in.frames[0].view() == "env");
  CHECK(in.frames[1].view() == bytes(3 << 20, 5).view());
  CHECK(link.connector.sharedFrames() == 1);
  CHECK(link.connector.sharedBytes() == (3u << 20));

  std::vector<Blob> reply = link.listener.outgoing(kConnectorSeen, {Blob::fromString("r"), bytes(2 << 20, 9)});
  REQUIRE(reply.size() == 3);
  auto answer = link.connector.incoming(kListenerSeen, reply);
  REQUIRE(answer.frames.size() == 2);
  CHECK(answer.frames[1].view() == bytes(2 << 20, 9).view());
  CHECK(link.listener.sharedFrames() == 1);

  // Two large frames in one message (a row push's keys and rows): both in the arena, in their places.
  std::vector<Blob> rows =
      link.connector.outgoing(kListenerSeen, {Blob::fromString("rows"), bytes(1 << 20, 3), bytes(2 << 20, 4)});
  REQUIRE(rows.size() == 4);
  auto both = link.listener.incoming(kConnectorSeen, rows);
  REQUIRE(both.frames.size() == 3);
  CHECK(both.frames[1].view() == bytes(1 << 20, 3).view());
  CHECK(both.frames[2].view() == bytes(2 << 20, 4).view());
  CHECK(link.connector.sharedFrames() == 3);
}

TEST_CASE("shared memory: small frames and the envelope stay in the message") {
  AgreedLink link;
  std::vector<Blob> out =
      link.connector.outgoing(kListenerSeen, {bytes(kMinSharedFrameBytes, 2), bytes(kMinSharedFrameBytes - 1, 3)});
  CHECK(out.size() == 2);  // nothing moved, so no marker either
  CHECK_FALSE(isMarker(out[0]));
  CHECK(link.connector.sharedFrames() == 0);
}

TEST_CASE("shared memory: released slots are reused, held ones fill the arena and frames then go inline") {
  AgreedLink link;
  const size_t frame = 4 << 20;
  // 64 frames of 4 MiB (four times the arena), each dropped by the receiver before the next: all shared,
  // each at the arena's first slot.
  for (int i = 0; i < 64; ++i) {
    std::vector<Blob> out = link.connector.outgoing(kListenerSeen, {Blob::fromString("e"), bytes(frame, i)});
    auto marker = decodeMarker(out[0], out.size());
    REQUIRE(marker.ok());
    REQUIRE(marker->entries.size() == 1);
    CHECK(marker->entries[0].offset == kArenaHeader + kSlotHeader);
    auto in = deliver(link.listener, kConnectorSeen, out);
    REQUIRE(in.size() == 2);
    REQUIRE(in[1].view() == bytes(frame, i).view());
  }
  CHECK(link.connector.sharedFrames() == 64);
  CHECK(link.connector.fullArenaFrames() == 0);

  // Held frames: the arena fills; the frames after that come inline, intact.
  std::vector<Blob> held;
  for (int i = 0; i < 20; ++i) {
    auto in = deliver(link.listener, kConnectorSeen,
                      link.connector.outgoing(kListenerSeen, {Blob::fromString("e"), bytes(frame, i)}));
    REQUIRE(in.size() == 2);
    REQUIRE(in[1].view() == bytes(frame, i).view());
    held.push_back(in[1]);
  }
  CHECK(link.connector.fullArenaFrames() > 0);
  CHECK(link.connector.sharedFrames() < 64 + 20);
  const uint64_t shared = link.connector.sharedFrames();
  held.clear();  // released: the next frame fits again
  deliver(link.listener, kConnectorSeen,
          link.connector.outgoing(kListenerSeen, {Blob::fromString("e"), bytes(frame, 1)}));
  CHECK(link.connector.sharedFrames() == shared + 1);
}

TEST_CASE("shared memory: a refused offer leaves every frame in the message") {
  SharedMemoryLinks connector{"connector", true};
  SharedMemoryLinks off{"listener", false};  // a side that shares no memory: it answers REFUSE
  connector.offerTo(kListenerSeen);
  auto got =
      off.incoming(kConnectorSeen, connector.outgoing(kListenerSeen, {Blob::fromString("a"), bytes(1 << 20, 4)}));
  REQUIRE(got.frames.size() == 2);  // the offer's message still arrives
  CHECK(got.frames[1].view() == bytes(1 << 20, 4).view());
  REQUIRE(got.answer.size() == 1);
  connector.incoming(kListenerSeen, got.answer);  // REFUSE
  std::vector<Blob> next = connector.outgoing(kListenerSeen, {Blob::fromString("b"), bytes(1 << 20, 6)});
  CHECK(next.size() == 2);  // no marker, bytes inline
  CHECK(connector.sharedFrames() == 0);
}

Marker framesMarker(ArenaRef arena, std::vector<MarkerEntry> entries) {
  Marker m;
  m.kind = MarkerKind::kFrames;
  m.arena = arena;
  m.entries = std::move(entries);
  return m;
}

TEST_CASE("shared memory: hostile markers are refused without a crash") {
  SECTION("malformed marker frames") {
    Marker m = framesMarker({1, 3, 1 << 20, 42}, {{1, 128, 10}});
    Blob good = encodeMarker(m);
    CHECK(decodeMarker(good, 2).ok());
    CHECK_FALSE(decodeMarker(good, 1).ok());  // names a frame the message lacks
    std::string cut(good.view().substr(0, good.size() - 1));
    CHECK_FALSE(decodeMarker(Blob::fromString(cut), 2).ok());
    std::string kind(good.view());
    kind[8] = 9;
    CHECK_FALSE(decodeMarker(Blob::fromString(kind), 2).ok());
    Marker twice = framesMarker({1, 3, 1 << 20, 42}, {{1, 128, 10}, {1, 256, 10}});
    CHECK_FALSE(decodeMarker(encodeMarker(twice), 3).ok());  // the same frame twice
    Marker accept;
    accept.kind = MarkerKind::kAccept;
    CHECK_FALSE(decodeMarker(encodeMarker(accept), 2).ok());  // an answer carries nothing else
  }

  SharedMemoryLinks listener{"listener", true};
  const uint32_t self = static_cast<uint32_t>(::getpid());
  SECTION("arenas that are not zps arenas") {
    int file = ::open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    REQUIRE(file >= 0);
    int unsealed = memfd_create("zps-arena", MFD_CLOEXEC);
    REQUIRE(unsealed >= 0);
    REQUIRE(ftruncate(unsealed, 1 << 20) == 0);
    for (ArenaRef ref : {ArenaRef{self, file, 1 << 20, 5}, ArenaRef{self, unsealed, 1 << 20, 5},
                         ArenaRef{1 << 30, 3, 1 << 20, 5}, ArenaRef{self, 3, 7, 5}}) {
      auto got = listener.incoming(kConnectorSeen, {encodeMarker(framesMarker(ref, {{1, 128, 64}})), Blob()});
      CHECK(got.frames.empty());  // dropped: its bytes are nowhere
      REQUIRE(got.answer.size() == 1);
      auto answer = decodeMarker(got.answer[0], 1);
      REQUIRE(answer.ok());
      CHECK(answer->kind == MarkerKind::kRefuse);
    }
    ::close(file);
    ::close(unsealed);
  }
  SECTION("frames outside a real arena, or sent inline as well") {
    AgreedLink link;
    std::vector<Blob> out = link.connector.outgoing(kListenerSeen, {Blob::fromString("e"), bytes(1 << 20, 8)});
    auto real = decodeMarker(out[0], out.size());
    REQUIRE(real.ok());
    const ArenaRef arena = real->arena;
    for (MarkerEntry bad : {MarkerEntry{1, arena.capacity - 64, 1 << 20}, MarkerEntry{1, 3, 64}, MarkerEntry{1, 64, 64},
                            MarkerEntry{1, real->entries[0].offset, 5}}) {
      auto got = listener.incoming(kConnectorSeen, {encodeMarker(framesMarker(arena, {bad})), Blob()});
      CHECK(got.frames.empty());
    }
    auto inline_too = listener.incoming(kConnectorSeen, {out[0], out[1], bytes(10, 1)});
    CHECK(inline_too.frames.empty());
    // The genuine message still arrives.
    auto got = listener.incoming(kConnectorSeen, out);
    REQUIRE(got.frames.size() == 2);
    CHECK(got.frames[1].view() == bytes(1 << 20, 8).view());
  }
}

}  // namespace
}  // namespace zps::shm

// Shared arenas: the memory through which large frames cross a same-host link (shared_memory_links.h
// says when). An arena is a memfd of fixed size that its sender maps and fills with slots, first fit; the
// receiver maps the same memfd (through /proc/<pid>/fd/<fd>) and reads a frame where it lies, with no
// copy; when it is done with the frame it clears the slot's `held` word and the sender reuses the room.
//
// Layout: an arena header (kArenaHeader bytes: magic, random id, capacity), then slots, each a slot
// header (kSlotHeader bytes: held, magic, length, arena id) followed by the frame's bytes, padded to a
// multiple of kSlotHeader so that every header and frame starts 64-byte aligned.
//
// Trust: the receiver takes nothing in the arena on faith. It maps only a zps memfd sealed against
// shrinking (a mapping of a file that shrinks faults on access), of the size the marker claims, with the
// claimed id in its header; each frame's offset and length must fall inside it and match its slot
// header. The sender keeps its own list of slots and reads nothing from the receiver but `held`, so a
// receiver that clears it early spoils only the frames it reads itself.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>

#include "ps/common/blob.h"
#include "zps/status.h"

namespace zps::shm {

inline constexpr size_t kArenaHeader = 64;
inline constexpr size_t kSlotHeader = 64;
// What a receiver agrees to map: a sender's arena is at least one slot and at most this big.
inline constexpr uint64_t kMaxArenaBytes = uint64_t{1} << 30;

// Where a sender's arena is: what a receiver needs to map it.
struct ArenaRef {
  uint32_t pid = 0;
  int32_t fd = -1;
  uint64_t capacity = 0;
  uint64_t id = 0;  // random, non-zero; 0 means "no arena"
};

class SendArena {
 public:
  // A new arena of `capacity` bytes (a multiple of kSlotHeader, at least two slots' headers).
  static StatusOr<std::unique_ptr<SendArena>> create(uint64_t capacity);
  ~SendArena();
  SendArena(const SendArena&) = delete;
  SendArena& operator=(const SendArena&) = delete;

  ArenaRef ref() const { return ref_; }
  // Copies `size` bytes into a free slot and returns the offset of the copy, or nullopt when no free
  // slot is large enough (the frame then goes through the socket). Not thread-safe.
  std::optional<uint64_t> put(const uint8_t* data, size_t size);
  // How long the oldest slot still held has been held (zero when none is).
  std::chrono::steady_clock::duration oldestHeldFor();

 private:
  struct Slot {
    uint64_t bytes;  // header and padded frame
    std::chrono::steady_clock::time_point since;
  };
  SendArena(int fd, uint8_t* base, ArenaRef ref) : fd_(fd), base_(base), ref_(ref) {}
  // Forgets the slots whose receiver released them.
  void reclaim();
  std::optional<uint64_t> findRoom(uint64_t bytes) const;

  int fd_;
  uint8_t* base_;
  ArenaRef ref_;
  std::map<uint64_t, Slot> slots_;  // handed out and not yet released, by offset (of the slot header)
};

// A receiver's mapping of a peer's arena. Frames taken from it keep it mapped (the Blob owns a
// reference), so a peer's new arena can replace it while old frames are still in use.
class MappedArena : public std::enable_shared_from_this<MappedArena> {
 public:
  // Maps the arena `ref` names, checking every claim about it (see the file comment).
  static StatusOr<std::shared_ptr<MappedArena>> open(const ArenaRef& ref);
  ~MappedArena();
  MappedArena(const MappedArena&) = delete;
  MappedArena& operator=(const MappedArena&) = delete;

  uint64_t id() const { return ref_.id; }
  // The frame of `length` bytes at `offset`; dropping the Blob (every copy of it) releases its slot.
  StatusOr<Blob> frame(uint64_t offset, uint64_t length);

 private:
  MappedArena(uint8_t* base, ArenaRef ref) : base_(base), ref_(ref) {}

  uint8_t* base_;
  ArenaRef ref_;
};

}  // namespace zps::shm

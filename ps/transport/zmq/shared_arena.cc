#include "ps/transport/zmq/shared_arena.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>
#include <string>

namespace zps::shm {
namespace {

// The memfd's name, which /proc/<pid>/fd/<fd> shows as "/memfd:zps-arena (deleted)": a receiver maps
// nothing else.
constexpr char kMemfdName[] = "zps-arena";
constexpr char kMemfdLink[] = "/memfd:zps-arena";
constexpr uint64_t kArenaMagic = 0x414e455241535a50;  // "PZSARENA"
constexpr uint32_t kSlotMagic = 0x544f4c53;           // "SLOT"

struct ArenaHeader {
  uint64_t magic;
  uint64_t id;
  uint64_t capacity;
};

struct SlotHeader {
  uint32_t held;  // 1 from put() until the receiver drops the frame; used through std::atomic_ref
  uint32_t magic;
  uint64_t length;
  uint64_t arena_id;
};
static_assert(sizeof(ArenaHeader) <= kArenaHeader && sizeof(SlotHeader) <= kSlotHeader);

uint64_t padded(uint64_t n) { return (n + kSlotHeader - 1) / kSlotHeader * kSlotHeader; }

std::string errnoText() { return std::strerror(errno); }

std::atomic_ref<uint32_t> heldWord(uint8_t* slot) {
  return std::atomic_ref<uint32_t>(reinterpret_cast<SlotHeader*>(slot)->held);
}

// What a frame's Blob owns: the mapping, and the slot to release when the last copy goes.
struct HeldSlot {
  HeldSlot(std::shared_ptr<MappedArena> a, uint8_t* s) : arena(std::move(a)), slot(s) {}
  HeldSlot(const HeldSlot&) = delete;
  HeldSlot& operator=(const HeldSlot&) = delete;
  std::shared_ptr<MappedArena> arena;
  uint8_t* slot;
  ~HeldSlot() { heldWord(slot).store(0, std::memory_order_release); }
};

}  // namespace

StatusOr<std::unique_ptr<SendArena>> SendArena::create(uint64_t capacity) {
  if (capacity % kSlotHeader != 0 || capacity < kArenaHeader + 2 * kSlotHeader || capacity > kMaxArenaBytes)
    return InvalidArgument("arena capacity " + std::to_string(capacity) + " is not a usable size");
  int fd = memfd_create(kMemfdName, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return Unavailable(std::string("memfd_create: ") + errnoText());
  auto fail = [fd](const std::string& what) {
    Status s = Unavailable(what + ": " + errnoText());
    ::close(fd);
    return s;
  };
  if (ftruncate(fd, static_cast<off_t>(capacity)) != 0) return fail("ftruncate");
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) return fail("sealing the arena");
  void* base = mmap(nullptr, capacity, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) return fail("mmap");
  ArenaRef ref;
  ref.pid = static_cast<uint32_t>(::getpid());
  ref.fd = fd;
  ref.capacity = capacity;
  std::random_device rd;
  while (ref.id == 0) ref.id = (uint64_t{rd()} << 32) ^ rd();
  auto* header = static_cast<ArenaHeader*>(base);
  header->magic = kArenaMagic;
  header->id = ref.id;
  header->capacity = capacity;
  return std::unique_ptr<SendArena>(new SendArena(fd, static_cast<uint8_t*>(base), ref));
}

SendArena::~SendArena() {
  munmap(base_, ref_.capacity);
  ::close(fd_);
}

void SendArena::reclaim() {
  std::erase_if(
      slots_, [this](const auto& entry) { return heldWord(base_ + entry.first).load(std::memory_order_acquire) == 0; });
}

// First fit, from the start: the arena's pages that ever hold a frame are about as many as the bytes in
// flight at once, not the whole arena (only touched pages take memory, in both processes).
std::optional<uint64_t> SendArena::findRoom(uint64_t bytes) const {
  uint64_t start = kArenaHeader;
  for (const auto& [offset, slot] : slots_) {
    if (offset - start >= bytes) return start;
    start = offset + slot.bytes;
  }
  if (ref_.capacity - start >= bytes) return start;
  return std::nullopt;
}

std::optional<uint64_t> SendArena::put(const uint8_t* data, size_t size) {
  reclaim();
  const uint64_t bytes = kSlotHeader + padded(size);
  std::optional<uint64_t> at = findRoom(bytes);
  if (!at) return std::nullopt;
  uint8_t* slot = base_ + *at;
  auto* header = reinterpret_cast<SlotHeader*>(slot);
  header->magic = kSlotMagic;
  header->length = size;
  header->arena_id = ref_.id;
  heldWord(slot).store(1, std::memory_order_relaxed);
  std::memcpy(slot + kSlotHeader, data, size);
  slots_.emplace(*at, Slot{bytes, std::chrono::steady_clock::now()});
  return *at + kSlotHeader;
}

std::chrono::steady_clock::duration SendArena::oldestHeldFor() {
  reclaim();
  auto oldest = std::chrono::steady_clock::now();
  for (const auto& entry : slots_) oldest = std::min(oldest, entry.second.since);
  return std::chrono::steady_clock::now() - oldest;
}

StatusOr<std::shared_ptr<MappedArena>> MappedArena::open(const ArenaRef& ref) {
  if (ref.id == 0 || ref.pid == 0 || ref.fd < 0 || ref.capacity % kSlotHeader != 0 ||
      ref.capacity < kArenaHeader + 2 * kSlotHeader || ref.capacity > kMaxArenaBytes)
    return ProtocolError("arena reference (pid " + std::to_string(ref.pid) + ", fd " + std::to_string(ref.fd) + ", " +
                         std::to_string(ref.capacity) + " bytes) is out of range");
  const std::string path = "/proc/" + std::to_string(ref.pid) + "/fd/" + std::to_string(ref.fd);
  // The name first, so that nothing but a zps memfd is ever opened (a device or a pipe could block or
  // act on open); then the open file itself is checked, since the descriptor may change in between.
  char link[256];
  ssize_t n = readlink(path.c_str(), link, sizeof(link) - 1);
  if (n < 0) return Unavailable("cannot see " + path + " (" + errnoText() + "): another PID namespace?");
  link[n] = '\0';
  if (std::strncmp(link, kMemfdLink, sizeof(kMemfdLink) - 1) != 0) return ProtocolError(path + " is not a zps arena");
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return Unavailable("cannot open " + path + ": " + errnoText());
  struct stat st;
  const bool regular = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  const int seals = fcntl(fd, F_GET_SEALS);
  if (!regular || seals < 0 || (seals & F_SEAL_SHRINK) == 0 || static_cast<uint64_t>(st.st_size) != ref.capacity) {
    ::close(fd);
    return ProtocolError(path + " is not a sealed arena of " + std::to_string(ref.capacity) + " bytes");
  }
  void* base = mmap(nullptr, ref.capacity, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) return Unavailable("mmap of " + path + ": " + errnoText());
  auto arena = std::shared_ptr<MappedArena>(new MappedArena(static_cast<uint8_t*>(base), ref));
  const auto* header = static_cast<const ArenaHeader*>(base);
  if (header->magic != kArenaMagic || header->id != ref.id || header->capacity != ref.capacity)
    return ProtocolError(path + " is not the arena named (its id differs)");
  return arena;
}

MappedArena::~MappedArena() { munmap(base_, ref_.capacity); }

StatusOr<Blob> MappedArena::frame(uint64_t offset, uint64_t length) {
  if (offset % kSlotHeader != 0 || offset < kArenaHeader + kSlotHeader || offset > ref_.capacity || length == 0 ||
      length > ref_.capacity - offset)
    return ProtocolError("frame of " + std::to_string(length) + " bytes at " + std::to_string(offset) +
                         " lies outside the arena of " + std::to_string(ref_.capacity) + " bytes");
  uint8_t* slot = base_ + offset - kSlotHeader;
  const auto* header = reinterpret_cast<const SlotHeader*>(slot);
  if (header->magic != kSlotMagic || header->length != length || header->arena_id != ref_.id)
    return ProtocolError("frame at " + std::to_string(offset) + " does not match its slot header");
  auto held = std::make_shared<HeldSlot>(shared_from_this(), slot);
  return Blob(std::move(held), slot + kSlotHeader, length);
}

}  // namespace zps::shm

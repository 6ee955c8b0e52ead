#include "ps/common/checkpoint_v1.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

namespace zps {
namespace {

constexpr char kMagic[8] = {'Z', 'P', 'S', 'C', 'K', 'P', 'T', '1'};
constexpr size_t kVersion1Header = 8 + 4 + 4 + 8 + 8 + 4;

// The first `max_bytes` bytes of a regular file (all of it when shorter). A FIFO or a device planted
// under a checkpoint's name is refused, not read.
StatusOr<std::string> readRegularFile(const std::string& path, uint64_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return NotFound("checkpoint " + path + " does not exist");
    return InvalidArgument("checkpoint " + path + " cannot be read: " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgument("checkpoint " + path + " is not a regular file");
  }
  std::string data;
  try {
    data.resize(std::min<uint64_t>(static_cast<uint64_t>(st.st_size), max_bytes));
  } catch (const std::bad_alloc&) {
    ::close(fd);
    return FailedPrecondition("checkpoint " + path + ": cannot allocate " + std::to_string(st.st_size) + " bytes");
  }
  size_t got = 0;
  while (got < data.size()) {
    const ssize_t r = ::read(fd, data.data() + got, data.size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  ::close(fd);
  data.resize(got);
  return data;
}

}  // namespace

StatusOr<uint32_t> checkpointFormatVersion(const std::string& path) {
  ZPS_ASSIGN_OR_RETURN(std::string head, readRegularFile(path, 12));
  if (head.size() < 12 || std::memcmp(head.data(), kMagic, sizeof(kMagic)) != 0)
    return InvalidArgument("checkpoint " + path + " is corrupt: not a zps checkpoint (bad magic)");
  uint32_t version = 0;
  std::memcpy(&version, head.data() + 8, sizeof(version));
  return version;
}

StatusOr<CheckpointFile> readVersion1CheckpointFile(const std::string& path) {
  // The payload is as long as the file says: nothing is allocated beyond the file's own size.
  ZPS_ASSIGN_OR_RETURN(std::string data, readRegularFile(path, UINT64_MAX));
  const std::string bad = "checkpoint " + path + " is corrupt: ";
  if (data.size() < kVersion1Header) return InvalidArgument(bad + "only " + std::to_string(data.size()) + " bytes");
  PayloadReader r(data);
  char magic[8];
  uint32_t version = 0, kind = 0, crc = 0;
  uint64_t length = 0;
  CheckpointFile f;
  r.getBytes(magic, sizeof(magic));
  r.get(&version);
  r.get(&kind);
  r.get(&f.shape.step);
  r.get(&length);
  r.get(&crc);
  if (std::memcmp(magic, kMagic, sizeof(kMagic)) != 0) return InvalidArgument(bad + "not a zps checkpoint (bad magic)");
  if (version != 1) return InvalidArgument(bad + "format version " + std::to_string(version) + ", expected 1");
  if (kind != static_cast<uint32_t>(CheckpointKind::kDenseModel) &&
      kind != static_cast<uint32_t>(CheckpointKind::kParamTable))
    return InvalidArgument(bad + "unknown kind " + std::to_string(kind));
  f.shape.kind = static_cast<CheckpointKind>(kind);
  if (length != r.remaining())
    return InvalidArgument(bad + "header says " + std::to_string(length) + " payload bytes, file has " +
                           std::to_string(r.remaining()) + " (truncated?)");
  data.erase(0, kVersion1Header);
  f.payload = std::move(data);
  if (crc32(f.payload.data(), f.payload.size()) != crc) return InvalidArgument(bad + "CRC mismatch");
  return f;
}

}  // namespace zps

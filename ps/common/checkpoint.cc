#include "ps/common/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>

namespace zps {
namespace {

constexpr char kMagic[8] = {'Z', 'P', 'S', 'C', 'K', 'P', 'T', '1'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 8 + 8 + 4;

std::array<uint32_t, 256> makeCrcTable() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    t[i] = c;
  }
  return t;
}

std::string errnoText() { return std::strerror(errno); }

Status writeAll(int fd, const char* data, size_t n, const std::string& path) {
  while (n > 0) {
    ssize_t w = ::write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return Unavailable("writing " + path + ": " + errnoText());
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
  return Status::OK();
}

}  // namespace

uint32_t crc32(const void* data, size_t size) {
  static const std::array<uint32_t, 256> table = makeCrcTable();
  uint32_t c = 0xFFFFFFFFu;
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < size; ++i) c = table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

bool PayloadReader::getBytes(void* p, size_t n) {
  if (n > in_.size() - pos_) return false;
  if (n == 0) return true;  // p may be an empty vector's null data()
  std::memcpy(p, in_.data() + pos_, n);
  pos_ += n;
  return true;
}

Status writeFileAtomically(const std::string& path, const std::string& contents) {
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Unavailable("cannot create " + tmp + ": " + errnoText());
  Status s = writeAll(fd, contents.data(), contents.size(), tmp);
  if (s.ok() && ::fsync(fd) != 0) s = Unavailable("fsync " + tmp + ": " + errnoText());
  ::close(fd);
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) s = Unavailable("rename to " + path + ": " + errnoText());
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  std::string dir = path.substr(0, path.rfind('/') == std::string::npos ? 0 : path.rfind('/'));
  int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);  // makes the rename itself durable
    ::close(dfd);
  }
  return Status::OK();
}

Status writeCheckpointFile(const std::string& path, CheckpointKind kind, uint64_t step, const std::string& payload) {
  PayloadWriter w;
  w.putBytes(kMagic, sizeof(kMagic));
  w.put(kVersion);
  w.put(static_cast<uint32_t>(kind));
  w.put(step);
  w.put(static_cast<uint64_t>(payload.size()));
  w.put(crc32(payload.data(), payload.size()));
  std::string file = w.take();
  file += payload;
  return writeFileAtomically(path, file);
}

StatusOr<CheckpointFile> readCheckpointFile(const std::string& path, CheckpointKind expected_kind) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("checkpoint " + path + " does not exist or cannot be read");
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string bad = "checkpoint " + path + " is corrupt: ";
  if (data.size() < kHeaderBytes) return InvalidArgument(bad + "only " + std::to_string(data.size()) + " bytes");
  PayloadReader r(data);
  char magic[8];
  uint32_t version = 0, kind = 0, crc = 0;
  uint64_t step = 0, length = 0;
  r.getBytes(magic, sizeof(magic));
  r.get(&version);
  r.get(&kind);
  r.get(&step);
  r.get(&length);
  r.get(&crc);
  if (std::memcmp(magic, kMagic, sizeof(kMagic)) != 0) return InvalidArgument(bad + "not a zps checkpoint (bad magic)");
  if (version != kVersion)
    return InvalidArgument(bad + "format version " + std::to_string(version) + ", this zps reads version " +
                           std::to_string(kVersion));
  if (kind != static_cast<uint32_t>(expected_kind))
    return InvalidArgument(bad + "holds kind " + std::to_string(kind) + ", expected " +
                           std::to_string(static_cast<uint32_t>(expected_kind)));
  if (length != r.remaining())
    return InvalidArgument(bad + "header says " + std::to_string(length) + " payload bytes, file has " +
                           std::to_string(r.remaining()) + " (truncated?)");
  CheckpointFile f;
  f.kind = expected_kind;
  f.step = step;
  f.payload = data.substr(kHeaderBytes);
  if (crc32(f.payload.data(), f.payload.size()) != crc) return InvalidArgument(bad + "CRC mismatch");
  return f;
}

}  // namespace zps

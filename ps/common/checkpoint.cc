#include "ps/common/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <new>

namespace zps {
namespace {

constexpr char kMagic[8] = {'Z', 'P', 'S', 'C', 'K', 'P', 'T', '1'};
constexpr uint32_t kVersion = 2;
// magic, version, kind, step, server rank, servers, job id, name length; then the name; then
// payload length, payload CRC, header CRC.
constexpr size_t kFixedHead = 8 + 4 + 4 + 8 + 4 + 4 + 8 + 4;
constexpr size_t kFixedTail = 8 + 4 + 4;

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

// Reads exactly n bytes; false on a short file or an error.
bool readExactly(int fd, char* out, size_t n) {
  while (n > 0) {
    ssize_t r = ::read(fd, out, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    out += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016" PRIx64, v);
  return buf;
}

// A version 1 file (a format zps wrote for one day, before any release) is not damaged, only old,
// and records no job shape to check it against: say so, and what to do instead.
std::string version1Refusal(const std::string& path) {
  return "checkpoint " + path + " has format version 1, which this zps no longer reads (it reads version " +
         std::to_string(kVersion) + "): start the job without it, from a new checkpoint folder";
}

std::string serverText(uint32_t rank) { return rank == kNoServer ? "none" : std::to_string(rank); }

// Each field of `found` that `expected` pins down and that differs, as "step 20 (expected 40)".
std::string differences(const CheckpointShape& found, const CheckpointShape& expected) {
  std::string out;
  auto add = [&out](const std::string& what) { out += (out.empty() ? "" : ", ") + what; };
  if (found.step != expected.step)
    add("step " + std::to_string(found.step) + " (expected " + std::to_string(expected.step) + ")");
  if (found.server_rank != expected.server_rank)
    add("server rank " + serverText(found.server_rank) + " (expected " + serverText(expected.server_rank) + ")");
  if (expected.num_servers != 0 && found.num_servers != expected.num_servers)
    add("number of servers " + std::to_string(found.num_servers) + " (expected " +
        std::to_string(expected.num_servers) + ")");
  if (found.table != expected.table) add("table '" + found.table + "' (expected '" + expected.table + "')");
  if (found.job_id != expected.job_id)
    add("job id " + hex64(found.job_id) + " (expected " + hex64(expected.job_id) +
        ", this folder's job-id: the file comes from another checkpoint folder)");
  return out;
}

}  // namespace

std::string CheckpointShape::describe() const {
  std::string s = "step " + std::to_string(step);
  if (server_rank != kNoServer) s += ", server " + std::to_string(server_rank) + " of " + std::to_string(num_servers);
  if (!table.empty()) s += ", table '" + table + "'";
  return s + ", job " + hex64(job_id);
}

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

bool PayloadReader::skip(size_t n) {
  if (n > in_.size() - pos_) return false;
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

Status writeCheckpointFile(const std::string& path, const CheckpointShape& shape, const std::string& payload) {
  if (shape.table.size() > kMaxCheckpointTableName)
    return InvalidArgument("table name of " + std::to_string(shape.table.size()) + " bytes is too long to checkpoint");
  PayloadWriter w;
  w.putBytes(kMagic, sizeof(kMagic));
  w.put(kVersion);
  w.put(static_cast<uint32_t>(shape.kind));
  w.put(shape.step);
  w.put(shape.server_rank);
  w.put(shape.num_servers);
  w.put(shape.job_id);
  w.put(static_cast<uint32_t>(shape.table.size()));
  w.putBytes(shape.table.data(), shape.table.size());
  w.put(static_cast<uint64_t>(payload.size()));
  w.put(crc32(payload.data(), payload.size()));
  std::string file = w.take();
  const uint32_t header_crc = crc32(file.data(), file.size());
  file.append(reinterpret_cast<const char*>(&header_crc), sizeof(header_crc));
  file += payload;
  return writeFileAtomically(path, file);
}

namespace {

// An open checkpoint file whose header has been read and checked; the payload follows.
struct OpenCheckpoint {
  int fd = -1;
  CheckpointShape shape;
  uint64_t payload_bytes = 0;
  uint32_t payload_crc = 0;
  ~OpenCheckpoint() {
    if (fd >= 0) ::close(fd);
  }
};

Status openCheckpoint(const std::string& path, OpenCheckpoint* f) {
  // O_NONBLOCK: a FIFO planted under a checkpoint's name must not block the open.
  f->fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (f->fd < 0) {
    if (errno == ENOENT) return NotFound("checkpoint " + path + " does not exist");
    return InvalidArgument("checkpoint " + path + " cannot be read: " + errnoText());
  }
  const std::string bad = "checkpoint " + path + " is corrupt: ";
  struct stat st {};
  if (::fstat(f->fd, &st) != 0 || !S_ISREG(st.st_mode))
    return InvalidArgument("checkpoint " + path + " is not a regular file");
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  std::string head(kFixedHead, '\0');
  const size_t got = static_cast<size_t>(std::min<uint64_t>(size, kFixedHead));
  if (!readExactly(f->fd, head.data(), got)) return InvalidArgument(bad + "cannot read its header");
  // A version 1 file (whose header is shorter) is old, not damaged: it is told apart first.
  uint32_t early_version = 0;
  if (got >= sizeof(kMagic) + sizeof(early_version)) std::memcpy(&early_version, head.data() + sizeof(kMagic), 4);
  if (early_version == 1 && std::memcmp(head.data(), kMagic, sizeof(kMagic)) == 0)
    return InvalidArgument(version1Refusal(path));
  if (size < kFixedHead + kFixedTail) return InvalidArgument(bad + "only " + std::to_string(size) + " bytes");
  PayloadReader r(head);
  char magic[8];
  uint32_t version = 0, kind = 0, name_len = 0;
  r.getBytes(magic, sizeof(magic));
  r.get(&version);
  r.get(&kind);
  r.get(&f->shape.step);
  r.get(&f->shape.server_rank);
  r.get(&f->shape.num_servers);
  r.get(&f->shape.job_id);
  r.get(&name_len);
  if (std::memcmp(magic, kMagic, sizeof(kMagic)) != 0) return InvalidArgument(bad + "not a zps checkpoint (bad magic)");
  if (version != kVersion)
    return InvalidArgument(bad + "format version " + std::to_string(version) + ", this zps reads version " +
                           std::to_string(kVersion));
  if (kind != static_cast<uint32_t>(CheckpointKind::kDenseModel) &&
      kind != static_cast<uint32_t>(CheckpointKind::kParamTable) &&
      kind != static_cast<uint32_t>(CheckpointKind::kParamTableIncrement))
    return InvalidArgument(bad + "unknown kind " + std::to_string(kind));
  f->shape.kind = static_cast<CheckpointKind>(kind);
  if (name_len > kMaxCheckpointTableName || name_len > size - kFixedHead - kFixedTail)
    return InvalidArgument(bad + "table name length " + std::to_string(name_len) + " is out of range");
  f->shape.table.resize(name_len);
  std::string tail(kFixedTail, '\0');
  if (!readExactly(f->fd, f->shape.table.data(), name_len) || !readExactly(f->fd, tail.data(), kFixedTail))
    return InvalidArgument(bad + "truncated header");
  uint32_t header_crc = 0;
  PayloadReader t(tail);
  t.get(&f->payload_bytes);
  t.get(&f->payload_crc);
  t.get(&header_crc);
  const std::string covered = head + f->shape.table + tail.substr(0, kFixedTail - 4);
  if (crc32(covered.data(), covered.size()) != header_crc) return InvalidArgument(bad + "header CRC mismatch");
  const uint64_t header_bytes = kFixedHead + name_len + kFixedTail;
  if (f->payload_bytes != size - header_bytes)
    return InvalidArgument(bad + "header says " + std::to_string(f->payload_bytes) + " payload bytes, file has " +
                           std::to_string(size - header_bytes) + " (truncated?)");
  if (f->shape.server_rank != kNoServer &&
      (f->shape.num_servers > kMaxCheckpointServers || f->shape.server_rank >= f->shape.num_servers))
    return InvalidArgument(bad + "server rank " + std::to_string(f->shape.server_rank) + " of " +
                           std::to_string(f->shape.num_servers) + " servers is out of range");
  return Status::OK();
}

StatusOr<CheckpointFile> readPayload(const std::string& path, const OpenCheckpoint& open, uint64_t max_payload_bytes) {
  if (open.payload_bytes > max_payload_bytes)
    return InvalidArgument("checkpoint " + path + " holds " + std::to_string(open.payload_bytes) +
                           " payload bytes, more than the " + std::to_string(max_payload_bytes) +
                           " this reader may hold");
  CheckpointFile f;
  f.shape = open.shape;
  try {
    f.payload.resize(open.payload_bytes);
  } catch (const std::bad_alloc&) {
    return FailedPrecondition("checkpoint " + path + ": cannot allocate " + std::to_string(open.payload_bytes) +
                              " bytes for its payload");
  }
  if (!readExactly(open.fd, f.payload.data(), f.payload.size()))
    return InvalidArgument("checkpoint " + path + " is corrupt: truncated payload");
  if (crc32(f.payload.data(), f.payload.size()) != open.payload_crc)
    return InvalidArgument("checkpoint " + path + " is corrupt: CRC mismatch");
  return f;
}

}  // namespace

StatusOr<CheckpointShape> readCheckpointShape(const std::string& path) {
  OpenCheckpoint f;
  ZPS_RETURN_IF_ERROR(openCheckpoint(path, &f));
  return f.shape;
}

StatusOr<CheckpointFile> readAnyCheckpointFile(const std::string& path, uint64_t max_payload_bytes) {
  OpenCheckpoint open;
  ZPS_RETURN_IF_ERROR(openCheckpoint(path, &open));
  return readPayload(path, open, max_payload_bytes);
}

Status checkCheckpointShape(const std::string& path, const CheckpointShape& found, const CheckpointShape& expected) {
  if (found.kind != expected.kind)
    return InvalidArgument("checkpoint " + path + " holds kind " + std::to_string(static_cast<uint32_t>(found.kind)) +
                           ", expected " + std::to_string(static_cast<uint32_t>(expected.kind)));
  const std::string diff = differences(found, expected);
  if (!diff.empty())
    return InvalidArgument("checkpoint " + path + " belongs to another job shape, refused: it records " + diff);
  return Status::OK();
}

StatusOr<CheckpointFile> readCheckpointFile(const std::string& path, const CheckpointShape& expected,
                                            uint64_t max_payload_bytes) {
  // The header is checked before the payload is read: a shard of another job costs no payload read.
  OpenCheckpoint open;
  ZPS_RETURN_IF_ERROR(openCheckpoint(path, &open));
  ZPS_RETURN_IF_ERROR(checkCheckpointShape(path, open.shape, expected));
  return readPayload(path, open, max_payload_bytes);
}

}  // namespace zps

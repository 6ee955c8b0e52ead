#include "worker/local/byte_lock.h"

#include <fcntl.h>

namespace zps {
namespace {

// A write lock on the single byte `offset`.
struct flock byteWriteLock(off_t offset) {
  struct flock lock = {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  lock.l_start = offset;
  lock.l_len = 1;
  return lock;
}

}  // namespace

bool lockByte(int fd, off_t offset) {
  struct flock lock = byteWriteLock(offset);
  return fcntl(fd, F_OFD_SETLK, &lock) == 0;
}

bool byteLocked(int fd, off_t offset) {
  struct flock lock = byteWriteLock(offset);
  if (fcntl(fd, F_OFD_GETLK, &lock) != 0) return true;  // cannot tell: assume alive
  return lock.l_type != F_UNLCK;
}

}  // namespace zps

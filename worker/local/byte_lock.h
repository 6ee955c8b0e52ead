// Liveness through file locks: a process holds the write lock on one byte of a shared file for as
// long as it lives, and the others ask whether that byte is still locked. The locks are open file
// description locks (F_OFD_*), so they belong to one open() of the file, not to the process: the
// kernel drops them when the process dies, however it dies, and two threads that opened the file
// separately see each other's locks (the unit tests run a node's local ranks as threads). Used by
// LocalGroup (worker/local/local_group.h); plain functions, any thread.
#pragma once

#include <sys/types.h>

namespace zps {

// Takes the write lock on byte `offset` of `fd`; false when another open file description holds it
// (or fcntl fails).
bool lockByte(int fd, off_t offset);

// Whether another open file description holds the write lock on byte `offset` of `fd`. True when it
// cannot tell: a peer is taken for alive rather than dead on a failed check.
bool byteLocked(int fd, off_t offset);

}  // namespace zps

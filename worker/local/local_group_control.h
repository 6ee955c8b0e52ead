// What the local ranks of one node share in memory (worker/local/local_group.h): the control
// segment's layout and the helpers that read and write it. Private to local_group*.cc.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>

#include "worker/local/local_group.h"

namespace zps::local_control {

constexpr uint64_t kMagic = 0x7a70736c6f63616cull;  // "zpslocal"
constexpr size_t kTextBytes = 512;
constexpr size_t kBookBytes = size_t{1} << 20;
constexpr size_t kNcclIdBytes = 256;  // NCCL_UNIQUE_ID_BYTES is 128
constexpr size_t kPage = 4096;

// Copies at most kTextBytes - 1 bytes of `text` into a text field of the segment, terminated.
inline void copyText(char* dst, const std::string& text) {
  const size_t n = std::min(text.size(), kTextBytes - 1);
  std::memcpy(dst, text.data(), n);
  dst[n] = '\0';
}

// A plain field of the segment, accessed atomically.
template <typename T>
inline std::atomic_ref<T> shared(T& field) {
  return std::atomic_ref<T>(field);
}

}  // namespace zps::local_control

namespace zps {

// The control segment. Plain fields accessed through std::atomic_ref: the mapping starts as zero
// bytes, which is a valid state for every field, and no constructor runs in shared memory.
struct LocalGroup::Control {
  uint64_t magic;
  uint32_t size;
  uint32_t attached;
  int32_t pids[kMaxLocalSize];
  uint64_t barrier_arrivals;
  // Worker::barrier's own arrivals (workerBarrier), two per barrier.
  uint64_t worker_barrier_arrivals;
  uint32_t aborted;  // 0 healthy, 1 being written, 2 reason ready
  char abort_reason[local_control::kTextBytes];
  struct Report {
    uint32_t done;
    uint32_t ok;
    char message[local_control::kTextBytes];
    LocalTraffic traffic;
  } reports[kMaxLocalSize];
  uint32_t exit_ready;
  int32_t exit_code;
  char exit_reason[local_control::kTextBytes];
  uint32_t book_ready;
  uint32_t book_bytes;
  char book[local_control::kBookBytes];
  uint32_t nccl_id_ready;
  uint32_t nccl_id_bytes;
  char nccl_id[local_control::kNcclIdBytes];
  // inTurn: the newest local operation local rank 0 announced, what it is, and the newest one each
  // rank has started.
  uint64_t turn;
  uint64_t turn_op;
  char turn_what[local_control::kTextBytes];
  uint64_t turns_taken[kMaxLocalSize];
  // Recovery: the newest generation a local rank heard of and what was lost; the epoch each peer
  // moves to once it has reached restart(); where the staging arenas continue after a restart.
  uint64_t recovery_generation;
  char recovery_reason[local_control::kTextBytes];
  uint64_t restart_arrived[kMaxLocalSize];
  uint64_t data_offset;
  // Job end: 1 once a rank has its exit code and is about to leave. Its liveness lock then goes
  // with it, which is no death (deadPeer).
  uint32_t left[kMaxLocalSize];
};

// One message from the root to its peers, posted once: a ready flag, a length and the bytes.
struct LocalGroup::Mailbox {
  uint32_t* ready;
  uint32_t* bytes;
  char* data;
  size_t capacity;
};

static_assert(std::atomic_ref<uint64_t>::is_always_lock_free && std::atomic_ref<uint32_t>::is_always_lock_free,
              "the local reducer needs lock-free atomics in shared memory");

}  // namespace zps

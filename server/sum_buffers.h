// SumBuffers: the buffers one key's rounds are summed into, reused from round to round. A round's sum
// lives while a reply being sent or a kept result holds it; when the last holder lets go it comes back
// here, not to the heap, so a key costs about as many buffers as its rounds hold at once. Allocating a
// fresh buffer each round let the allocator's per-thread heaps (which keep freed memory, see
// keepFreedMessageMemory) grow several times past what was in use.
//
// Thread-safe: buffers come back from whichever thread drops them last (an engine, the I/O thread).
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "ps/common/blob.h"

namespace zps {

class SumBuffers : public std::enable_shared_from_this<SumBuffers> {
 public:
  // Buffers of `bytes`; at most `kept` idle ones are kept for the next rounds, the rest are freed.
  static std::shared_ptr<SumBuffers> create(size_t bytes, size_t kept);

  // An idle buffer, or a new one; its contents are whatever the last round left.
  std::shared_ptr<AlignedBuffer> take();
  size_t idle();

 private:
  SumBuffers(size_t bytes, size_t kept) : bytes_(bytes), kept_(kept) {}
  void giveBack(AlignedBuffer* buffer);

  const size_t bytes_;
  const size_t kept_;
  std::mutex mu_;
  std::vector<std::unique_ptr<AlignedBuffer>> idle_;
};

}  // namespace zps

#include "server/sum_buffers.h"

namespace zps {

std::shared_ptr<SumBuffers> SumBuffers::create(size_t bytes, size_t kept) {
  return std::shared_ptr<SumBuffers>(new SumBuffers(bytes, kept));
}

std::shared_ptr<AlignedBuffer> SumBuffers::take() {
  std::unique_ptr<AlignedBuffer> buffer;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      buffer = std::move(idle_.back());
      idle_.pop_back();
    }
  }
  if (buffer == nullptr) buffer = std::make_unique<AlignedBuffer>(bytes_);
  // The deleter holds the pool, so a buffer outliving its key (a reply still being sent) comes back
  // to a pool that still exists, and is freed with it.
  return std::shared_ptr<AlignedBuffer>(buffer.release(),
                                        [pool = shared_from_this()](AlignedBuffer* b) { pool->giveBack(b); });
}

size_t SumBuffers::idle() {
  std::lock_guard<std::mutex> lock(mu_);
  return idle_.size();
}

void SumBuffers::giveBack(AlignedBuffer* buffer) {
  std::unique_ptr<AlignedBuffer> owned(buffer);
  std::lock_guard<std::mutex> lock(mu_);
  if (idle_.size() < kept_) idle_.push_back(std::move(owned));
}

}  // namespace zps

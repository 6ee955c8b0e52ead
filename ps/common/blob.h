// Blob: an immutable byte range plus a shared owner that keeps the bytes alive. Frames received from
// ZeroMQ are Blobs whose owner is the zmq_msg_t itself (zero-copy receive); frames we send are Blobs whose
// owner ZeroMQ's free callback releases (zero-copy send). Copying a Blob copies a pointer, never the bytes.
// Thread-safe to copy and read from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <string_view>

namespace zps {

// A heap buffer aligned for vector loads (64 bytes). Owned through shared_ptr so a result buffer can be
// sent to many pullers at once without copies.
class AlignedBuffer {
 public:
  static constexpr size_t kAlignment = 64;
  explicit AlignedBuffer(size_t size) : size_(size) {
    // aligned_alloc needs a size that is a multiple of the alignment (and non-zero).
    size_t rounded = size == 0 ? kAlignment : (size + kAlignment - 1) / kAlignment * kAlignment;
    data_ = static_cast<uint8_t*>(std::aligned_alloc(kAlignment, rounded));
    if (data_ == nullptr) throw std::bad_alloc();
  }
  ~AlignedBuffer() { std::free(data_); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  uint8_t* data_;
  size_t size_;
};

class Blob {
 public:
  Blob() = default;
  Blob(std::shared_ptr<const void> owner, const void* data, size_t size)
      : owner_(std::move(owner)), data_(static_cast<const uint8_t*>(data)), size_(size) {}

  static Blob copyOf(const void* data, size_t size) {
    auto buf = std::make_shared<AlignedBuffer>(size);
    if (size > 0) std::memcpy(buf->data(), data, size);
    return fromBuffer(std::move(buf));
  }
  static Blob fromString(std::string s) {
    auto owner = std::make_shared<std::string>(std::move(s));
    return Blob(owner, owner->data(), owner->size());
  }
  static Blob fromBuffer(std::shared_ptr<AlignedBuffer> buf) {
    const void* d = buf->data();
    size_t n = buf->size();
    return Blob(std::move(buf), d, n);
  }

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::string_view view() const { return {reinterpret_cast<const char*>(data_), size_}; }
  const std::shared_ptr<const void>& owner() const { return owner_; }

 private:
  std::shared_ptr<const void> owner_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace zps

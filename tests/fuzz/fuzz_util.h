// Helpers shared by the fuzz targets. Each target is one LLVMFuzzerTestOneInput that is linked
// twice: with libFuzzer (clang, -DZPS_BUILD_FUZZ=ON) and with replay_main.cc (any compiler, in
// ctest). So nothing here may depend on libFuzzer.
#pragma once

#include <glog/logging.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "ps/common/blob.h"

// A property the code under test promised and broke. abort() is what libFuzzer records as a crash
// (and saves the input for), and what makes a replay fail in an ordinary build, where a silent
// wrong answer would otherwise pass.
#define ZPS_FUZZ_CHECK(cond)                                                                \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      std::fprintf(stderr, "%s:%d: fuzz property failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                         \
    }                                                                                       \
  } while (0)

namespace zps::fuzz {

// Once per process: the code under test logs every rejected input, and at millions of inputs the
// log lines (not the parsing) would be what we measure.
inline void quietLogging() {
  static const bool done = [] {
    FLAGS_minloglevel = google::GLOG_FATAL;
    return true;
  }();
  (void)done;
}

// A scratch folder of this process, removed at exit. One per process (not per input) because the
// readers under test take paths, and creating a folder per input would cost more than the parse.
// mkdtemp keeps concurrent replays (ctest -j) and fuzzer jobs apart. Unless TMPDIR says otherwise
// it lives in /dev/shm: rewriting a file on a disk-backed /tmp costs milliseconds (25x fewer execs
// per second on a VM disk), in memory microseconds.
class ScratchDir {
 public:
  static const std::string& path() {
    static ScratchDir dir;
    return dir.path_;
  }

 private:
  ScratchDir() {
    std::error_code ec;
    std::filesystem::path base = "/dev/shm";
    if (std::getenv("TMPDIR") != nullptr || access(base.c_str(), W_OK) != 0) {
      base = std::filesystem::temp_directory_path(ec);
      if (ec) base = "/tmp";
    }
    std::string pattern = (base / "zps-fuzz-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      std::perror("zps fuzz: mkdtemp");
      std::abort();
    }
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }

  std::string path_;
};

// Replaces the file's contents with the fuzz input (truncating: the previous input must not show
// through).
inline void writeFile(const std::string& path, const uint8_t* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  out.close();
  if (!out) {
    std::fprintf(stderr, "zps fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
}

// A frame in its own exactly-sized heap block (even when empty), as a zmq_msg_t is, so that
// AddressSanitizer flags a read one byte past any frame.
inline Blob exactCopy(const uint8_t* data, size_t size) {
  std::shared_ptr<uint8_t[]> bytes(new uint8_t[size]);
  if (size > 0) std::memcpy(bytes.get(), data, size);
  const uint8_t* p = bytes.get();
  return Blob(std::shared_ptr<const void>(bytes, p), p, size);
}

// Cuts one message's frames out of fuzz bytes, so that libFuzzer moves frame boundaries as well as
// bytes. Layout: byte 0 bits 0-2 = frame count (value % 5: 0 and 4 frames are tried too, both
// invalid; the other bits are the caller's); then one 2-byte little-endian length per frame but
// the last (clamped to what is left); then the frames back to back, the last taking the rest.
inline std::vector<Blob> splitFrames(const uint8_t* data, size_t size) {
  std::vector<Blob> frames;
  if (size == 0) return frames;
  const size_t num_frames = (data[0] & 7) % 5;
  size_t pos = 1;
  size_t lengths[4] = {0, 0, 0, 0};
  for (size_t i = 0; i + 1 < num_frames; ++i) {
    if (size - pos >= 2) {
      lengths[i] = data[pos] | (size_t{data[pos + 1]} << 8);
      pos += 2;
    }
  }
  for (size_t i = 0; i < num_frames; ++i) {
    const size_t left = size - pos;
    const size_t len = i + 1 == num_frames ? left : std::min(lengths[i], left);
    frames.push_back(exactCopy(data + pos, len));
    pos += len;
  }
  return frames;
}

}  // namespace zps::fuzz

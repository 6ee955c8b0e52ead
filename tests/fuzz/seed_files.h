// What the seed writers of tests/fuzz/make_seeds.cc share: where the corpus goes, how a seed file is
// written, and the byte layouts several fuzz targets read.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "ps/common/blob.h"

namespace zps::fuzz {

// The corpus root, set once by main: seeds go to <root>/<target>/seed-<name>.
inline std::filesystem::path& seedRoot() {
  static std::filesystem::path root;
  return root;
}

inline void put(const std::string& target, const std::string& name, const std::string& bytes) {
  std::filesystem::create_directories(seedRoot() / target);
  std::ofstream out(seedRoot() / target / ("seed-" + name), std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) {
    std::fprintf(stderr, "cannot write seed %s/%s\n", target.c_str(), name.c_str());
    std::exit(1);
  }
}

inline std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A sparse payload: the indices, then a float32 value for each.
inline Blob sparseBytes(const std::vector<uint32_t>& indices) {
  std::vector<float> values(indices.size(), 1.5f);
  std::string s(indices.size() * 8, '\0');
  std::memcpy(s.data(), indices.data(), indices.size() * 4);
  std::memcpy(s.data() + indices.size() * 4, values.data(), values.size() * 4);
  return Blob::fromString(s);
}

// The wire fuzzer's input (wire_fuzzer.cc): the frame count (| 0x80: tight), each frame's 2-byte size
// but the last's, then the frames.
inline std::string packFrames(const std::vector<Blob>& frames, bool tight = false) {
  std::string s(1, static_cast<char>(frames.size() | (tight ? 0x80 : 0)));
  for (size_t i = 0; i + 1 < frames.size(); ++i) {
    s.push_back(static_cast<char>(frames[i].size() & 0xFF));
    s.push_back(static_cast<char>(frames[i].size() >> 8));
  }
  for (const Blob& f : frames) s.append(f.view());
  return s;
}

inline Blob bytesOf(size_t n, uint8_t start = 1) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(start + i);
  return Blob::fromString(s);
}

// The wire target's seeds (wire_seeds.cc).
void wireSeeds();

}  // namespace zps::fuzz
